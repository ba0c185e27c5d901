// tests/support/virtual_clock.h: a LoopClock (daemon/common/clock.h) whose time moves only when
// the test advances it. advance() fires the timers that fall due on the way in the order of their
// deadlines, each at its own deadline's time, and runs what its handler posts before the next,
// so a chain of waits (a retry after a retry, a storm window then a send) unfolds as it would in
// real time. Real I/O (inotify, sockets) still runs when the test runs the io_context.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>

#include "daemon/common/clock.h"

namespace oomtriage::testing {

class VirtualClock final : public daemon::LoopClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // Handlers run on `io`, which advance() polls; time starts at the real clock's now.
  explicit VirtualClock(boost::asio::io_context& io);
  ~VirtualClock() override;

  time_point now() const override { return now_; }
  int64_t unix_now() const override;
  std::unique_ptr<daemon::LoopTimer> timer(boost::asio::io_context& io) override;

  // Moves time forward by `step`, firing every timer due on the way, in order.
  void advance(std::chrono::steady_clock::duration step);
  // The earliest expiry a wait is pending on, if any.
  std::optional<time_point> next_due() const;

 private:
  class Timer;
  friend class Timer;
  Timer* earliest_due(time_point until) const;
  void run_posted();

  boost::asio::io_context& io_;
  time_point start_;
  int64_t unix_start_;
  time_point now_;
  uint64_t waits_ = 0;  // orders waits on one deadline as they were armed
  std::set<Timer*> timers_;
};

}  // namespace oomtriage::testing
