// db/sqlite_statement.h
//
// The SQLite helpers the stores share: prepared statements cached for a connection's life, a
// statement bound and stepped with its error in words, a transaction that rolls back unless
// committed. Internal to db/.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "parsers/result.h"

namespace oomtriage::db {

// Prepared statements kept for the connection's life: the daemon writes the same few rows every
// second, and parsing their SQL each time cost more than running it. One statement is in use at
// a time; a second use of the same SQL while the first is live gets its own.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache() {
    for (auto& [sql, entry] : cache_) sqlite3_finalize(entry.stmt);
  }
  sqlite3* db() const { return db_; }

  // A statement for `sql` (a literal), and whether it is the cached one (to be reset, not
  // finalized, when done).
  sqlite3_stmt* take(const char* sql, bool& cached, int& rc) {
    Entry& entry = cache_[std::string_view(sql)];
    if (entry.stmt != nullptr && !entry.in_use) {
      entry.in_use = cached = true;
      rc = SQLITE_OK;
      return entry.stmt;
    }
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK || entry.stmt != nullptr) {
      cached = false;
      return stmt;
    }
    entry.stmt = stmt;
    entry.in_use = cached = true;
    return stmt;
  }
  void give_back(const char* sql) { cache_[std::string_view(sql)].in_use = false; }

 private:
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  sqlite3* db_;
  std::unordered_map<std::string_view, Entry> cache_;
};

class Statement {
 public:
  Statement(StatementCache& cache, const char* sql) : cache_(cache), sql_(sql), db_(cache.db()) {
    stmt_ = cache.take(sql, cached_, rc_);
  }
  ~Statement() {
    if (!cached_) {
      sqlite3_finalize(stmt_);
      return;
    }
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    cache_.give_back(sql_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return rc_ == SQLITE_OK; }
  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, const std::optional<int64_t>& v) {
    if (v) {
      sqlite3_bind_int64(stmt_, i, *v);
    } else {
      sqlite3_bind_null(stmt_, i);
    }
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  Statement& bind_real(int i, const std::optional<double>& v) {
    if (v) {
      sqlite3_bind_double(stmt_, i, *v);
    } else {
      sqlite3_bind_null(stmt_, i);
    }
    return *this;
  }
  int step() { return rc_ = sqlite3_step(stmt_); }
  std::optional<double> optional_real(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::optional<int64_t> optional_integer(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(stmt_, col);
  }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : "";
  }
  Error error(std::string_view what) const {
    const ErrorCode code = rc_ == SQLITE_BUSY || rc_ == SQLITE_LOCKED ? ErrorCode::kDatabaseBusy
                                                                      : ErrorCode::kDatabase;
    return make_error(code, std::string(what) + ": " + sqlite3_errmsg(db_));
  }

 private:
  StatementCache& cache_;
  const char* sql_;
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool cached_ = false;
  int rc_ = SQLITE_OK;
};

// Rolls back unless committed, so every early return leaves the store as it was.
class Transaction {
 public:
  // A writer takes the write lock at once (no deadlock upgrading later); a reader's deferred
  // transaction is one snapshot and never blocks the daemon's writes (WAL).
  enum Kind { kWrite, kRead };
  explicit Transaction(sqlite3* db, Kind kind = kWrite) : db_(db) {
    ok_ = sqlite3_exec(db_, kind == kWrite ? "BEGIN IMMEDIATE" : "BEGIN", nullptr, nullptr,
                       nullptr) == SQLITE_OK;
  }
  ~Transaction() {
    if (ok_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  bool ok() const { return ok_; }
  bool commit() {
    committed_ = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
    return committed_;
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool committed_ = false;
};

inline Error busy_or_database(sqlite3* db, std::string_view what) {
  const int rc = sqlite3_errcode(db) & 0xff;
  const ErrorCode code = rc == SQLITE_BUSY                             ? ErrorCode::kDatabaseBusy
                         : rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB ? ErrorCode::kDatabaseDamaged
                                                                       : ErrorCode::kDatabase;
  return make_error(code, std::string(what) + ": " + sqlite3_errmsg(db));
}

}  // namespace oomtriage::db
