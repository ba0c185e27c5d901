// daemon/service/daemon_reads.cc: the daemon's reads and commits (Daemon, daemon_loop.h).
// inotify's changes and the rescan find and wake logs; each read of a log ends in one store
// transaction through the event sink (its new events, resume offset, anchor and analyzer
// checkpoint); a refusal rewinds the log to its last commit for the store-retry timer; the settle
// timer closes a quiet log's incident and the checkpoint timer writes the offsets of logs that
// only made progress.
#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/common/journal_log.h"
#include "daemon/service/daemon_loop.h"
#include "daemon/service/file_identity.h"
#include "daemon/service/service_manager.h"
#include "daemon/service/store_failures.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;

// Offsets of logs that only made progress (no event, no new outcome) are written this often,
// all in one transaction: after a kill -9 at most this much log is read again (events are unique
// per offset), and 1,000 busy logs cost ~33 row updates a second, not 1,000. (The analyzer's
// state is JSON; at 10 s its writing was a third of the daemon's CPU under that load.)
constexpr auto kCheckpointInterval = std::chrono::seconds(30);

}  // namespace

// --- discovery ---------------------------------------------------------------------------
// --- discovery ---------------------------------------------------------------------------
// The rule a path belongs to: a Slurm job's output file squeue named, or a rule's glob.
std::optional<WatchRule> Daemon::rule_of(const std::string& path) const {
  if (std::optional<WatchRule> slurm = slurm_.rule_of(path)) return slurm;
  if (const WatchRule* rule = rule_for(config_.watch, path)) return *rule;
  return std::nullopt;
}

// Drains inotify as soon as it is readable. Busy logs are polled, not heard (read_scheduler.h),
// so the events that come are few: names, and the first write of a quiet log, which may be the
// OOM line an alert waits for; no batching delay is added to it.
void Daemon::wait_inotify() {
  inotify_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [this](const boost::system::error_code& ec) {
                        if (ec) {
                          if (ec != asio::error::operation_aborted) {
                            log_line(kError, "inotify wait failed: {}", ec.message());
                          }
                          return;
                        }
                        on_changes(watcher_->drain());
                        wait_inotify();
                      });
}

void Daemon::on_changes(const std::vector<FsChange>& changes) {
  std::vector<std::string> written;
  std::vector<std::string> closed;
  std::vector<std::string> folders;
  bool rescan = false;
  for (const FsChange& change : changes) {
    switch (change.kind) {
      case FsChange::kRescan: rescan = true; break;
      case FsChange::kFolderAppeared: folders.push_back(change.path); break;
      case FsChange::kAppeared:
      case FsChange::kVanished:
        if (logs_.find(change.path)) {
          logs_.check_identity(change.path);
        } else if (change.kind == FsChange::kAppeared) {
          if (std::optional<WatchRule> rule = rule_of(change.path))
            logs_.track(change.path, *rule, StartAt::kBeginning);
        }
        break;
      case FsChange::kFileWritten:
        if (Tracked* file = scheduler_.by_watch(change.watch); file && !file->queued) {
          file->queued = true;
          written.push_back(file->path());
        }
        break;
      case FsChange::kFileClosed:
        // A busy log's writers all closed it: a trainer that died, or one that finished.
        if (Tracked* file = scheduler_.by_close_watch(change.watch); file && !file->queued) {
          file->queued = true;
          closed.push_back(file->path());
        }
        break;
    }
  }
  // A later change of the same batch may have let the file go (a write, then its deletion).
  for (const auto* paths : {&written, &closed}) {
    for (const std::string& path : *paths)
      if (Tracked* file = logs_.find(path)) file->queued = false;
  }
  // A rescan may drop files (rotation): read only those still followed.
  if (rescan) {
    discovery_.scan_all();
  } else {
    for (const std::string& folder : folders) discovery_.discover_under(folder);
  }
  const auto now = clock_.now();
  for (const std::string& path : written) {
    Tracked* file = logs_.find(path);
    if (!file) continue;
    // Read now, whatever follows: the first write after a quiet spell is where an OOM shows.
    read(*file);
    scheduler_.written(*file, now);
  }
  for (const std::string& path : closed) {
    if (Tracked* file = logs_.find(path)) read(*file);
  }
}

// --- reads and commits ---------------------------------------------------------------------
// --- reads and commits ---------------------------------------------------------------------
// Reads what the log grew by (bounded per turn), and commits what it produced.
uint64_t Daemon::read(Tracked& file) {
  if (file.awaiting_store) return 0;  // the store's retry reads it
  file.waiting_for_descriptor = false;
  if (!logs_.ensure_open(file)) {
    // Out of descriptors for the moment (every open log busy with an incident or unsaved
    // progress): polled until one of them is idle.
    if (logs_.out_of_descriptors()) {
      file.waiting_for_descriptor = true;
      scheduler_.poll(file);
    }
    return 0;
  }
  file.last_read = clock_.now();
  FileFollower& follower = *file.follower;
  FileFollower::Read read = follower.read(kReadBudgetPerTurn, buffer_.span());
  if (read.rewritten) {
    // Shorter, or other bytes where the last read ended: truncated (copytruncate, perhaps
    // already written past the old offset) or rewritten in place. Read it again from 0.
    log_line(kNotice, "{} was truncated (copytruncate?): reading it again from the start",
             file.path());
    follower.analyzer().settle();
    commit(file, follower.analyzer().take_events(), /*can_rewind=*/false);
    follower.restart();
    file.checked_to = file.polled_to = 0;  // the burst checks' marks were the old content's
    read = follower.read(kReadBudgetPerTurn, buffer_.span());
  }
  if (read.error && !file.read_error_logged) {
    log_line(kWarning, "read {}: {}", file.path(), std::strerror(read.error));
    file.read_error_logged = true;
  }
  if (read.bytes > 0) {
    file.last_growth = file.last_read;
    file.live_dirty = file.grew_here = true;
    arm_live();
  }
  metrics_.bytes_read += read.bytes;
  metrics_.records += follower.take_new_records();
  if (const uint64_t cut = follower.take_new_cut_records()) {
    metrics_.parse_errors["record_too_long"] += cut;
    log_line(kWarning, "{}: a record longer than {} bytes was cut", file.path(),
             parsers::kMaxRecordBytes);
  }
  std::vector<parsers::OomEvent> events = follower.analyzer().take_events();
  if (healer_ && healer_->awaits_step(file.job.name)) {
    if (const auto step = follower.analyzer().training_step())
      healer_->training_step(file.job.name, file.job.run_id, *step, file.path());
  }
  if (!events.empty() || file.storable_outcome() != file.committed_outcome) {
    if (!commit(file, std::move(events), /*can_rewind=*/true)) return read.bytes;
  } else if (read.bytes > 0) {
    file.dirty = true;
    arm_checkpoint();
  }
  if (follower.analyzer().has_open_incident()) {
    file.settle_at = clock_.now() + std::chrono::milliseconds(config_.settle_ms);
    arm_settle();
  }
  if (read.more) {
    asio::post(io_, [this, path = file.path()] {
      if (Tracked* same = logs_.find(path)) this->read(*same);
    });
  }
  return read.bytes;
}

// Offsets move only after the store accepted the events. A log that stays is rewound to its
// last commit and read again once the store answers; the last progress of one going away
// (rotated, truncated, drained) cannot be read again, so the sink keeps it and retries it.
bool Daemon::commit(Tracked& file, std::vector<parsers::OomEvent> events, bool can_rewind) {
  db::Progress progress = progress_of(file, std::move(events));
  if (!sink_.commit(progress)) {
    if (can_rewind) {
      rewind(file);
    } else {
      sink_.keep(std::move(progress));
      arm_store_retry();
    }
    return false;
  }
  committed(file, progress);
  return true;
}

// A store refusal before a log was followed: nothing was read, so a rescan on the store's
// retry picks the log up again.
void Daemon::store_refused(const Error& error) {
  sink_.refused(error);
  if (damage_) return;
  rescan_on_retry_ = true;
  arm_store_retry();
}

db::Progress Daemon::progress_of(Tracked& file, std::vector<parsers::OomEvent> events) {
  FileFollower& follower = *file.follower;
  const Checkpoint checkpoint = follower.checkpoint();
  db::Progress progress;
  progress.file_id = file.file_id;
  progress.job_id = file.job.job_id;
  progress.run_id = file.job.run_id;
  progress.generation = checkpoint.generation;
  progress.offset = checkpoint.offset;
  progress.line = checkpoint.line;
  progress.analyzer_state = checkpoint.analyzer_state;
  progress.anchor = anchor_of(follower.fd(), progress.offset);
  if (!follower.fingerprinted()) {
    // A new file (or a new generation after a truncation) has no head to compare until a KiB
    // exists; the store forgets the old head meanwhile.
    auto head = head_fingerprint(follower.fd());
    progress.fingerprint.emplace(head.value_or(""),
                                 head ? static_cast<int64_t>(kFingerprintBytes) : 0);
  }
  if (const auto outcome = file.storable_outcome()) {
    progress.outcome = std::string(parsers::to_string(*outcome));
  }
  for (const auto& alert : config_.alerts) progress.receivers.push_back(alert.name);
  registry_.note_trainer(file);  // the trainer is known once the log shows it
  progress.events = registry_.triage_events(file, events);
  if (!events.empty()) progress.snapshot_id = file.job.snapshot_id;
  return progress;
}

void Daemon::committed(Tracked& file, const db::Progress& progress) {
  file.dirty = false;
  if (first_scan_marker_pending_) mark_first_scan_done();
  const std::optional<parsers::Outcome> outcome = file.storable_outcome();
  if (healer_ && outcome && (outcome != file.committed_outcome || file.fatal_untold)) {
    file.fatal_untold = false;
    run_changed(file, *outcome);
  }
  file.committed_outcome = outcome;
  file.follower->committed(
      {progress.offset, progress.line, progress.analyzer_state, progress.generation});
  if (progress.fingerprint && progress.fingerprint->second > 0) file.follower->set_fingerprinted();
}

// The healer hears of a run's end once the store holds it.
void Daemon::run_changed(Tracked& file, parsers::Outcome outcome) {
  RunEnded run;
  run.job = file.job.name;
  run.job_id = file.job.job_id;
  run.run_id = file.job.run_id;
  run.outcome = outcome;
  run.fatal = file.fatal_event;
  run.fixes = file.fatal_fixes;
  run.last_saved_step = file.analyzer().last_saved_step();
  run.trainer = std::string(parsers::to_string(file.analyzer().trainer()));
  run.family =
      file.job.config ? std::string(parsers::to_string(file.job.config->family)) : "unknown";
  run.log_path = file.path();
  healer_->run_ended(run);
}

// The marker that makes every later start read present logs from their stored offsets. A
// write the store refuses is tried again at the next commit: left unwritten, the next start
// would be a first start and skip what the logs got while the daemon was down.
void Daemon::mark_first_scan_done() {
  auto marked = store_.set_meta("first_scan_done", std::to_string(clock_.unix_now()));
  first_scan_marker_pending_ = !marked;
  count_store_failure(metrics_, "set_first_scan_done", marked);
}

// The analyzer and the read position go back to the last commit; the store's retry reads on.
void Daemon::rewind(Tracked& file) {
  file.follower->rewind();
  file.dirty = false;
  file.settle_at.reset();
  file.awaiting_store = true;
  arm_store_retry();
}

// Retries with the sink's backoff; never blocks the loop.
void Daemon::arm_store_retry() {
  if (store_retry_armed_) return;
  store_retry_armed_ = true;
  store_retry_timer_->expires_after(sink_.next_retry_delay());
  store_retry_timer_->async_wait([this](const boost::system::error_code& ec) {
    store_retry_armed_ = false;
    if (ec) return;
    if (!sink_.retry_kept()) {
      arm_store_retry();
      return;
    }
    std::vector<Tracked*> waiting;
    for (auto& [path, file] : logs_.by_path()) {
      if (!file->awaiting_store) continue;
      file->awaiting_store = false;
      waiting.push_back(file.get());
    }
    for (Tracked* file : waiting) read(*file);
    if (rescan_on_retry_) {
      rescan_on_retry_ = false;
      discovery_.scan_all();
    }
  });
}

void Daemon::arm_checkpoint() {
  if (checkpoint_armed_) return;
  checkpoint_armed_ = true;
  checkpoint_timer_->expires_after(kCheckpointInterval);
  checkpoint_timer_->async_wait([this](const boost::system::error_code& ec) {
    checkpoint_armed_ = false;
    if (ec) return;
    std::vector<db::Progress> batch;
    std::vector<Tracked*> files;
    for (auto& [path, file] : logs_.by_path()) {
      if (!file->dirty || !file->follower->is_open()) continue;
      batch.push_back(progress_of(*file, {}));
      files.push_back(file.get());
    }
    if (batch.empty()) return;
    if (!sink_.commit(batch)) {
      for (Tracked* file : files) rewind(*file);
      return;
    }
    for (size_t i = 0; i < files.size(); ++i) committed(*files[i], batch[i]);
  });
}

// --- the rescan and settle timers ---------------------------------------------------------
void Daemon::arm_rescan() {
  rescan_timer_->expires_after(std::chrono::seconds(config_.rescan_seconds));
  rescan_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    discovery_.scan_all();
    for (auto& [path, file] : logs_.by_path()) read(*file);
    // Rows made pending from outside (`oomtriage alerts resend`) go out within a rescan.
    if (dispatcher_) dispatcher_->poke();
    write_textfile();
    notify_service_manager(fmt::format("STATUS=watching {} log(s)", logs_.size()));
    arm_rescan();
  });
}

void Daemon::arm_settle() {
  std::optional<Clock::time_point> earliest;
  for (auto& [path, file] : logs_.by_path()) {
    if (file->settle_at && (!earliest || *file->settle_at < *earliest)) earliest = file->settle_at;
  }
  if (!earliest) return;
  settle_timer_->expires_at(*earliest);
  settle_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    const auto now = clock_.now();
    for (auto& [path, file] : logs_.by_path()) {
      if (file->settle_at && *file->settle_at <= now) {
        // While the incident's traceback is still to come, the log must be quiet for longer.
        const auto quiet =
            file->analyzer().quiet_before_settle(std::chrono::milliseconds(config_.settle_ms));
        if (now - file->last_growth < quiet) {
          file->settle_at = file->last_growth + quiet;
          continue;
        }
        file->settle_at.reset();
        file->analyzer().settle();
        commit(*file, file->analyzer().take_events(), /*can_rewind=*/true);
      }
    }
    arm_settle();
  });
}

}  // namespace oomtriage::daemon
