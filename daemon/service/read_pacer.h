// daemon/service/read_pacer.h
//
// When to read a log that inotify says changed. Each log has a token bucket: a quiet log is read
// at once, a burst of a few writes too, and a busy log settles to one read per interval; a read
// that must wait is due on a 100 ms grid, so one timer wake-up serves many logs. Each read costs
// a few system calls, so this is what keeps 1,000 busy logs cheap. Time comes in as arguments:
// the pacer never reads a clock.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oomtriage::daemon {

using MonoTime = std::chrono::steady_clock::time_point;

class ReadPacer {
 public:
  explicit ReadPacer(std::chrono::milliseconds interval, double burst = 4.0)
      : interval_(interval), burst_(burst) {}

  // `path` changed at `now`: true means read it now; false means a read is due later (see
  // next_due() and take_due()).
  bool admit(const std::string& path, MonoTime now);
  // A read happened at `now`, whoever asked for it.
  void note_read(const std::string& path, MonoTime now);
  // Reads `path` again at `at` (after a failed open, say); once per path until it is taken.
  void schedule(const std::string& path, MonoTime at);
  std::optional<MonoTime> next_due() const;
  // The paths due at `now`, in due order; each leaves the schedule.
  std::vector<std::string> take_due(MonoTime now);
  // The log is no longer followed.
  void forget(const std::string& path);

 private:
  struct Bucket {
    double tokens = 0;
    std::optional<MonoTime> refilled_at;
    MonoTime last_read{};
    bool scheduled = false;
  };

  std::chrono::milliseconds interval_;
  double burst_;
  std::map<std::string, Bucket> buckets_;
  std::multimap<MonoTime, std::string> due_;
};

}  // namespace oomtriage::daemon
