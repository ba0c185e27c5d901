// db/store_jobs.cc: the rows a job is made of as the daemon registers them (the job, its config
// snapshots, its runs, the files it follows and where their reads stand), the stories `jobs` and
// `report` read back, and the records of `oomtriage run` (heal attempts) and `oomtriage fix
// --write` (applied fixes).
#include "db/store.h"

#include "db/sqlite_statement.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <charconv>

namespace oomtriage::db {

Result<int64_t> Store::upsert_job(const std::string& name, const std::string& home,
                                  const std::string& trainer, const std::string& log_dir,
                                  int64_t now) {
  if (!home.empty()) {
    // A job stored before jobs had homes becomes this one, once.
    Statement adopt(*statements_,
                    "UPDATE jobs SET home = ?2 WHERE name = ?1 AND home = '' AND NOT EXISTS "
                    "(SELECT 1 FROM jobs WHERE name = ?1 AND home = ?2)");
    adopt.bind(1, name).bind(2, home);
    if (adopt.step() != SQLITE_DONE) return adopt.error("upsert job " + name);
  }
  Statement s(*statements_,
              "INSERT INTO jobs (name, home, trainer, log_dir, first_seen, last_seen) VALUES (?1, "
              "?2, ?3, ?4, ?5, ?5) ON CONFLICT (name, home) DO UPDATE SET last_seen = ?5, "
              "log_dir = ?4, trainer = CASE WHEN ?3 = 'unknown' THEN trainer ELSE ?3 END "
              "RETURNING id");
  s.bind(1, name).bind(2, home).bind(3, trainer).bind(4, log_dir).bind(5, now);
  if (s.step() != SQLITE_ROW) return s.error("upsert job " + name);
  return s.integer(0);
}

Result<int64_t> Store::add_config_snapshot(int64_t job_id, const std::string& path,
                                           const std::string& sha256, const std::string& content,
                                           int64_t now) {
  {
    Statement find(*statements_,
                   "SELECT id FROM config_snapshots WHERE job_id = ?1 AND sha256 = ?2");
    find.bind(1, job_id).bind(2, sha256);
    if (find.step() == SQLITE_ROW) return find.integer(0);
  }
  Statement s(*statements_,
              "INSERT INTO config_snapshots (job_id, path, sha256, content, seen_at) VALUES (?1, "
              "?2, ?3, ?4, ?5) RETURNING id");
  s.bind(1, job_id).bind(2, path).bind(3, sha256).bind(4, content).bind(5, now);
  if (s.step() != SQLITE_ROW) return s.error("add config snapshot");
  return s.integer(0);
}

Result<int64_t> Store::start_run(int64_t job_id, const std::string& log_path,
                                 std::optional<int64_t> snapshot_id, int64_t now) {
  Statement s(
      *statements_,
      "INSERT INTO runs (job_id, log_path, snapshot_id, started_at, updated_at) VALUES (?1, "
      "?2, ?3, ?4, ?4) RETURNING id");
  s.bind(1, job_id).bind(2, log_path).bind(3, snapshot_id).bind(4, now);
  if (s.step() != SQLITE_ROW) return s.error("start run");
  return s.integer(0);
}

Result<std::optional<FileRow>> Store::find_file(uint64_t dev, uint64_t ino) {
  Statement s(*statements_,
              "SELECT id, path, fingerprint, fingerprint_len, offset, job_id, run_id, "
              "analyzer_state, generation, line, anchor FROM files WHERE dev = ?1 AND ino = ?2");
  s.bind(1, static_cast<int64_t>(dev)).bind(2, static_cast<int64_t>(ino));
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<FileRow>();
  if (rc != SQLITE_ROW) return s.error("find file");
  FileRow row;
  row.id = s.integer(0);
  row.path = s.text(1);
  row.dev = dev;
  row.ino = ino;
  row.fingerprint = s.text(2);
  row.fingerprint_len = s.integer(3);
  row.offset = static_cast<uint64_t>(s.integer(4));
  row.job_id = s.integer(5);
  row.run_id = s.integer(6);
  row.analyzer_state = s.text(7);
  row.generation = s.integer(8);
  row.line = s.integer(9);
  row.anchor = s.text(10);
  return std::optional<FileRow>(std::move(row));
}

Result<int64_t> Store::insert_file(const FileRow& file, int64_t now) {
  // A (dev, ino) seen before belongs to a file that is gone: the inode was reused.
  Statement s(
      *statements_,
      "INSERT INTO files (path, dev, ino, fingerprint, fingerprint_len, offset, job_id, "
      "run_id, analyzer_state, updated_at, generation, line, anchor, skipped_bytes) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ON CONFLICT (dev, ino) "
      "DO UPDATE SET path = ?1, fingerprint = ?4, fingerprint_len = ?5, offset = ?6, "
      "job_id = ?7, run_id = ?8, analyzer_state = ?9, state = 'active', updated_at = ?10, "
      "generation = ?11, line = ?12, anchor = ?13, skipped_bytes = ?14 RETURNING id");
  s.bind(1, file.path)
      .bind(2, static_cast<int64_t>(file.dev))
      .bind(3, static_cast<int64_t>(file.ino))
      .bind(4, file.fingerprint)
      .bind(5, file.fingerprint_len)
      .bind(6, static_cast<int64_t>(file.offset))
      .bind(7, file.job_id)
      .bind(8, file.run_id)
      .bind(9, file.analyzer_state)
      .bind(10, now)
      .bind(11, file.generation)
      .bind(12, file.line)
      .bind(13, file.anchor)
      .bind(14, static_cast<int64_t>(file.skipped_bytes));
  if (s.step() != SQLITE_ROW) return s.error("insert file " + file.path);
  return s.integer(0);
}

Result<std::vector<FileRow>> Store::active_files() {
  Statement s(*statements_,
              "SELECT id, path, dev, ino, fingerprint, fingerprint_len, offset, job_id, run_id, "
              "analyzer_state, generation, line, anchor FROM files WHERE state = 'active' ORDER BY "
              "id");
  std::vector<FileRow> rows;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    FileRow row;
    row.id = s.integer(0);
    row.path = s.text(1);
    row.dev = static_cast<uint64_t>(s.integer(2));
    row.ino = static_cast<uint64_t>(s.integer(3));
    row.fingerprint = s.text(4);
    row.fingerprint_len = s.integer(5);
    row.offset = static_cast<uint64_t>(s.integer(6));
    row.job_id = s.integer(7);
    row.run_id = s.integer(8);
    row.analyzer_state = s.text(9);
    row.generation = s.integer(10);
    row.line = s.integer(11);
    row.anchor = s.text(12);
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return s.error("active files");
  return rows;
}

Result<Ok> Store::set_file_state(int64_t file_id, const std::string& state, int64_t now) {
  Statement s(*statements_, "UPDATE files SET state = ?2, updated_at = ?3 WHERE id = ?1");
  s.bind(1, file_id).bind(2, state).bind(3, now);
  if (s.step() != SQLITE_DONE) return s.error("set file state");
  return Ok{};
}

Result<std::vector<JobSummary>> Store::find_jobs(const JobQuery& query) {
  // One statement for every filter: an empty one is true at once. A node's store holds a few
  // hundred jobs, so the newest run and event are looked up per job; the fleet store keeps them
  // on the job (db/fleet_store.cc).
  Statement s(
      *statements_,
      "SELECT j.id, j.name, j.trainer, j.log_dir, j.last_seen, "
      "(SELECT COUNT(*) FROM runs r WHERE r.job_id = j.id), "
      "(SELECT COUNT(*) FROM events e WHERE e.job_id = j.id), "
      "COALESCE((SELECT outcome FROM runs r WHERE r.job_id = j.id ORDER BY r.id DESC "
      "LIMIT 1), 'unknown'), "
      "COALESCE(le.phase, ''), le.step, COALESCE(le.top_fix, ''), "
      "j.home, "
      "(SELECT g.peak_bytes FROM gpu_memory g JOIN runs r ON r.id = g.run_id WHERE "
      "r.job_id = j.id ORDER BY r.id DESC, g.peak_bytes DESC LIMIT 1), "
      "(SELECT g.total_bytes FROM gpu_memory g JOIN runs r ON r.id = g.run_id WHERE "
      "r.job_id = j.id ORDER BY r.id DESC, g.peak_bytes DESC LIMIT 1), "
      "COALESCE(le.model_family, ''), "
      "lr.step, lr.total_steps, lr.steps_per_second, lr.loss, COALESCE(lr.phase, ''), "
      "COALESCE(lr.last_write, 0), COALESCE(lr.last_line, ''), lr.stalled_since, "
      "EXISTS (SELECT 1 FROM warnings w WHERE w.job_id = j.id AND w.kind = 'predicted_oom' AND "
      "w.resolved_at IS NULL), "
      "EXISTS (SELECT 1 FROM warnings w WHERE w.job_id = j.id AND w.kind = 'near_oom' AND "
      "w.resolved_at IS NULL AND w.run_id = lr.run_id) "
      "FROM jobs j LEFT JOIN events le ON le.id = (SELECT MAX(e.id) FROM events e WHERE "
      "e.job_id = j.id) LEFT JOIN live_state lr ON lr.run_id = (SELECT MAX(r.id) FROM runs r "
      "WHERE r.job_id = j.id) WHERE "
      "(?1 = '' OR COALESCE((SELECT outcome FROM runs r WHERE r.job_id = j.id ORDER BY r.id "
      "DESC LIMIT 1), 'unknown') = ?1) "
      "AND (?2 = '' OR ?10 IS NOT NULL OR le.phase = ?2) "
      "AND (?3 = '' OR j.trainer = ?3) "
      "AND (?4 = '' OR ?10 IS NOT NULL OR le.model_family = ?4) "
      "AND (?5 = '' OR instr(lower(j.name), lower(?5)) > 0) "
      "AND (?6 = '[]' OR j.name IN (SELECT value FROM json_each(?6))) "
      "AND (?7 IS NULL OR j.last_seen >= ?7) "
      // An OOM in the days asked, counted as fleet_overview() counts them (db/store_overview.cc):
      // then phase and family pick that event, not the newest.
      "AND (?10 IS NULL OR EXISTS (SELECT 1 FROM events e WHERE e.job_id = j.id AND "
      "e.created_at >= ?10 AND (?11 IS NULL OR e.created_at < ?11) AND (?2 = '' OR e.phase = "
      "?2) AND (?4 = '' OR e.model_family = ?4))) "
      "ORDER BY j.last_seen DESC, j.id DESC LIMIT ?8 OFFSET ?9");
  nlohmann::json names = nlohmann::json::array();
  for (const auto& name : query.names) names.push_back(name);
  s.bind(1, query.outcome)
      .bind(2, query.phase)
      .bind(3, query.trainer)
      .bind(4, query.family)
      .bind(5, query.text)
      .bind(6, names.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .bind(7, query.since)
      .bind(8, query.limit ? static_cast<int64_t>(query.limit) : int64_t{-1})
      .bind(9, static_cast<int64_t>(query.offset))
      .bind(10,
            query.oom_window() ? std::optional<int64_t>(query.oom_from.value_or(0)) : std::nullopt)
      .bind(11, query.oom_until);
  if (!s.ok()) return s.error("list jobs");
  std::vector<JobSummary> jobs;
  // A node's store has no hosts: a host filter matches none of its jobs.
  if (!query.host.empty()) return jobs;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    JobSummary job;
    job.id = s.integer(0);
    job.key = std::to_string(job.id);
    job.name = s.text(1);
    job.trainer = s.text(2);
    job.log_dir = s.text(3);
    job.last_seen = s.integer(4);
    job.runs = s.integer(5);
    job.events = s.integer(6);
    job.outcome = s.text(7);
    job.last_phase = s.text(8);
    job.last_step = s.optional_integer(9);
    job.top_fix = s.text(10);
    job.home = s.text(11);
    if (const auto peak = s.optional_integer(12)) job.gpu_peak_bytes = static_cast<uint64_t>(*peak);
    if (const auto total = s.optional_integer(13)) {
      job.gpu_total_bytes = static_cast<uint64_t>(*total);
    }
    job.family = s.text(14);
    job.live.step = s.optional_integer(15);
    job.live.total_steps = s.optional_integer(16);
    job.live.steps_per_second = s.optional_real(17);
    job.live.loss = s.optional_real(18);
    job.live.phase = s.text(19);
    job.live.last_write = s.integer(20);
    job.live.last_line = s.text(21);
    job.live.stalled_since = s.optional_integer(22);
    job.predicted_oom = s.integer(23) != 0;
    job.near_oom = s.integer(24) != 0;
    jobs.push_back(std::move(job));
  }
  if (rc != SQLITE_DONE) return s.error("list jobs");
  return jobs;
}

Result<std::optional<JobStory>> Store::job_story(const std::string& name,
                                                 const std::optional<std::string>& home) {
  JobQuery query;
  query.names = {name};
  auto jobs = find_jobs(query);
  if (!jobs) return jobs.error();
  std::vector<const JobSummary*> named;
  for (const auto& job : *jobs) {
    if (job.name == name && (!home || job.home == *home)) named.push_back(&job);
  }
  if (named.empty()) return std::optional<JobStory>();
  if (named.size() > 1) {
    std::string folders;
    for (const JobSummary* job : named) folders += (folders.empty() ? "" : ", ") + job->home;
    return make_error(ErrorCode::kBadInput, "job name '" + name + "' is used by " +
                                                std::to_string(named.size()) + " jobs, in " +
                                                folders);
  }
  return story_of(*named.front());
}

Result<std::optional<JobStory>> Store::job_story_by_id(int64_t job_id) {
  Statement s(*statements_, "SELECT name FROM jobs WHERE id = ?1");
  s.bind(1, job_id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<JobStory>();
  if (rc != SQLITE_ROW) return busy_or_database(db_, "job_story_by_id");
  JobQuery query;
  query.names = {s.text(0)};
  auto jobs = find_jobs(query);
  if (!jobs) return jobs.error();
  for (const auto& job : *jobs) {
    if (job.id == job_id) return story_of(job);
  }
  return std::optional<JobStory>();
}

Result<std::optional<JobStory>> Store::job_story_by_key(const std::string& key) {
  int64_t id = 0;
  const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
  if (error != std::errc() || end != key.data() + key.size() || id <= 0) {
    return std::optional<JobStory>();
  }
  return job_story_by_id(id);
}

Result<std::optional<JobStory>> Store::story_of(const JobSummary& summary) {
  // Each step's end is checked: a table that cannot be read is an error, never a story told
  // short as if the job had no runs, snapshots, events or attempts.
  JobStory story;
  story.job = summary;
  const int64_t id = story.job.id;
  int rc;
  Statement runs(*statements_,
                 "SELECT id, log_path, outcome, started_at, updated_at, snapshot_id FROM runs "
                 "WHERE job_id = ?1 ORDER BY id");
  runs.bind(1, id);
  while ((rc = runs.step()) == SQLITE_ROW) {
    story.runs.push_back({runs.integer(0), runs.text(1), runs.text(2), runs.integer(3),
                          runs.integer(4), runs.optional_integer(5)});
  }
  if (rc != SQLITE_DONE) return runs.error("job story: runs");
  Statement snaps(*statements_,
                  "SELECT id, path, sha256, content, seen_at FROM config_snapshots WHERE job_id = "
                  "?1 ORDER BY id");
  snaps.bind(1, id);
  while ((rc = snaps.step()) == SQLITE_ROW) {
    story.snapshots.push_back(
        {snaps.integer(0), snaps.text(1), snaps.text(2), snaps.text(3), snaps.integer(4)});
  }
  if (rc != SQLITE_DONE) return snaps.error("job story: config snapshots");
  Statement events(*statements_,
                   "SELECT id, COALESCE(run_id, 0), snapshot_id, event_json, fixes_json, "
                   "created_at FROM events WHERE job_id = ?1 ORDER BY id");
  events.bind(1, id);
  while ((rc = events.step()) == SQLITE_ROW) {
    story.events.push_back({events.integer(0), events.integer(1), events.optional_integer(2),
                            events.text(3), events.text(4), events.integer(5)});
  }
  if (rc != SQLITE_DONE) return events.error("job story: events");
  Statement attempts(*statements_,
                     "SELECT run_id, attempt, max_attempts, fix_id, change, argv_json, "
                     "resumed_step, outcome, verdict, started_at, ended_at FROM heal_attempts "
                     "WHERE job_id = ?1 ORDER BY id");
  attempts.bind(1, id);
  while ((rc = attempts.step()) == SQLITE_ROW) {
    HealAttempt a;
    a.run_id = attempts.integer(0);
    a.attempt = static_cast<int>(attempts.integer(1));
    a.max_attempts = static_cast<int>(attempts.integer(2));
    a.fix_id = attempts.text(3);
    a.change = attempts.text(4);
    a.argv_json = attempts.text(5);
    a.resumed_step = attempts.optional_integer(6);
    a.outcome = attempts.text(7);
    a.verdict = attempts.text(8);
    a.started_at = attempts.integer(9);
    a.ended_at = attempts.integer(10);
    story.attempts.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return attempts.error("job story: heal attempts");
  Statement unread(*statements_,
                   "SELECT path FROM files WHERE job_id = ?1 AND skipped_bytes > 0 ORDER BY id "
                   "LIMIT 1");
  unread.bind(1, id);
  rc = unread.step();
  if (rc == SQLITE_ROW) {
    story.unread_log = unread.text(0);
  } else if (rc != SQLITE_DONE) {
    return unread.error("job story: files");
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(story.gpu_memory, gpu_memory_of_job(id));
  OOMTRIAGE_ASSIGN_OR_RETURN(story.warnings, list_warnings(id, 100));
  return std::optional<JobStory>(std::move(story));
}

Result<Ok> Store::record_heal_attempt(int64_t job_id, const HealAttempt& a) {
  Statement s(*statements_,
              "INSERT INTO heal_attempts (job_id, run_id, attempt, max_attempts, fix_id, change, "
              "argv_json, resumed_step, outcome, verdict, started_at, ended_at) VALUES (?1, ?2, "
              "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT (run_id) DO UPDATE SET "
              "outcome = ?9, verdict = ?10, ended_at = ?12");
  s.bind(1, job_id).bind(2, a.run_id).bind(3, int64_t{a.attempt}).bind(4, int64_t{a.max_attempts});
  s.bind(5, a.fix_id).bind(6, a.change).bind(7, a.argv_json).bind(8, a.resumed_step);
  s.bind(9, a.outcome).bind(10, a.verdict).bind(11, a.started_at).bind(12, a.ended_at);
  if (s.step() != SQLITE_DONE) return s.error("record heal attempt");
  return Ok{};
}

Result<std::optional<JobStory>> Store::job_story_of_log(const std::string& log_path) {
  Statement s(*statements_,
              "SELECT r.job_id FROM runs r WHERE r.log_path = ?1 ORDER BY r.id DESC LIMIT 1");
  s.bind(1, log_path);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<JobStory>();
  if (rc != SQLITE_ROW) return busy_or_database(db_, "job_story_of_log");
  return job_story_by_id(s.integer(0));
}

Result<Ok> Store::record_applied_fix(const AppliedFix& fix) {
  Statement s(*statements_,
              "INSERT INTO applied_fixes (log_path, event_offset, fix_id, config_path, "
              "sha256_before, sha256_after, fix_json, applied_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
              "?7, ?8)");
  s.bind(1, fix.log_path)
      .bind(2, static_cast<int64_t>(fix.event_offset))
      .bind(3, fix.fix_id)
      .bind(4, fix.config_path)
      .bind(5, fix.sha256_before)
      .bind(6, fix.sha256_after)
      .bind(7, fix.fix_json)
      .bind(8, fix.applied_at);
  if (s.step() != SQLITE_DONE) return busy_or_database(db_, "record_applied_fix");
  return Ok{};
}

Result<std::vector<AppliedFix>> Store::applied_fixes(const std::string& log_path,
                                                     uint64_t event_offset) {
  Statement s(*statements_,
              "SELECT log_path, event_offset, fix_id, config_path, sha256_before, sha256_after, "
              "fix_json, applied_at FROM applied_fixes WHERE log_path = ?1 AND event_offset = ?2 "
              "ORDER BY id");
  s.bind(1, log_path).bind(2, static_cast<int64_t>(event_offset));
  std::vector<AppliedFix> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    out.push_back({s.text(0), static_cast<uint64_t>(s.integer(1)), s.text(2), s.text(3), s.text(4),
                   s.text(5), s.text(6), s.integer(7)});
  }
  if (rc != SQLITE_DONE) return busy_or_database(db_, "applied_fixes");
  return out;
}

Result<int64_t> Store::count_events() {
  Statement s(*statements_, "SELECT COUNT(*) FROM events");
  if (s.step() != SQLITE_ROW) return s.error("count events");
  return s.integer(0);
}

}  // namespace oomtriage::db
