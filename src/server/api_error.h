// OpenAI-style API errors: an HTTP status plus the JSON error object clients parse,
// {"error": {"message", "type", "param", "code"}}, and ApiExpected<T> for parsers that fail with one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>

#include "core/status.h"

namespace kvs::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty renders as null
  std::string code;   // a machine-readable code; empty renders as null

  static ApiError invalid(std::string param, std::string message, std::string code = {}) {
    return ApiError{
        .http_status = 400, .message = std::move(message), .param = std::move(param), .code = std::move(code)};
  }
  static ApiError of(int http_status, std::string type, std::string code, std::string message, std::string param = {}) {
    return ApiError{.http_status = http_status,
                    .message = std::move(message),
                    .type = std::move(type),
                    .param = std::move(param),
                    .code = std::move(code)};
  }
  nlohmann::json to_json() const;
};

// How a Status from the engine (submit) reaches the client: out_of_range (prompt longer than the
// context) and other caller errors are 400s naming the status's field, or `default_param` when it names
// none; unavailable (the engine is shutting down) is a 503; anything else is a 500 server_error.
ApiError api_error_from_status(const Status& status, const std::string& default_param);

template <class T>
class [[nodiscard]] ApiExpected {
 public:
  ApiExpected(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  ApiExpected(ApiError error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool has_value() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &std::get<T>(state_); }
  const ApiError& error() const { return std::get<ApiError>(state_); }

 private:
  std::variant<T, ApiError> state_;
};

}  // namespace kvs::server
