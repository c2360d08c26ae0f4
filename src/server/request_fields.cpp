#include "server/request_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kvs::server {

using nlohmann::json;

std::string type_name(const json& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

ApiError wrong_type(const std::string& param, const char* expected, const json& v) {
  return ApiError::invalid(param, fmt::format("'{}' must be {}, got {} {}", param, expected, type_name(v), shown(v)),
                           "invalid_type");
}

MaybeError read_number(const json& v, const std::string& param, double lo, double hi, double& out) {
  if (!v.is_number()) return wrong_type(param, "a number", v);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    return ApiError::invalid(param, fmt::format("'{}' must be between {} and {}, got {}", param, lo, hi, shown(v)));
  }
  out = x;
  return std::nullopt;
}

MaybeError read_int(const json& v, const std::string& param, int64_t lo, int64_t hi, int64_t& out) {
  const bool integral_float = v.is_number_float() && std::isfinite(v.get<double>()) &&
                              std::floor(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 9e18;
  if (!v.is_number_integer() && !integral_float) return wrong_type(param, "an integer", v);
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    x = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                       : static_cast<int64_t>(u);
  } else {
    x = integral_float ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
  }
  if (x < lo || x > hi) {
    return ApiError::invalid(param, fmt::format("'{}' must be between {} and {}, got {}", param, lo, hi, shown(v)));
  }
  out = x;
  return std::nullopt;
}

MaybeError read_bool(const json& v, const std::string& param, bool& out) {
  if (!v.is_boolean()) return wrong_type(param, "a boolean", v);
  out = v.get<bool>();
  return std::nullopt;
}

MaybeError read_string(const json& v, const std::string& param, std::string& out) {
  if (!v.is_string()) return wrong_type(param, "a string", v);
  out = v.get<std::string>();
  return std::nullopt;
}

ApiError unsupported(const std::string& param, const std::string& what) {
  return ApiError::invalid(param, fmt::format("'{}' {} is not supported by this server", param, what), "unsupported");
}

}  // namespace kvs::server
