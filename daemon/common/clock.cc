// daemon/common/clock.cc: std::chrono and strftime; the real LoopClock on Asio's steady timers.
#include "daemon/common/clock.h"

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <ctime>

namespace oomtriage::daemon {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string utc_time(int64_t unix_seconds, const char* format) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[64];
  const size_t n = std::strftime(buffer, sizeof buffer, format, &tm);
  return std::string(buffer, n);
}

namespace {

class AsioTimer final : public LoopTimer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io) {}
  void expires_at(std::chrono::steady_clock::time_point at) override { timer_.expires_at(at); }
  void expires_after(std::chrono::steady_clock::duration after) override {
    timer_.expires_after(after);
  }
  void async_wait(Handler handler) override { timer_.async_wait(std::move(handler)); }
  void cancel() override { timer_.cancel(); }

 private:
  boost::asio::steady_timer timer_;
};

class RealClock final : public LoopClock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::now();
  }
  int64_t unix_now() const override { return daemon::unix_now(); }
  std::unique_ptr<LoopTimer> timer(boost::asio::io_context& io) override {
    return std::make_unique<AsioTimer>(io);
  }
};

}  // namespace

LoopClock& real_clock() {
  static RealClock clock;
  return clock;
}

}  // namespace oomtriage::daemon
