// daemon/service/job_registry.h
//
// The jobs the followed logs belong to. A log is registered once it is followed: its job is found
// or created by the rule's name template, its config located the way `scan` and `fix` locate it
// (job_locator.h) and snapshotted when it is a file, and a new log starts a run. When a commit
// carries events, the config is read again (a new snapshot when it changed) and each event is
// ranked on the one triage path (triage/triage_job.h) with the job's history from the store.
// Every store call it survives failing is counted (store_failures.h); the ones that stop a log
// from being followed are returned.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "daemon/common/metrics.h"
#include "daemon/service/tracked_log.h"
#include "db/store.h"
#include "triage/triage_job.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

class JobRegistry {
 public:
  // `wall_clock` gives Unix seconds (the store's timestamps).
  JobRegistry(db::Store& store, Metrics& metrics, std::function<int64_t()> wall_clock);

  // Fills `file.job`: finds or creates the job, its config snapshot and, when `run_id` is 0, a
  // new run (a container log renamed by kubelet goes on with the run of its name). An error is
  // the store's; the log is not followed then and nothing was read.
  Result<Ok> register_job(Tracked& file, int64_t run_id);

  // Called once a log's job is registered with its config (the pre-flight: preflight_alerts.h).
  void set_on_registered(std::function<void(const Tracked&)> on_registered) {
    on_registered_ = std::move(on_registered);
  }

  // The trainer the log shows, onto the job row the first time it is known (tried again at the
  // next call until the store keeps it).
  void note_trainer(Tracked& file);

  // The stored rows of `events`, each with its ranked fixes; the config is refreshed first. A
  // fatal event becomes the run's `fatal_event` (what healing starts from). Logs one journal line
  // per event.
  std::vector<db::EventRow> triage_events(Tracked& file,
                                          const std::vector<parsers::OomEvent>& events);

 private:
  void refresh_config(Tracked& file);
  void snapshot(Job& job);
  triage::History history_of(const Tracked& file, const std::vector<parsers::OomEvent>& events);

  db::Store& store_;
  Metrics& metrics_;
  std::function<int64_t()> wall_clock_;
  std::function<void(const Tracked&)> on_registered_;
  std::set<std::string> warned_configs_;             // each bad config logged once
  std::map<std::string, std::string> config_texts_;  // by path: what a snapshot stores
};

// The folder that tells a job from another of its name: its log's. A container log's job is named
// by its namespace and owner, and each restarted pod logs to a new folder: the name alone.
std::string job_home(const Tracked& file);

}  // namespace oomtriage::daemon
