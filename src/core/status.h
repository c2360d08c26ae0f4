// Status and Expected<T>: expected failures are values that carry a message with the numbers.
// Bugs are assertions (KVS_ASSERT), which abort with a formatted message.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace kvs {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller gave a bad value (flag, request field, shape)
  kNotFound,         // a file, key or tensor does not exist
  kIoError,          // the OS refused a read or write
  kCorrupt,          // a file exists but its content is malformed
  kOutOfMemory,      // a budget (KV pool, buffer) cannot hold what was asked
  kOutOfRange,       // e.g. prompt longer than the context
  kUnimplemented,    // a valid input that this build does not support
  kUnavailable,      // not taking work now (e.g. shutting down); the same call may work elsewhere or later
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return {}; }
  static Status invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
  static Status io_error(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
  static Status corrupt(std::string m) { return {ErrorCode::kCorrupt, std::move(m)}; }
  static Status out_of_memory(std::string m) { return {ErrorCode::kOutOfMemory, std::move(m)}; }
  static Status out_of_range(std::string m) { return {ErrorCode::kOutOfRange, std::move(m)}; }
  static Status unimplemented(std::string m) { return {ErrorCode::kUnimplemented, std::move(m)}; }
  static Status unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Prefixes context ("reading model.gguf: ...") while keeping the code.
  Status with_context(const std::string& context) const {
    Status s = *this;
    if (!is_ok()) s.message_ = context + ": " + message_;
    return s;
  }
  // The request field the error is about (e.g. "kv_policy"), for an API to name; empty when not one field.
  Status with_field(std::string field) const {
    Status s = *this;
    s.field_ = std::move(field);
    return s;
  }
  const std::string& field() const { return field_; }

 private:
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::string field_;
};

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : state_(std::move(status)) {
    if (std::get<Status>(state_).is_ok()) std::abort();  // an ok Status is not an error
  }

  bool has_value() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Status& status() const { return std::get<Status>(state_); }

 private:
  std::variant<T, Status> state_;
};

[[noreturn]] inline void assertion_failed(const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "kvserve: internal error at %s:%d: %s\n", file, line, message.c_str());
  std::abort();
}

}  // namespace kvs

// KVS_ASSERT(cond, "fmt {}", args...): a broken invariant is a bug, never an expected failure.
#define KVS_ASSERT(cond, ...)                                                           \
  do {                                                                                  \
    if (!(cond)) ::kvs::assertion_failed(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

// Propagates a non-ok Status from an expression returning Status.
#define KVS_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::kvs::Status kvs_status_ = (expr);           \
    if (!kvs_status_.is_ok()) return kvs_status_; \
  } while (0)
