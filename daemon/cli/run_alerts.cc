// daemon/cli/run_alerts.cc: the alert thread, the verdict, and the bounded wait at the end.
#include "daemon/cli/run_alerts.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <fmt/format.h>

#include <chrono>
#include <future>

#include "daemon/alerts/alert_dispatcher.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;

// How long `run` waits at its end for the outbox to empty.
constexpr auto kDrainLimit = std::chrono::seconds(10);

void say(const std::string& message) { fmt::print(stderr, "oomtriage run: {}\n", message); }

}  // namespace

RunAlerts::RunAlerts(DaemonConfig config, const std::string& store_path)
    : config_(std::move(config)) {
  if (config_.alerts.empty()) return;
  auto store = db::Store::open(store_path);
  if (!store) {
    say("alerts are off: " + store.error().message);
    return;
  }
  store_ = std::move(*store);
  dispatcher_ = std::make_unique<AlertDispatcher>(io_, *store_, config_);
  if (auto started = dispatcher_->start(); !started) {
    say("alerts are off: " + started.error().message);
    dispatcher_.reset();
    return;
  }
  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
}

RunAlerts::~RunAlerts() {
  if (!thread_.joinable()) return;
  wait_for_outbox();
  asio::post(io_, [this] { dispatcher_->retire([this] { io_.stop(); }); });
  work_.reset();
  thread_.join();
}

std::vector<std::string> RunAlerts::receivers() const {
  std::vector<std::string> names;
  if (!dispatcher_) return names;
  for (const Receiver& receiver : config_.alerts) names.push_back(receiver.name);
  return names;
}

void RunAlerts::poke() {
  if (thread_.joinable()) asio::post(io_, [this] { dispatcher_->poke(); });
}

void RunAlerts::send_verdict(AlertContent verdict) {
  if (!thread_.joinable()) return;
  asio::post(io_, [this, verdict = std::move(verdict)] { dispatcher_->send_once(verdict); });
}

// Checks on the alert thread every 50 ms until nothing is pending or in flight, or the limit.
void RunAlerts::wait_for_outbox() {
  std::promise<void> drained;
  const auto deadline = std::chrono::steady_clock::now() + kDrainLimit;
  auto timer = std::make_shared<asio::steady_timer>(io_);
  std::function<void()> check;
  check = [&, timer] {
    const auto pending = store_->count_alerts("pending");
    const bool idle = pending && *pending == 0 && !dispatcher_->in_flight();
    if (idle || std::chrono::steady_clock::now() >= deadline) {
      drained.set_value();
      return;
    }
    timer->expires_after(std::chrono::milliseconds(50));
    timer->async_wait([&](const boost::system::error_code&) { check(); });
  };
  asio::post(io_, [&] { check(); });
  drained.get_future().wait();
}

}  // namespace oomtriage::daemon
