#include "server/api_error.h"

namespace kvs::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (!code.empty()) error["code"] = code;
  return {{"error", std::move(error)}};
}

ApiError api_error_from_status(const Status& status, const std::string& default_param) {
  const std::string& param = status.field().empty() ? default_param : status.field();
  switch (status.code()) {
    case ErrorCode::kOutOfRange: return ApiError::invalid(param, status.message(), "context_length_exceeded");
    case ErrorCode::kOutOfMemory: return ApiError::invalid(param, status.message(), "kv_cache_too_small");
    case ErrorCode::kInvalidArgument: return ApiError::invalid(param, status.message());
    case ErrorCode::kUnimplemented: return ApiError::invalid(param, status.message(), "unsupported");
    case ErrorCode::kUnavailable: return ApiError::of(503, "server_error", "shutting_down", status.message());
    default: return ApiError::of(500, "server_error", "internal_error", status.message());
  }
}

}  // namespace kvs::server
