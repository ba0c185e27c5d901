// parsers/result.h
//
// Result<T>: a value or an Error{code, message}, for failures that come from the environment
// (I/O, SQLite busy, HTTP). Shaped like std::expected (operator bool, *, ->, error()), so moving
// to C++23 is a rename. Lives in parsers/ because it is the bottom layer; nothing here throws.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace oomtriage {

enum class ErrorCode { kIo, kDatabase, kDatabaseBusy, kBadInput, kNotFound };

struct Error {
  ErrorCode code = ErrorCode::kIo;
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}      // NOLINT: implicit, like std::expected
  Result(Error error) : data_(std::move(error)) {}  // NOLINT

  explicit operator bool() const { return data_.index() == 0; }
  T& operator*() { return std::get<0>(data_); }
  const T& operator*() const { return std::get<0>(data_); }
  T* operator->() { return &std::get<0>(data_); }
  const T* operator->() const { return &std::get<0>(data_); }
  const Error& error() const { return std::get<1>(data_); }

 private:
  std::variant<T, Error> data_;
};

struct Ok {};

inline Error make_error(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace oomtriage
