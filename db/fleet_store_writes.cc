// db/fleet_store_writes.cc: what changes the fleet store: a node's batch shipped in one
// transaction (FleetStore::ship), where a batch shipped twice changes nothing, and retention
// (FleetStore::prune), a batch of jobs per short transaction. Every value is a parameter ($1...),
// sent as text; nothing is built from strings with values.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "db/fleet_store.h"
#include "db/fleet_store_internal.h"
#include "db/libpq.h"
#include "parsers/job_config.h"
#include "triage/fix_codec.h"

namespace oomtriage::db {
namespace {

// An event's top fix for its column: the first fix's id, "" (stored NULL) without one.
std::string top_fix(std::string_view fixes_json) {
  const auto fixes = triage::decode_fixes(fixes_json);
  return fixes && !fixes->empty() ? fixes->front().id : std::string();
}

// A config (its text already made fit for PostgreSQL) as JSON for the jsonb column, when it
// reads as YAML or JSON; else NULL.
std::optional<std::string> config_json(const std::string& path, const std::string& content) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".yaml" && ext != ".yml" && ext != ".json") return std::nullopt;
  auto json = parsers::yaml_to_json(content, path);
  if (!json || !json->is_object()) return std::nullopt;
  std::string text = json->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // jsonb refuses the \u0000 escape that text allows.
  if (text.find("\\u0000") != std::string::npos) return std::nullopt;
  return text;
}

}  // namespace

Result<Ok> FleetStore::ship(const FleetBatch& batch, const std::string& store_id,
                            const std::string& host) {
  Connection c(conn_);
  PgTransaction tx(c);
  if (!tx.ok())
    return make_error(ErrorCode::kIo, "fleet store: " + first_line(libpq().PQerrorMessage(conn_)));
  const std::string h = pg_text(host);
  for (const FleetJob& j : batch.jobs) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.jobs (store_id, id, host, name, trainer, log_dir, first_seen, "
        "last_seen, home) VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7), to_timestamp($8), "
        "$9) ON CONFLICT (store_id, id) DO UPDATE SET host = excluded.host, name = "
        "excluded.name, trainer = excluded.trainer, log_dir = excluded.log_dir, home = "
        "excluded.home, last_seen = GREATEST(oomtriage.jobs.last_seen, excluded.last_seen)",
        {store_id, std::to_string(j.id), h, pg_text(j.name), pg_text(j.trainer), pg_text(j.log_dir),
         std::to_string(j.first_seen), std::to_string(j.last_seen), pg_text(j.home)}));
  }
  for (const auto& [job_id, s] : batch.snapshots) {
    const std::string content = pg_text(s.content);
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.config_snapshots (store_id, id, host, job_id, path, sha256, "
        "content, config, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, "
        "to_timestamp($9)) ON CONFLICT (store_id, id) DO NOTHING",
        {store_id, std::to_string(s.id), h, std::to_string(job_id), pg_text(s.path),
         pg_text(s.sha256), content, config_json(s.path, content), std::to_string(s.seen_at)}));
  }
  for (const auto& [job_id, run] : batch.runs) {
    // An older picture of a run (a batch retried after a newer one) never overwrites a newer.
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.runs (store_id, id, host, job_id, log_path, snapshot_id, outcome, "
        "started_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, to_timestamp($8), "
        "to_timestamp($9)) ON CONFLICT (store_id, id) DO UPDATE SET outcome = excluded.outcome, "
        "updated_at = excluded.updated_at, snapshot_id = excluded.snapshot_id, log_path = "
        "excluded.log_path WHERE oomtriage.runs.updated_at <= excluded.updated_at",
        {store_id, std::to_string(run.id), h, std::to_string(job_id), pg_text(run.log_path),
         number(run.snapshot_id), pg_text(run.outcome), std::to_string(run.started_at),
         std::to_string(run.updated_at)}));
  }
  for (const FleetEvent& e : batch.events) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.events (event_id, store_id, id, host, job_id, run_id, "
        "snapshot_id, log_offset, kind, phase, model_family, step, recovered, event_json, "
        "fixes_json, created_at, top_fix) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
        "$12, $13, $14, $15, to_timestamp($16), NULLIF($17, '')) ON CONFLICT (event_id) DO "
        "UPDATE SET kind = excluded.kind, phase = excluded.phase, step = excluded.step, "
        "recovered = excluded.recovered, event_json = excluded.event_json, fixes_json = "
        "excluded.fixes_json, top_fix = excluded.top_fix",
        {e.uuid, store_id, std::to_string(e.stored.id), h, std::to_string(e.job_id),
         number(e.stored.run_id ? std::optional<int64_t>(e.stored.run_id) : std::nullopt),
         number(e.stored.snapshot_id), std::to_string(e.typed.offset), pg_text(e.typed.kind),
         pg_text(e.typed.phase), pg_text(e.typed.model_family), number(e.typed.step),
         e.typed.recovered ? "true" : "false", pg_text(e.stored.event_json),
         pg_text(e.stored.fixes_json), std::to_string(e.stored.created_at),
         pg_text(top_fix(e.stored.fixes_json))}));
  }
  for (const auto& [job_id, a] : batch.attempts) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.heal_attempts (store_id, run_id, host, job_id, attempt, "
        "max_attempts, fix_id, change, argv_json, resumed_step, outcome, verdict, started_at, "
        "ended_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, to_timestamp($13), "
        "to_timestamp($14)) ON CONFLICT (store_id, run_id) DO UPDATE SET outcome = "
        "excluded.outcome, verdict = excluded.verdict, ended_at = excluded.ended_at",
        {store_id, std::to_string(a.run_id), h, std::to_string(job_id), std::to_string(a.attempt),
         std::to_string(a.max_attempts), pg_text(a.fix_id), pg_text(a.change), pg_text(a.argv_json),
         number(a.resumed_step), pg_text(a.outcome), pg_text(a.verdict),
         std::to_string(a.started_at), std::to_string(a.ended_at)}));
  }
  for (const auto& [job_id, g] : batch.gpu_memory) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.gpu_memory (store_id, run_id, gpu, host, job_id, total_bytes, "
        "peak_bytes, peak_phase, peak_step, others_peak_bytes, timeline_json, updated_at, "
        "warned_bytes, from_start) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
        "to_timestamp($12), $13, $14) ON CONFLICT (store_id, "
        "run_id, gpu) DO UPDATE SET total_bytes = excluded.total_bytes, peak_bytes = "
        "excluded.peak_bytes, peak_phase = excluded.peak_phase, peak_step = excluded.peak_step, "
        "others_peak_bytes = excluded.others_peak_bytes, timeline_json = excluded.timeline_json, "
        "updated_at = excluded.updated_at, warned_bytes = excluded.warned_bytes, from_start = "
        "excluded.from_start",
        {store_id, std::to_string(g.run_id), std::to_string(g.gpu), h, std::to_string(job_id),
         std::to_string(g.total_bytes), std::to_string(g.peak_bytes), pg_text(g.peak_phase),
         number(g.peak_step), std::to_string(g.others_peak_bytes), pg_text(g.timeline_json),
         std::to_string(g.updated_at),
         g.warned_bytes ? std::optional<std::string>(std::to_string(*g.warned_bytes))
                        : std::nullopt,
         g.from_start ? "true" : "false"}));
  }
  // The jobs list filters on each job's newest run and event: kept on the job here, once per
  // batch, for every job the batch touched.
  std::set<int64_t> touched;
  for (const FleetJob& j : batch.jobs) touched.insert(j.id);
  for (const auto& [job_id, run] : batch.runs) touched.insert(job_id);
  for (const FleetEvent& e : batch.events) touched.insert(e.job_id);
  for (const auto& [job_id, g] : batch.gpu_memory) touched.insert(job_id);
  if (!touched.empty()) {
    OOMTRIAGE_TRY(c.run("UPDATE oomtriage.jobs j SET " OOMTRIAGE_JOB_LIST_COLUMNS
                        " WHERE j.store_id = $1 AND j.id = ANY($2::bigint[])",
                        {store_id, fmt::format("{{{}}}", fmt::join(touched, ","))}));
  }
  OOMTRIAGE_TRY(c.run(
      "INSERT INTO oomtriage.nodes (store_id, host, last_shipped_at) VALUES ($1, $2, now()) ON "
      "CONFLICT (store_id) DO UPDATE SET host = excluded.host, last_shipped_at = "
      "excluded.last_shipped_at",
      {store_id, h}));
  return tx.commit();
}

Result<int64_t> FleetStore::prune(int64_t before, int batch_size, int max_batches) {
  // A batch of jobs at a time, each in its own short transaction: nodes keep shipping between
  // batches instead of waiting behind one delete of months of rows. A job being shipped right
  // now is skipped (SKIP LOCKED) and taken by a later pass.
  Connection c(conn_);
  int64_t removed = 0;
  for (;;) {
    PgTransaction tx(c);
    if (!tx.ok()) return make_error(ErrorCode::kIo, "fleet store: cannot begin a transaction");
    OOMTRIAGE_ASSIGN_OR_RETURN(
        auto doomed, c.run("SELECT store_id::text, id FROM oomtriage.jobs WHERE last_seen < "
                           "to_timestamp($1) ORDER BY last_seen LIMIT $2 FOR UPDATE SKIP LOCKED",
                           {std::to_string(before), std::to_string(std::max(1, batch_size))}));
    const int count = libpq().PQntuples(doomed.get());
    if (count == 0) {
      // Nodes gone as long leave /fleet's list too.
      OOMTRIAGE_TRY(c.run("DELETE FROM oomtriage.nodes WHERE last_shipped_at < to_timestamp($1)",
                          {std::to_string(before)}));
      OOMTRIAGE_TRY(tx.commit());
      return removed;
    }
    std::vector<std::string> stores, ids;
    for (int row = 0; row < count; ++row) {
      stores.push_back(text_at(doomed.get(), row, 0));
      ids.push_back(text_at(doomed.get(), row, 1));
    }
    const Params keys = {fmt::format("{{{}}}", fmt::join(stores, ",")),
                         fmt::format("{{{}}}", fmt::join(ids, ","))};
    for (const char* sql :
         {"DELETE FROM oomtriage.events WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.gpu_memory WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.heal_attempts WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.runs WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.config_snapshots WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.jobs WHERE (store_id, id) IN (SELECT * FROM unnest($1::uuid[], "
          "$2::bigint[]))"}) {
      OOMTRIAGE_TRY(c.run(sql, keys));
    }
    OOMTRIAGE_TRY(tx.commit());
    removed += count;
    // The rest at the next pass: the shipper's thread is not held for months of rows at once.
    if (--max_batches <= 0) return removed;
  }
}

}  // namespace oomtriage::db
