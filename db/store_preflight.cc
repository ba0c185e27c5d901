// db/store_preflight.cc: pre-flight checks (one per job, config and card: the dedupe key of the
// TrainingOOMPredicted alert) and the finished runs with their configs that the fleet's memory
// correction reads (triage/fleet_correction.h).
#include "db/store.h"

#include "db/sqlite_statement.h"

#include <sqlite3.h>

namespace oomtriage::db {

Result<bool> Store::record_preflight(const PreflightCheck& c, int64_t now) {
  Statement s(*statements_,
              "INSERT INTO preflight_checks (job_id, config_sha256, card_bytes, family, verdict, "
              "phase, peak_bytes, usable_bytes, alerted, checked_at) VALUES (?1, ?2, ?3, ?4, ?5, "
              "?6, ?7, ?8, ?9, ?10) ON CONFLICT (job_id, config_sha256, card_bytes) DO NOTHING "
              "RETURNING id");
  s.bind(1, c.job_id)
      .bind(2, c.config_sha256)
      .bind(3, static_cast<int64_t>(c.card_bytes))
      .bind(4, c.family)
      .bind(5, c.verdict)
      .bind(6, c.phase)
      .bind(7, static_cast<int64_t>(c.peak_bytes))
      .bind(8, static_cast<int64_t>(c.usable_bytes))
      .bind(9, int64_t{c.alerted})
      .bind(10, now);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return false;
  if (rc != SQLITE_ROW) return s.error("record pre-flight check");
  return true;
}

Result<bool> Store::preflight_checked(int64_t job_id, const std::string& config_sha256,
                                      uint64_t card_bytes) {
  Statement s(*statements_,
              "SELECT 1 FROM preflight_checks WHERE job_id = ?1 AND config_sha256 = ?2 AND "
              "card_bytes = ?3");
  s.bind(1, job_id).bind(2, config_sha256).bind(3, static_cast<int64_t>(card_bytes));
  const int rc = s.step();
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) return s.error("read pre-flight check");
  return false;
}

// A run's card is the one its job's config was last checked against (several daemons may have
// judged it against several cards: the largest, which a completed run bounds least).
Result<std::vector<FleetHistoryRow>> Store::fleet_history(int limit) {
  Statement s(*statements_,
              "SELECT r.id, r.outcome, c.path, c.content, COALESCE((SELECT e.event_json FROM "
              "events e WHERE e.run_id = r.id AND e.recovered = 0 ORDER BY e.id LIMIT 1), ''), "
              "(SELECT MAX(p.card_bytes) FROM preflight_checks p WHERE p.job_id = r.job_id AND "
              "p.config_sha256 = c.sha256), (SELECT MAX(g.peak_bytes) FROM gpu_memory g WHERE "
              "g.from_start AND "
              "g.run_id = r.id), (SELECT MAX(g.total_bytes) FROM gpu_memory g WHERE g.run_id = "
              "r.id) FROM runs r JOIN config_snapshots c ON c.id = "
              "r.snapshot_id WHERE r.outcome IN ('completed', 'crashed_oom') ORDER BY r.id DESC "
              "LIMIT ?1");
  s.bind(1, int64_t{limit});
  std::vector<FleetHistoryRow> rows;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    FleetHistoryRow row;
    row.run_id = s.integer(0);
    row.outcome = s.text(1);
    row.config_path = s.text(2);
    row.config_content = s.text(3);
    row.oom_event_json = s.text(4);
    if (const auto card = s.optional_integer(5); card && *card > 0) {
      row.card_bytes = static_cast<uint64_t>(*card);
    }
    if (const auto peak = s.optional_integer(6); peak && *peak > 0) {
      row.measured_peak = static_cast<uint64_t>(*peak);
    }
    if (const auto card = s.optional_integer(7); card && *card > 0 && !row.card_bytes) {
      row.card_bytes = static_cast<uint64_t>(*card);
    }
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return s.error("fleet history");
  return rows;
}

}  // namespace oomtriage::db
