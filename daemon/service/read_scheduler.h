// daemon/service/read_scheduler.h
//
// When each followed log is read, on the loop. A quiet log has an inotify watch of its own and is
// read the moment it is written; a log written again within the interval turns busy (read_pacer.h):
// its watch is dropped and it is polled, in slices spread over the interval, so the loop is never
// held by 1,000 reads in a row while a quiet log's OOM line waits. A busy log that stays unchanged
// turns quiet again and gets its watch back. A busy log is still watched for one thing: a close
// of a descriptor written through (IN_CLOSE_WRITE, sent when the last process sharing that
// descriptor lets go of it), which is how a trainer that died of an OOM leaves its log, so a
// fatal crash is read at once whatever the checks below are set to. (A writer that opens and
// closes the log for every line gets a read per line this way, as a quiet log does.) The scheduler
// decides only when: reading (and committing what was read) is the callback's.
//
// A busy log's OOM must not wait for its poll (up to a whole interval): every `burst_check_ms`
// (200) each busy log gets a burst check, a read of at most 4 KiB of what it grew by since the
// last look, batched with the other checks of its slice (batched_pread.h). A progress bar
// redraws with \r and no line end, so a line end among the new bytes is a record completed (a
// traceback, an error, a saved checkpoint) and the log is read at once; 4 KiB gathered unread is
// read too. A log its checks look at is read only then: its poll just notes whether it grew. A
// log whose every check finds a line end writes lines, not redraws: reading it at each check
// would be polling it more often, so after kLineChecks such checks in a row it is left to its
// interval (docs/reliability.md "Busy logs").
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/service/batched_pread.h"
#include "daemon/service/directory_watcher.h"
#include "daemon/service/read_pacer.h"
#include "daemon/service/tracked_log.h"

namespace oomtriage::daemon {

class ReadScheduler {
 public:
  // `read` reads what a log grew by and returns the bytes read.
  using Read = std::function<uint64_t(Tracked&)>;

  // Its polls wait on `clock`.
  ReadScheduler(boost::asio::io_context& io, std::chrono::milliseconds interval, Read read,
                LoopClock& clock = real_clock());
  ReadScheduler(const ReadScheduler&) = delete;
  ReadScheduler& operator=(const ReadScheduler&) = delete;

  // Without a watcher (no inotify) no log is watched or polled: the rescan reads them all.
  void set_watcher(DirectoryWatcher* watcher) { watcher_ = watcher; }
  std::chrono::milliseconds interval() const { return pacer_.interval(); }
  // How often a busy log gets a burst check; 0 turns them off.
  void set_burst_check(std::chrono::milliseconds every) { burst_check_ = every; }

  // A quiet log gets its own watch; out of watches (or its name gone) it is polled instead.
  void watch_quietly(Tracked& file);
  // inotify reported a write to this quiet log at `now`, and it was read: a second write within
  // the interval makes it busy.
  void written(Tracked& file, MonoTime now);
  // Read at the next poll slice: a busy log each interval, another one once (it waits for a
  // descriptor).
  void poll(Tracked& file);
  // The log no longer exists for the loop: no watch, no poll.
  void forget(Tracked& file);
  // The quiet log whose watch is `watch`, or null.
  Tracked* by_watch(int watch) const;
  // The busy log whose close watch is `watch`, or null.
  Tracked* by_close_watch(int watch) const;
  size_t busy_count() const { return busy_.size(); }

 private:
  void unwatch(Tracked& file);
  void watch_closes(Tracked& file);
  void unwatch_closes(Tracked& file);
  void arm_polls();
  void poll_slice();
  std::chrono::milliseconds slice() const;  // the poll timer's period
  bool checked(const Tracked& file) const;
  static uint64_t grown_since_poll(const Tracked& file);
  // The burst checks of the busy logs `due`: those to be read now are added to `bursting`.
  void check_bursts(std::span<Tracked* const> due, std::vector<Tracked*>& bursting);

  ReadPacer pacer_;
  Read read_;
  DirectoryWatcher* watcher_ = nullptr;
  std::unique_ptr<LoopTimer> poll_timer_;
  bool polls_armed_ = false;
  size_t poll_cursor_ = 0;   // the next busy log to poll
  size_t check_cursor_ = 0;  // the next busy log to check for a burst
  std::chrono::milliseconds burst_check_{0};
  double checks_owed_ = 0;      // burst checks due but not yet made (a fraction of a log per slice)
  std::vector<Tracked*> busy_;  // polled once per interval
  std::unordered_map<int, Tracked*> by_watch_;        // quiet logs, by their watch descriptor
  std::unordered_map<int, Tracked*> by_close_watch_;  // busy logs, by their close watch
  bool file_watch_failed_logged_ = false;
  std::optional<BatchedPread> check_reads_;  // made at the first check
  std::vector<char> check_buffers_;          // one check's bytes per batch slot
};

}  // namespace oomtriage::daemon
