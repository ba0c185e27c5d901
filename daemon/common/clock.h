// daemon/common/clock.h: time for the daemon. Wall-clock seconds and their UTC text for the
// store, alerts and reports (unix_now(), utc_time()), and the seam the daemon's loop takes its
// time from (LoopClock, after leveldb's Env): the steady clock it measures waits with, Unix
// seconds, and the timers it arms on its io_context. real_clock() reads std::chrono and arms
// Asio's steady timers; tests pass a virtual clock (tests/support/virtual_clock.h) that moves
// only when the test says so, so a test asserts "nothing more came" past a window without
// waiting the window out.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}
namespace boost::system {
class error_code;
}

namespace oomtriage::daemon {

int64_t unix_now();
// strftime in UTC: "%Y-%m-%dT%H:%M:%SZ" (RFC 3339, alerts) or "%Y-%m-%d %H:%M:%SZ" (reports).
std::string utc_time(int64_t unix_seconds, const char* format = "%Y-%m-%dT%H:%M:%SZ");

// One timer on the loop, as Asio's steady_timer is: one wait at a time, its handler posted to
// the loop when the expiry comes (success) or when the wait is cancelled or the expiry moved
// (operation_aborted). A timer destroyed with a wait pending drops its handler uncalled.
class LoopTimer {
 public:
  using Handler = std::function<void(const boost::system::error_code&)>;
  virtual ~LoopTimer() = default;
  virtual void expires_at(std::chrono::steady_clock::time_point at) = 0;
  virtual void expires_after(std::chrono::steady_clock::duration after) = 0;
  virtual void async_wait(Handler handler) = 0;
  virtual void cancel() = 0;
};

class LoopClock {
 public:
  virtual ~LoopClock() = default;
  // Steady time: what every wait, window and backoff of the loop is measured in.
  virtual std::chrono::steady_clock::time_point now() const = 0;
  // Unix seconds: the store's timestamps and the alerts' times.
  virtual int64_t unix_now() const = 0;
  // A timer whose handlers run on `io`.
  virtual std::unique_ptr<LoopTimer> timer(boost::asio::io_context& io) = 0;
};

// std::chrono's steady and system clocks and Asio's steady timers: the daemon's own.
LoopClock& real_clock();

}  // namespace oomtriage::daemon
