// daemon/service/job_registry.cc: registering a followed log's job and run, refreshing and
// snapshotting its config, and ranking a commit's events with the job's history.
#include "daemon/service/job_registry.h"

#include <algorithm>
#include <filesystem>

#include "daemon/common/journal_log.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/job_history.h"
#include "daemon/service/job_locator.h"
#include "daemon/service/store_failures.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {

namespace fs = std::filesystem;

std::string job_home(const Tracked& file) {
  if (file.is_container_log()) return "";
  return fs::path(file.path()).parent_path().string();
}

JobRegistry::JobRegistry(db::Store& store, Metrics& metrics, std::function<int64_t()> wall_clock)
    : store_(store), metrics_(metrics), wall_clock_(std::move(wall_clock)) {}

Result<Ok> JobRegistry::register_job(Tracked& file, int64_t run_id) {
  const int64_t now = wall_clock_();
  Job& job = file.job;
  job.name = expand_template(file.rule.job, file.path());
  refresh_config(file);
  const std::string trainer(parsers::to_string(file.rule.trainer));
  auto id = store_.upsert_job(job.name, job_home(file), trainer,
                              fs::path(file.path()).parent_path().string(), now);
  if (!id) return id.error();
  job.job_id = *id;
  snapshot(job);
  if (on_registered_) on_registered_(file);
  if (run_id != 0) {
    job.run_id = run_id;
    return Ok{};
  }
  if (file.is_container_log()) {
    // kubelet rotates <restart>.log by renaming it and starting a new one of the same name:
    // the container's run goes on (a restart is the next number, a new run).
    auto story = store_.job_story_by_id(job.job_id);
    count_store_failure(metrics_, "read_story", story);  // then it is a new run: nothing lost
    if (story && *story) {
      for (auto run = (*story)->runs.rbegin(); run != (*story)->runs.rend(); ++run) {
        if (run->log_path == file.path()) {
          job.run_id = run->id;
          return Ok{};
        }
      }
    }
  }
  auto run = store_.start_run(job.job_id, file.path(), job.snapshot_id, now);
  if (!run) return run.error();
  job.run_id = *run;
  return Ok{};
}

// The same registry as scan and fix: the rule's `config:` when it names an existing file, the
// log's own facts, the trainer the rule or the log names.
void JobRegistry::refresh_config(Tracked& file) {
  std::optional<fs::path> explicit_config;
  if (!file.rule.config.empty()) {
    const std::string config_path = expand_template(file.rule.config, file.path());
    std::error_code ec;
    if (fs::exists(config_path, ec)) explicit_config = config_path;
  }
  const parsers::LogAnalysis facts = file.analyzer().job_facts();
  const parsers::Trainer trainer =
      file.rule.trainer != parsers::Trainer::kUnknown ? file.rule.trainer : facts.trainer;
  auto located = locate_job(file.path(), explicit_config, trainer, facts);
  if (!located && warned_configs_.insert(located.error().message).second) {
    ++metrics_.parse_errors["bad_job_config"];
    log_line(kWarning, "{}; triaging without it", located.error().message);
  }
  JobLookup lookup = located ? std::move(*located) : JobLookup{};
  if (!located) lookup.config_problem = located.error().message;
  if (!lookup.warning.empty() && warned_configs_.insert(lookup.warning).second) {
    ++metrics_.parse_errors["bad_job_config"];
    log_line(kWarning, "{}", lookup.warning);  // each bad field once, the job goes on
  }
  Job& job = file.job;
  job.config = std::move(lookup.config);
  job.config_problem = lookup.config_problem;
  job.config_path = lookup.job ? lookup.job->config_path : std::nullopt;
  job.config_sha256 = lookup.job ? lookup.job->config_sha256 : std::nullopt;
  job.files = std::move(lookup.files);
  if (job.config_path) config_texts_[*job.config_path] = lookup.config_text;
}

// The store keeps one snapshot per distinct config; without one the events name none.
void JobRegistry::snapshot(Job& job) {
  if (!job.config_path || !job.config_sha256) return;
  auto id = store_.add_config_snapshot(job.job_id, *job.config_path, *job.config_sha256,
                                       config_texts_[*job.config_path], wall_clock_());
  count_store_failure(metrics_, "add_config_snapshot", id);
  if (id) job.snapshot_id = *id;
}

void JobRegistry::note_trainer(Tracked& file) {
  const parsers::Trainer trainer = file.analyzer().trainer();
  if (trainer == parsers::Trainer::kUnknown || trainer == file.stored_trainer) return;
  auto upserted =
      store_.upsert_job(file.job.name, job_home(file), std::string(parsers::to_string(trainer)),
                        fs::path(file.path()).parent_path().string(), wall_clock_());
  if (upserted) file.stored_trainer = trainer;
  count_store_failure(metrics_, "upsert_job", upserted);
}

std::vector<db::EventRow> JobRegistry::triage_events(Tracked& file,
                                                     const std::vector<parsers::OomEvent>& events) {
  std::vector<db::EventRow> rows;
  if (events.empty()) return rows;
  // The config as it is now: a new snapshot when it changed since the last event.
  refresh_config(file);
  snapshot(file.job);
  const Job& job = file.job;
  const std::string family =
      job.config ? std::string(parsers::to_string(job.config->family)) : "unknown";
  const triage::JobView view{job.config ? &*job.config : nullptr, job.config_problem, &job.files};
  const triage::History history = history_of(file, events);
  parsers::LogAnalyzer& analyzer = file.analyzer();
  for (const parsers::OomEvent& event : events) {
    std::vector<triage::Fix> fixes =
        triage::triage_event(event, analyzer.trainer(), analyzer.arguments(), view, history);
    db::EventRow row = event_row(event, fixes, family);
    row.journal = event_journal_text(job.name, file.path(), event, fixes);
    row.resent = event.offset < file.resend_below;
    rows.push_back(std::move(row));
    if (!event.recovered) {
      // An amendment of an event this daemon never saw is an open incident read again after a
      // restart (parsers/log_analyzer.h still_open()): the daemon before told the healer of it.
      const bool read_again =
          event.revision > 0 && (!file.fatal_event || file.fatal_event->offset != event.offset);
      if (!read_again) {
        file.fatal_event = event;
        file.fatal_fixes = std::move(fixes);
        file.fatal_untold = true;
      }
    }
  }
  return rows;
}

// The job's story before this run, read only when a crash of this run can use it: the fixes
// the run carried from the previous run's crash go last when it crashed again in that phase.
triage::History JobRegistry::history_of(const Tracked& file,
                                        const std::vector<parsers::OomEvent>& events) {
  const bool any_fatal = std::any_of(events.begin(), events.end(),
                                     [](const parsers::OomEvent& e) { return !e.recovered; });
  if (!any_fatal || file.job.files.empty()) return {};
  auto story = store_.job_story_by_id(file.job.job_id);
  count_store_failure(metrics_, "read_story", story);  // ranked as a first crash then
  if (!story || !*story) return {};
  return {previous_crash(**story, file.job.run_id), {}};
}

}  // namespace oomtriage::daemon
