// daemon/cli/log_story.cc: a log read as `scan` reads it, told as a job's story.
#include "daemon/cli/log_story.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "daemon/cli/scan_command.h"
#include "daemon/common/clock.h"
#include "parsers/event_codec.h"
#include "triage/fix_codec.h"

namespace oomtriage::daemon {

namespace fs = std::filesystem;

Result<JobLog> job_log_at(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return JobLog{path, 1};
  const std::vector<std::string> logs = logs_under(path, {});
  if (logs.empty()) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{}: no logs in this folder (looked for log.txt, *.log, *.out, "
                                  "*.err); name the log",
                                  path));
  }
  // The newest: a job's folder holds its runs' logs and their rotations, and the run going on, or
  // the last, is what is asked about.
  const auto written = [](const std::string& log) {
    std::error_code ignored;
    return fs::last_write_time(log, ignored);
  };
  const auto newest = std::max_element(logs.begin(), logs.end(), [&](const auto& a, const auto& b) {
    return written(a) < written(b);
  });
  return JobLog{*newest, logs.size()};
}

Result<db::JobStory> story_of_log(const std::string& log, const std::string& store) {
  OOMTRIAGE_ASSIGN_OR_RETURN(ScannedLog scanned, analyse_log(log, parsers::Trainer::kUnknown));
  OOMTRIAGE_ASSIGN_OR_RETURN(JobLookup lookup, rank_log(scanned, std::nullopt, store));
  const parsers::LogAnalysis& analysis = scanned.analysis;
  const int64_t now = unix_now();
  struct stat st {};
  const int64_t written = ::stat(log.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : now;
  const fs::path absolute = fs::absolute(log).lexically_normal();

  db::JobStory story;
  db::JobSummary& job = story.job;
  job.name = scanned.job && !scanned.job->name.empty() ? scanned.job->name
                                                       : absolute.parent_path().filename().string();
  job.home = absolute.parent_path().string();
  job.log_dir = job.home;
  job.trainer = std::string(parsers::to_string(analysis.trainer));
  job.outcome = std::string(parsers::to_string(analysis.outcome));
  job.runs = 1;
  job.events = static_cast<int64_t>(analysis.events.size());
  job.last_seen = written;

  std::optional<int64_t> snapshot_id;
  if (!lookup.files.empty() && !lookup.config_text.empty()) {
    snapshot_id = 1;
    db::SnapshotRow snapshot;
    snapshot.id = 1;
    snapshot.path = lookup.files.front().path;
    snapshot.sha256 = scanned.job && scanned.job->config_sha256 ? *scanned.job->config_sha256 : "";
    snapshot.content = lookup.config_text;
    snapshot.seen_at = now;
    story.snapshots.push_back(std::move(snapshot));
  }
  db::RunRow run;
  run.id = 1;
  run.log_path = absolute.string();
  run.outcome = job.outcome;
  run.started_at = written;
  run.updated_at = written;
  run.snapshot_id = snapshot_id;
  story.runs.push_back(std::move(run));

  for (size_t i = 0; i < analysis.events.size(); ++i) {
    db::StoredEvent event;
    event.id = static_cast<int64_t>(i + 1);
    event.run_id = 1;
    event.snapshot_id = snapshot_id;
    event.event_json = parsers::encode_event_text(analysis.events[i]);
    // The report shows the newest event's fixes: scan's, for the log's incident.
    const bool last = i + 1 == analysis.events.size();
    event.fixes_json = triage::encode_fixes_text(last ? scanned.fixes : std::vector<triage::Fix>{});
    event.created_at = now;
    story.events.push_back(std::move(event));
  }
  if (!analysis.events.empty()) {
    const parsers::OomEvent& newest = analysis.events.back();
    job.last_phase = std::string(parsers::to_string(newest.phase));
    job.last_step = newest.step;
    if (!scanned.fixes.empty()) job.top_fix = scanned.fixes.front().id;
  }
  return story;
}

}  // namespace oomtriage::daemon
