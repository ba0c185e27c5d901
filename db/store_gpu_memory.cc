// db/store_gpu_memory.cc: each run's GPU memory per card, written as the daemon or `run` samples
// it (one row per run and card, replaced as the timeline grows) and read back for `report`.
#include "db/store.h"

#include "db/sqlite_statement.h"
#include "db/store_internal.h"

#include <sqlite3.h>

namespace oomtriage::db {

Result<Ok> Store::record_gpu_memory(const GpuMemoryRow& row) {
  Statement s(
      *statements_,
      "INSERT INTO gpu_memory (run_id, gpu, total_bytes, peak_bytes, peak_phase, "
      "peak_step, others_peak_bytes, timeline_json, updated_at, warned_bytes, from_start) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (run_id, gpu) DO UPDATE "
      "SET from_start = excluded.from_start, "
      "warned_bytes = COALESCE(excluded.warned_bytes, gpu_memory.warned_bytes), total_bytes = "
      "excluded.total_bytes, peak_bytes = excluded.peak_bytes, peak_phase = "
      "excluded.peak_phase, peak_step = excluded.peak_step, others_peak_bytes = "
      "excluded.others_peak_bytes, timeline_json = excluded.timeline_json, updated_at = "
      "excluded.updated_at");
  s.bind(1, row.run_id)
      .bind(2, int64_t{row.gpu})
      .bind(3, static_cast<int64_t>(row.total_bytes))
      .bind(4, static_cast<int64_t>(row.peak_bytes))
      .bind(5, row.peak_phase)
      .bind(6, row.peak_step)
      .bind(7, static_cast<int64_t>(row.others_peak_bytes))
      .bind(8, row.timeline_json)
      .bind(9, row.updated_at)
      .bind(10, row.warned_bytes ? std::optional<int64_t>(static_cast<int64_t>(*row.warned_bytes))
                                 : std::nullopt)
      .bind(11, int64_t{row.from_start});
  if (s.step() != SQLITE_DONE) return s.error("record_gpu_memory");
  return Ok{};
}

namespace {

Result<std::vector<GpuMemoryRow>> read_rows(Statement& s) {
  std::vector<GpuMemoryRow> rows;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    rows.push_back(gpu_memory_row(s, 0));
  }
  if (rc != SQLITE_DONE) return s.error("gpu memory");
  return rows;
}

}  // namespace

Result<std::vector<GpuMemoryRow>> Store::gpu_memory_of_job(int64_t job_id) {
  Statement s(*statements_,
              "SELECT " OOMTRIAGE_GPU_MEMORY_COLUMNS
              "FROM gpu_memory g "
              "JOIN runs r ON r.id = g.run_id WHERE r.job_id = ?1 ORDER BY g.run_id, g.gpu");
  s.bind(1, job_id);
  return read_rows(s);
}

Result<std::vector<GpuMemoryRow>> Store::gpu_memory_of_run(int64_t run_id) {
  Statement s(*statements_, "SELECT " OOMTRIAGE_GPU_MEMORY_COLUMNS
                            "FROM gpu_memory g WHERE g.run_id = ?1 ORDER BY g.gpu");
  s.bind(1, run_id);
  return read_rows(s);
}

}  // namespace oomtriage::db
