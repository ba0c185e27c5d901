// daemon/service/tracked_log.h
//
// One followed log as the daemon's parts share it: its follower (identity, reads, checkpoints),
// the job it belongs to, the rule that matched it, and the scheduling state the read scheduler and
// the commit path keep on it. The rule is a copy, not a pointer into the config: a SIGHUP that
// leaves a rule as it was keeps its logs followed as they are (followed_logs.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/daemon_config.h"
#include "daemon/service/file_follower.h"
#include "daemon/service/read_pacer.h"
#include "parsers/event.h"
#include "parsers/job_config.h"
#include "parsers/log_analyzer.h"
#include "parsers/native_config.h"
#include "triage/fix.h"

namespace oomtriage::daemon {

using Clock = std::chrono::steady_clock;

inline constexpr size_t kReadChunk = 1 << 20;
inline constexpr size_t kReadBudgetPerTurn = 8 << 20;  // then other logs get a turn

// Where a newly followed log is read from: its first byte (a log that appeared while running),
// its end (present at the very first start: no alerts for old crashes) or the stored offset.
enum class StartAt { kBeginning, kEnd, kStored };

// The job a log belongs to, as the job registry found it (job_registry.h).
struct Job {
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::optional<int64_t> snapshot_id;
  std::string name;
  std::optional<parsers::JobConfig> config;
  std::string config_problem;
  std::optional<std::string> config_path;
  std::optional<std::string> config_sha256;
  std::vector<parsers::NativeFile> files;  // the config files read, for what a run carried
};

struct Tracked {
  std::unique_ptr<FileFollower> follower;
  WatchRule rule;
  int64_t file_id = 0;
  Job job;
  std::optional<Clock::time_point> settle_at;
  parsers::Trainer stored_trainer = parsers::Trainer::kUnknown;
  // Progress not yet committed: offsets are written once per checkpoint interval unless an
  // event or a new outcome comes (a crash re-reads that much; events are unique per offset).
  bool dirty = false;
  // The store refused its last commit: it was rewound and waits for the store's retry.
  bool awaiting_store = false;
  bool queued = false;  // already in this inotify batch's read list
  Clock::time_point last_read{};
  Pace pace;
  int watch = -1;        // its inotify watch while it is quiet
  int close_watch = -1;  // busy: its watch for its writers' last close
  bool polled = false;   // in the busy list
  // Its last read found no descriptor free (every open log busy): polled until it gets one.
  bool waiting_for_descriptor = false;
  // Busy: how far the burst check looked (read_scheduler.h), and how many checks in a row found
  // a line end (a log of lines, not of redraws, is left to its interval).
  uint64_t checked_to = 0;
  int line_checks = 0;
  uint64_t polled_to = 0;  // how far it was known to reach at its last poll
  std::optional<parsers::Outcome> committed_outcome;
  bool read_error_logged = false;
  // The run's fatal OOM as this daemon saw it, and its ranked fixes: what healing starts from.
  std::optional<parsers::OomEvent> fatal_event;
  std::vector<triage::Fix> fatal_fixes;
  bool fatal_untold = false;  // the healer has not heard of it yet
  // Leaving (its name went away): when it last grew, and whether it was deleted.
  Clock::time_point last_growth{};
  bool deleted = false;
  // Live state (daemon_live.cc): the log grew since its live state was last stored; it grew
  // while this daemon followed it (only such a log can stall: one found silent at a start may
  // have ended long ago without a word); since when it is stalled (unix seconds), as stored.
  bool live_dirty = false;
  bool grew_here = false;
  bool live_loaded = false;  // a stall stored for its run was looked for
  std::optional<int64_t> stalled_since;
  // Followed anew after a store recovery lost where it was read to: its events below this
  // offset may have been alerted before the damage, and their alerts say so.
  uint64_t resend_below = 0;

  const std::string& path() const { return follower->path(); }
  parsers::LogAnalyzer& analyzer() { return follower->analyzer(); }
  bool is_container_log() const { return rule.source == "kubernetes"; }

  // The outcome a commit stores. An open incident's event is not stored yet (its traceback may
  // still be coming), so the run keeps the outcome it had: a reader of the store never sees a
  // run crashed_oom without the event that decided it (the two share one transaction).
  std::optional<parsers::Outcome> storable_outcome() {
    if (analyzer().has_open_incident()) return committed_outcome;
    return analyzer().outcome_so_far();
  }
};

}  // namespace oomtriage::daemon
