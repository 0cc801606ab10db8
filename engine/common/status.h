// Status and Result: the engine's error values. Errors travel as values, never as exceptions,
// so the engine thread can fail one request or batch without unwinding anything else.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace deepinfer {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad flag, bad token id, bad config value)
  kNotFound,         // a file or tensor that must exist does not
  kDataLoss,         // a file is truncated or corrupt
  kUnimplemented,    // valid input this build cannot run (e.g. --device cuda without CUDA)
  kInternal,         // an invariant failed
  kIo,               // the operating system refused (open, mmap, write)
};

const char* ErrorCodeName(ErrorCode code);

/// A success or an error with a code and a human-readable reason.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {ErrorCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {ErrorCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIo, std::move(m)}; }

/// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace deepinfer

#define DI_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::deepinfer::Status _st = (expr); \
    if (!_st.ok()) return _st;        \
  } while (0)

#define DI_CONCAT_INNER(a, b) a##b
#define DI_CONCAT(a, b) DI_CONCAT_INNER(a, b)
#define DI_ASSIGN_OR_RETURN(lhs, expr)                                              \
  auto DI_CONCAT(_res_, __LINE__) = (expr);                                         \
  if (!DI_CONCAT(_res_, __LINE__).ok()) return DI_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(DI_CONCAT(_res_, __LINE__)).value()
