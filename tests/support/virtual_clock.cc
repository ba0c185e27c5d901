// tests/support/virtual_clock.cc: the virtual clock's timers and advance().
#include "tests/support/virtual_clock.h"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

namespace oomtriage::testing {

class VirtualClock::Timer final : public daemon::LoopTimer {
 public:
  Timer(VirtualClock& clock, boost::asio::io_context& io) : clock_(clock), io_(io) {
    clock_.timers_.insert(this);
  }
  ~Timer() override { clock_.timers_.erase(this); }

  void expires_at(time_point at) override {
    abort_wait();
    at_ = at;
  }
  void expires_after(std::chrono::steady_clock::duration after) override {
    expires_at(clock_.now_ + after);
  }
  void async_wait(Handler handler) override {
    abort_wait();  // one wait at a time: the daemon's timers never hold two
    handler_ = std::move(handler);
    order_ = ++clock_.waits_;
    // Already due, as Asio's timer: it completes at once, not at the next advance().
    if (at_ <= clock_.now_) fire(boost::system::error_code());
  }
  void cancel() override { abort_wait(); }

  bool waiting() const { return handler_ != nullptr; }
  time_point at() const { return at_; }
  uint64_t order() const { return order_; }
  void fire(const boost::system::error_code& ec) {
    boost::asio::post(io_, [handler = std::move(handler_), ec] { handler(ec); });
    handler_ = nullptr;
  }

 private:
  void abort_wait() {
    if (handler_) fire(boost::asio::error::operation_aborted);
  }

  VirtualClock& clock_;
  boost::asio::io_context& io_;
  time_point at_{};
  Handler handler_;
  uint64_t order_ = 0;
};

VirtualClock::VirtualClock(boost::asio::io_context& io)
    : io_(io),
      start_(std::chrono::steady_clock::now()),
      unix_start_(daemon::unix_now()),
      now_(start_) {}

VirtualClock::~VirtualClock() = default;

int64_t VirtualClock::unix_now() const {
  return unix_start_ + std::chrono::duration_cast<std::chrono::seconds>(now_ - start_).count();
}

std::unique_ptr<daemon::LoopTimer> VirtualClock::timer(boost::asio::io_context& io) {
  return std::make_unique<Timer>(*this, io);
}

VirtualClock::Timer* VirtualClock::earliest_due(time_point until) const {
  Timer* earliest = nullptr;
  for (Timer* timer : timers_) {
    if (!timer->waiting() || timer->at() > until) continue;
    if (!earliest || timer->at() < earliest->at() ||
        (timer->at() == earliest->at() && timer->order() < earliest->order())) {
      earliest = timer;
    }
  }
  return earliest;
}

std::optional<VirtualClock::time_point> VirtualClock::next_due() const {
  Timer* earliest = earliest_due(time_point::max());
  if (!earliest) return std::nullopt;
  return earliest->at();
}

void VirtualClock::run_posted() {
  io_.restart();
  io_.poll();
}

void VirtualClock::advance(std::chrono::steady_clock::duration step) {
  const time_point until = now_ + step;
  run_posted();
  while (Timer* due = earliest_due(until)) {
    if (due->at() > now_) now_ = due->at();
    due->fire(boost::system::error_code());
    run_posted();
  }
  now_ = until;
  run_posted();
}

}  // namespace oomtriage::testing
