// db/store_overview.cc: a node's own store at a glance, for `oomtriage serve`'s /fleet page (the
// same figures as the fleet store's, db/fleet_store_overview.cc): OOMs per day by phase and model
// family, the fixes that healed jobs, the node, and the jobs closest to their card's limit.
#include "db/sqlite_statement.h"
#include "db/store.h"

namespace oomtriage::db {
namespace {

Result<std::vector<DayCount>> day_counts(StatementCache& statements, const char* sql,
                                         int64_t since) {
  Statement s(statements, sql);
  s.bind(1, since);
  std::vector<DayCount> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back({s.text(0), s.text(1), s.integer(2)});
  if (rc != SQLITE_DONE) return s.error("fleet overview");
  return out;
}

}  // namespace

Result<FleetOverview> Store::fleet_overview(int64_t since) {
  FleetOverview out;
  OOMTRIAGE_ASSIGN_OR_RETURN(
      out.by_phase,
      day_counts(*statements_,
                 "SELECT date(created_at, 'unixepoch'), phase, COUNT(*) FROM events WHERE "
                 "created_at >= ?1 GROUP BY 1, 2 ORDER BY 1, 2",
                 since));
  OOMTRIAGE_ASSIGN_OR_RETURN(
      out.by_family,
      day_counts(*statements_,
                 "SELECT date(created_at, 'unixepoch'), model_family, COUNT(*) FROM events WHERE "
                 "created_at >= ?1 GROUP BY 1, 2 ORDER BY 1, 2",
                 since));
  {
    Statement s(*statements_,
                "SELECT fix_id, COUNT(DISTINCT job_id) FROM heal_attempts WHERE verdict = "
                "'healed' AND fix_id != '' GROUP BY fix_id ORDER BY 2 DESC, 1 LIMIT 20");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.healed_by.push_back({s.text(0), s.integer(1)});
    if (rc != SQLITE_DONE) return s.error("fleet overview");
  }
  {
    Statement s(*statements_, "SELECT COALESCE(MAX(last_seen), 0), COUNT(*) FROM jobs");
    if (s.step() != SQLITE_ROW) return s.error("fleet overview");
    if (s.integer(1) > 0) out.nodes.push_back({"", s.integer(0), s.integer(1)});
  }
  {
    // Each job's fullest card over its runs sampled in the window (SQLite takes the other
    // columns from the row with the MAX).
    Statement s(*statements_,
                "SELECT j.id, j.name, g.peak_phase, g.peak_bytes, g.total_bytes, g.updated_at, "
                "MAX(g.peak_bytes * 1.0 / g.total_bytes) AS share FROM gpu_memory g JOIN runs r "
                "ON r.id = g.run_id JOIN jobs j ON j.id = r.job_id WHERE g.total_bytes > 0 AND "
                "g.updated_at >= ?1 GROUP BY j.id ORDER BY share DESC LIMIT 20");
    s.bind(1, since);
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      NearLimit near;
      near.key = std::to_string(s.integer(0));
      near.name = s.text(1);
      near.phase = s.text(2);
      near.peak_bytes = static_cast<uint64_t>(s.integer(3));
      near.total_bytes = static_cast<uint64_t>(s.integer(4));
      near.updated_at = s.integer(5);
      out.near_limit.push_back(std::move(near));
    }
    if (rc != SQLITE_DONE) return s.error("fleet overview");
  }
  return out;
}

}  // namespace oomtriage::db
