#include "core/status.h"

namespace kvs {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kIoError: return "I/O error";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kUnimplemented: return "unimplemented";
    case ErrorCode::kUnavailable: return "unavailable";
  }
  return "unknown";
}

}  // namespace kvs
