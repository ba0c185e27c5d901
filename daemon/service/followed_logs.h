// daemon/service/followed_logs.h
//
// The set of followed logs and each one's life: tracked when a rule's glob matches it (resumed
// from the store's offset when the bytes before it are the same, else read from its start or, at
// the very first start, from its end); checked by identity when its name changes (rotated,
// deleted, truncated, replaced); a log whose name went away is "leaving": read on while its
// writer may still write to it (kLeavingQuiet), then finished and marked in the store. A log
// rotated while the daemon was down is found by its inode and drained at the next start.
//
// Descriptors are a budget (service_manager.h): the least recently read idle log is closed to
// open another, and reopened by its path, or found where rotated logs go, when it is read again.
// The budget is a hard cap: when every open log is busy, a log waits for a descriptor (polled,
// or tracked a moment later) rather than take the reserve the store and the alerts live on.
//
// Reading and committing belong to the loop (daemon.cc), which the set asks through LogHost.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/common/metrics.h"
#include "daemon/common/read_buffer.h"
#include "daemon/service/job_registry.h"
#include "daemon/service/read_scheduler.h"
#include "daemon/service/tracked_log.h"
#include "db/store.h"

namespace oomtriage::daemon {

// What the followed logs ask of the loop that reads and commits them.
class LogHost {
 public:
  virtual ~LogHost() = default;
  // Reads what the log grew by and commits what that produced; returns the bytes read.
  virtual uint64_t read(Tracked& file) = 0;
  // Commits `events` with the log's progress. False when the store refused: a log that stays is
  // rewound (`can_rewind`); the last progress of one going away is kept and retried.
  virtual bool commit(Tracked& file, std::vector<parsers::OomEvent> events, bool can_rewind) = 0;
  // The store refused to register a log: nothing was read, a rescan after the retry finds it.
  virtual void store_refused(const Error& error) = 0;
  // The rule a path belongs to now, if any.
  virtual std::optional<WatchRule> rule_of(const std::string& path) const = 0;
};

class FollowedLogs {
 public:
  using ByPath = std::map<std::string, std::unique_ptr<Tracked>>;

  // `wall_clock` gives Unix seconds (the store's timestamps); `settle` is how long a leaving
  // log's open incident waits for more of its traceback; leaving logs wait on `clock`.
  FollowedLogs(boost::asio::io_context& io, db::Store& store, JobRegistry& registry,
               ReadScheduler& scheduler, Metrics& metrics, ReadBuffer& buffer, LogHost& host,
               std::function<int64_t()> wall_clock, bool verbose, LoopClock& clock = real_clock());
  FollowedLogs(const FollowedLogs&) = delete;
  FollowedLogs& operator=(const FollowedLogs&) = delete;

  void set_settle(std::chrono::milliseconds settle) { settle_ = settle; }
  // After a store recovery: logs the store no longer knows are read from their start, and what
  // every log holds at this start is marked as possibly alerted before (Tracked::resend_below):
  // a log it knows may be read from an offset behind what was alerted (a store kept in place
  // behind its commits), or give an open incident's event again whose row was lost.
  void set_recovering(bool recovering) { recovering_ = recovering; }
  void set_descriptor_budget(size_t max_open) { max_open_ = max_open; }

  // The logs followed by their path.
  ByPath& by_path() { return files_; }
  Tracked* find(const std::string& path);
  size_t size() const { return files_.size(); }

  // Follows `path` under `rule` (once); reads what it holds from `start`.
  void track(const std::string& path, const WatchRule& rule, StartAt start);
  // The path may now be another file or nothing: the old file leaves, a new one is tracked.
  void check_identity(const std::string& path);
  // The logs followed at the last stop that are not where they were: drained and finished.
  void drain_rotated_while_down();
  // Reads every log to its end and commits (a leaving log stays active in the store, so a
  // restart finds it by its inode and reads on).
  void drain_all();
  // Lets go of the logs `changed` picks (a reload changed their rule): each is read to its end
  // and committed, then no longer followed; a rescan tracks it again from the stored offset.
  void let_go_if(const std::function<bool(const Tracked&)>& changed);

  // Opens a log closed for the budget. False when it cannot be now; out_of_descriptors() says
  // whether that was for want of a descriptor (every open log busy).
  bool ensure_open(Tracked& file);
  bool out_of_descriptors() const { return open_hit_limit_; }

 private:
  void drain(Tracked& file);
  void finish(Tracked& file, const char* state);
  std::optional<Checkpoint> take_over_rotated(const std::string& path);
  void arm_leaving();
  void leaving_turn();
  size_t open_logs() const;
  int open_within_budget(const std::string& path, const Tracked* keep);
  bool make_room(const Tracked* keep);
  void wait_for_descriptor(const std::string& path, StartAt start);

  db::Store& store_;
  JobRegistry& registry_;
  ReadScheduler& scheduler_;
  Metrics& metrics_;
  ReadBuffer& buffer_;
  LogHost& host_;
  std::function<int64_t()> wall_clock_;
  bool verbose_;
  bool recovering_ = false;
  std::chrono::milliseconds settle_{25};
  ByPath files_;
  std::vector<std::unique_ptr<Tracked>> leaving_;  // no longer named by their path
  LoopClock& clock_;
  std::unique_ptr<LoopTimer> leaving_timer_;
  bool leaving_armed_ = false;
  std::set<std::string> unreadable_logged_;
  size_t max_open_ = 4096;       // log descriptors open at once
  bool open_hit_limit_ = false;  // the last reopen failed for want of descriptors
  bool fd_limit_logged_ = false;
  // New logs found while every descriptor was busy: tracked again each kDescriptorRetry.
  std::map<std::string, StartAt> waiting_for_descriptor_;
  std::unique_ptr<LoopTimer> waiting_timer_;
  bool waiting_armed_ = false;
};

}  // namespace oomtriage::daemon
