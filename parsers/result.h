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

// kDatabaseDamaged: SQLite found the store's file corrupt or not a database (db/store_recovery.h
// moves it aside and salvages it); retrying cannot help.
enum class ErrorCode { kIo, kDatabase, kDatabaseBusy, kDatabaseDamaged, kBadInput, kNotFound };

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

// The repetition of passing an error up, once: evaluates `expr` (a Result) and returns its error
// from the calling function (whose Result type takes an Error). OOMTRIAGE_ASSIGN_OR_RETURN also
// declares `decl` holding the value:
//   OOMTRIAGE_TRY(tx.exec(sql));
//   OOMTRIAGE_ASSIGN_OR_RETURN(auto rows, store.list_jobs());
#define OOMTRIAGE_CONCAT_INNER(a, b) a##b
#define OOMTRIAGE_CONCAT(a, b) OOMTRIAGE_CONCAT_INNER(a, b)
#define OOMTRIAGE_TRY(expr)                                        \
  do {                                                             \
    if (auto oomtriage_try_result = (expr); !oomtriage_try_result) \
      return oomtriage_try_result.error();                         \
  } while (false)
#define OOMTRIAGE_ASSIGN_OR_RETURN(decl, expr)                 \
  auto OOMTRIAGE_CONCAT(oomtriage_try_, __LINE__) = (expr);    \
  if (!OOMTRIAGE_CONCAT(oomtriage_try_, __LINE__))             \
    return OOMTRIAGE_CONCAT(oomtriage_try_, __LINE__).error(); \
  decl = std::move(*OOMTRIAGE_CONCAT(oomtriage_try_, __LINE__))

namespace oomtriage {}  // namespace oomtriage
