// db/store_live.cc: what each running run is doing now (its live state: the training bar's step,
// rate and loss, the phase, when its log last grew, whether it stalled), written by the daemon
// once a second for the runs whose logs grew, and the warnings that stay with a job (a predicted
// OOM, a near OOM, a stall), which `oomtriage alerts`, `jobs` and the job's page list.
#include "db/store.h"

#include "db/sqlite_statement.h"

#include <sqlite3.h>

namespace oomtriage::db {

Result<Ok> Store::record_live(const std::vector<std::pair<int64_t, LiveState>>& runs, int64_t now) {
  if (runs.empty()) return Ok{};
  Transaction tx(db_);
  if (!tx.ok()) return busy_or_database(db_, "begin");
  for (const auto& [run_id, live] : runs) {
    Statement s(*statements_,
                "INSERT INTO live_state (run_id, step, total_steps, steps_per_second, loss, phase, "
                "last_write, last_line, stalled_since, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                "?7, ?8, ?9, ?10) ON CONFLICT (run_id) DO UPDATE SET step = ?2, total_steps = ?3, "
                "steps_per_second = ?4, loss = ?5, phase = ?6, last_write = ?7, last_line = ?8, "
                "stalled_since = ?9, updated_at = ?10");
    s.bind(1, run_id)
        .bind(2, live.step)
        .bind(3, live.total_steps)
        .bind_real(4, live.steps_per_second)
        .bind_real(5, live.loss)
        .bind(6, live.phase)
        .bind(7, live.last_write)
        .bind(8, live.last_line)
        .bind(9, live.stalled_since)
        .bind(10, now);
    if (s.step() != SQLITE_DONE) return s.error("record live state");
  }
  if (!tx.commit()) return busy_or_database(db_, "commit");
  return Ok{};
}

Result<std::optional<LiveState>> Store::live_of_run(int64_t run_id) {
  Statement s(*statements_,
              "SELECT step, total_steps, steps_per_second, loss, phase, last_write, last_line, "
              "stalled_since FROM live_state WHERE run_id = ?1");
  s.bind(1, run_id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<LiveState>();
  if (rc != SQLITE_ROW) return s.error("read live state");
  LiveState live;
  live.step = s.optional_integer(0);
  live.total_steps = s.optional_integer(1);
  live.steps_per_second = s.optional_real(2);
  live.loss = s.optional_real(3);
  live.phase = s.text(4);
  live.last_write = s.integer(5);
  live.last_line = s.text(6);
  live.stalled_since = s.optional_integer(7);
  return std::optional<LiveState>(std::move(live));
}

Result<int64_t> Store::record_warning(const WarningRow& w) {
  Statement s(*statements_,
              "INSERT INTO warnings (job_id, run_id, kind, summary, created_at) VALUES "
              "(COALESCE(NULLIF(?1, 0), (SELECT job_id FROM runs WHERE id = ?2)), ?2, ?3, ?4, ?5) "
              "RETURNING id");
  s.bind(1, w.job_id).bind(2, w.run_id).bind(3, w.kind).bind(4, w.summary).bind(5, w.created_at);
  if (s.step() != SQLITE_ROW) return s.error("record warning");
  return s.integer(0);
}

Result<int64_t> Store::resolve_warnings(int64_t job_id, const std::string& kind, int64_t now) {
  Statement s(*statements_,
              "UPDATE warnings SET resolved_at = ?3 WHERE job_id = ?1 AND kind = ?2 AND "
              "resolved_at IS NULL");
  s.bind(1, job_id).bind(2, kind).bind(3, now);
  if (s.step() != SQLITE_DONE) return s.error("resolve warnings");
  return static_cast<int64_t>(sqlite3_changes(db_));
}

Result<std::vector<WarningRow>> Store::list_warnings(std::optional<int64_t> job_id, int limit) {
  Statement s(*statements_,
              "SELECT w.id, w.job_id, w.run_id, w.kind, w.summary, w.created_at, w.resolved_at, "
              "j.name FROM warnings w JOIN jobs j ON j.id = w.job_id WHERE (?1 IS NULL OR "
              "w.job_id = ?1) ORDER BY w.id DESC LIMIT ?2");
  s.bind(1, job_id).bind(2, int64_t{limit});
  std::vector<WarningRow> rows;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    WarningRow w;
    w.id = s.integer(0);
    w.job_id = s.integer(1);
    w.run_id = s.optional_integer(2);
    w.kind = s.text(3);
    w.summary = s.text(4);
    w.created_at = s.integer(5);
    w.resolved_at = s.optional_integer(6);
    w.job = s.text(7);
    rows.push_back(std::move(w));
  }
  if (rc != SQLITE_DONE) return s.error("list warnings");
  return rows;
}

}  // namespace oomtriage::db
