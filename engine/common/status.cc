#include "engine/common/status.h"

namespace deepinfer {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kDataLoss:
      return "data_loss";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kIo:
      return "io_error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

}  // namespace deepinfer
