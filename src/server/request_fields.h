// Reading an OpenAI request body's fields (nlohmann::json) with errors in OpenAI's shape that name the field and the
// value at fault ("'temperature' must be a number, got string \"hot\""). Shared by the request's parsers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/api_error.h"

namespace kvs::server {

using MaybeError = std::optional<ApiError>;

// Returns the error of an expression that may fail.
#define KVS_API_TRY(expr)                                  \
  do {                                                     \
    if (::kvs::server::MaybeError e_ = (expr)) return *e_; \
  } while (0)

std::string type_name(const nlohmann::json& v);
// A value shortened for an error message.
std::string shown(const nlohmann::json& v);
ApiError wrong_type(const std::string& param, const char* expected, const nlohmann::json& v);
ApiError unsupported(const std::string& param, const std::string& what);
MaybeError read_number(const nlohmann::json& v, const std::string& param, double lo, double hi, double& out);
MaybeError read_int(const nlohmann::json& v, const std::string& param, int64_t lo, int64_t hi, int64_t& out);
MaybeError read_bool(const nlohmann::json& v, const std::string& param, bool& out);
MaybeError read_string(const nlohmann::json& v, const std::string& param, std::string& out);

}  // namespace kvs::server
