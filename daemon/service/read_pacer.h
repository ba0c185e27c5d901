// daemon/service/read_pacer.h
//
// When to read a log. A quiet log is watched by inotify and read the moment it is written (an
// OOM line in it is stored within milliseconds). A log written again within the interval is
// busy: its watch is dropped and it is polled once per interval instead, one pread per poll,
// so 1,000 logs written ten times a second cost a few thousand reads a second, not ten thousand
// wake-ups. A busy log that stays unchanged for a few polls is quiet again. Time comes in as
// arguments: the pacer never reads a clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace oomtriage::daemon {

using MonoTime = std::chrono::steady_clock::time_point;

// One log's pace, kept with the log.
struct Pace {
  bool busy = false;
  std::optional<MonoTime> last_write;  // the last write inotify reported
  int idle_polls = 0;                  // busy: polls in a row that found nothing new
};

class ReadPacer {
 public:
  explicit ReadPacer(std::chrono::milliseconds interval, int idle_polls_to_quiet = 2)
      : interval_(interval), idle_polls_to_quiet_(idle_polls_to_quiet) {}

  std::chrono::milliseconds interval() const { return interval_; }
  // inotify reported a write at `now` to a quiet log (which is read now). True when the log
  // turns busy: the write came within the interval of the one before.
  bool on_write(Pace& pace, MonoTime now) const;
  // A poll of a busy log read `bytes`. True when the log turns quiet (its watch comes back).
  bool on_poll(Pace& pace, uint64_t bytes) const;

 private:
  std::chrono::milliseconds interval_;
  int idle_polls_to_quiet_;
};

}  // namespace oomtriage::daemon
