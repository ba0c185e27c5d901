// db/fleet_store_internal.h
//
// What the fleet store's source files share and callers of db/fleet_store.h never see: a libpq
// connection that turns failures into Result, a transaction that rolls back unless committed,
// the readers of a result's cells, the text made fit for PostgreSQL, and the SQL that keeps the
// jobs list's columns, spliced into migration 4 (db/fleet_store.cc) and into every shipped
// batch (db/fleet_store_writes.cc). Internal to db/.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/libpq.h"
#include "parsers/result.h"

namespace oomtriage::db {

// The job list's columns as migration 4 shipped them, kept only for that migration: it took the
// top fix from the start of the fixes' text, before events had a top_fix column (migration 5).
#define OOMTRIAGE_JOB_LIST_COLUMNS_V4                                                          \
  "outcome = COALESCE((SELECT r.outcome FROM oomtriage.runs r WHERE r.store_id = j.store_id "  \
  "AND r.job_id = j.id ORDER BY r.id DESC LIMIT 1), 'unknown'), run_count = (SELECT count(*) " \
  "FROM oomtriage.runs r WHERE r.store_id = j.store_id AND r.job_id = j.id), event_count = "   \
  "(SELECT count(*) FROM oomtriage.events e WHERE e.store_id = j.store_id AND e.job_id = "     \
  "j.id), (phase, model_family, step, top_fix) = (SELECT e.phase, e.model_family, e.step, "    \
  "substring(e.fixes_json FROM '^[[][{]\"id\":\"([^\"]*)\"') FROM oomtriage.events e WHERE "   \
  "e.store_id = j.store_id AND e.job_id = j.id ORDER BY e.id DESC LIMIT 1), (gpu_peak_bytes, " \
  "gpu_total_bytes) = (SELECT g.peak_bytes, g.total_bytes FROM oomtriage.gpu_memory g WHERE "  \
  "g.store_id = j.store_id AND g.job_id = j.id ORDER BY g.run_id DESC, g.peak_bytes DESC "     \
  "LIMIT 1)"

// What the jobs list shows and filters on, kept on each job (migration 4, FleetStore::ship): the
// newest run's outcome, the counts, the newest event's phase, model family, step and top fix
// (its top_fix column, written as it ships), and the newest sampled run's fullest card. `j` is the
// job.
#define OOMTRIAGE_JOB_LIST_COLUMNS                                                             \
  "outcome = COALESCE((SELECT r.outcome FROM oomtriage.runs r WHERE r.store_id = j.store_id "  \
  "AND r.job_id = j.id ORDER BY r.id DESC LIMIT 1), 'unknown'), run_count = (SELECT count(*) " \
  "FROM oomtriage.runs r WHERE r.store_id = j.store_id AND r.job_id = j.id), event_count = "   \
  "(SELECT count(*) FROM oomtriage.events e WHERE e.store_id = j.store_id AND e.job_id = "     \
  "j.id), (phase, model_family, step, top_fix) = (SELECT e.phase, e.model_family, e.step, "    \
  "e.top_fix FROM oomtriage.events e WHERE "                                                   \
  "e.store_id = j.store_id AND e.job_id = j.id ORDER BY e.id DESC LIMIT 1), (gpu_peak_bytes, " \
  "gpu_total_bytes) = (SELECT g.peak_bytes, g.total_bytes FROM oomtriage.gpu_memory g WHERE "  \
  "g.store_id = j.store_id AND g.job_id = j.id ORDER BY g.run_id DESC, g.peak_bytes DESC "     \
  "LIMIT 1)"

struct ClearResult {
  void operator()(PGresult* result) const { libpq().PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, ClearResult>;
using Params = std::vector<std::optional<std::string>>;

// libpq's messages end in a newline and may run on over lines: the first line is the reason.
std::string first_line(const char* message);

// PostgreSQL text holds neither NUL nor invalid UTF-8, and a row it refuses would stop the
// shipping for good: each such byte becomes U+FFFD.
std::string pg_text(std::string_view in);

inline std::optional<std::string> number(std::optional<int64_t> value) {
  return value ? std::optional<std::string>(std::to_string(*value)) : std::nullopt;
}

class Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {}

  Result<PgResult> run(const char* sql, const Params& params = {}) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    PgResult result(libpq().PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr,
                                         values.data(), nullptr, nullptr, 0),
                    ClearResult());
    const ExecStatusType status = libpq().PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return make_error(ErrorCode::kDatabase,
                        "fleet store: " + first_line(libpq().PQerrorMessage(conn_)));
    }
    return result;
  }

  // Several statements without parameters (a migration).
  Result<Ok> script(const char* sql) {
    PgResult result(libpq().PQexec(conn_, sql));
    const ExecStatusType status = libpq().PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return make_error(ErrorCode::kDatabase,
                        "fleet store: " + first_line(libpq().PQerrorMessage(conn_)));
    }
    return Ok{};
  }

 private:
  PGconn* conn_;
};

// Rolls back unless committed.
class PgTransaction {
 public:
  explicit PgTransaction(Connection& c) : c_(c) { ok_ = static_cast<bool>(c_.script("BEGIN")); }
  ~PgTransaction() {
    if (ok_ && !committed_) (void)c_.script("ROLLBACK");
  }
  bool ok() const { return ok_; }
  Result<Ok> commit() {
    auto r = c_.script("COMMIT");
    committed_ = static_cast<bool>(r);
    return r;
  }

 private:
  Connection& c_;
  bool ok_ = false;
  bool committed_ = false;
};

inline std::string text_at(const PGresult* r, int row, int col) {
  return std::string(libpq().PQgetvalue(r, row, col),
                     static_cast<size_t>(libpq().PQgetlength(r, row, col)));
}
inline int64_t integer_at(const PGresult* r, int row, int col) {
  return std::stoll(std::string(libpq().PQgetvalue(r, row, col)));
}
inline std::optional<int64_t> optional_at(const PGresult* r, int row, int col) {
  if (libpq().PQgetisnull(r, row, col)) return std::nullopt;
  return integer_at(r, row, col);
}

}  // namespace oomtriage::db
