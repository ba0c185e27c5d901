// tests/support/virtual_daemon.h: the daemon's loop (daemon/service/daemon_loop.h) in the test's
// own process on a virtual clock (virtual_clock.h). Files, inotify, the store and the receivers'
// sockets are real; every wait of the loop (settle, storm windows, retries, reload spacing,
// polls) is on virtual time, which moves only when the test runs the loop or passes time. So a
// test asserts "nothing more came" after passing the window, without waiting it out, and a
// retry's spacing is measured on the clock the daemon waited on.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "daemon/common/daemon_config.h"
#include "tests/support/virtual_clock.h"

namespace oomtriage::daemon {
class Daemon;
}
namespace oomtriage::db {
class Store;
}

namespace oomtriage::testing {

class VirtualDaemon {
 public:
  // Starts the loop as `oomtriage daemon --config config` would, its store in `state_dir`; its
  // journal lines go to `err` (stderr_text()).
  VirtualDaemon(const std::filesystem::path& state_dir, const std::filesystem::path& config,
                const std::filesystem::path& err);
  // The same with the config given: `oomtriage watch DIR` is daemon::inline_watch_config({DIR}).
  VirtualDaemon(const std::filesystem::path& state_dir, daemon::DaemonConfig config,
                const std::filesystem::path& err, bool verbose = false);
  ~VirtualDaemon();
  VirtualDaemon(const VirtualDaemon&) = delete;
  VirtualDaemon& operator=(const VirtualDaemon&) = delete;

  // Runs the loop until `done` holds, at most `limit` of real time: what real I/O brought is
  // handled at each turn, then virtual time moves on by `step`, firing the timers due.
  bool run_until(const std::function<bool()>& done,
                 std::chrono::milliseconds limit = std::chrono::seconds(10),
                 std::chrono::milliseconds step = std::chrono::milliseconds(5));
  // `span` of virtual time passes in `step`s; after each, the loop runs until no alert request
  // is in flight (its answer may arm the next wait), so whatever the span would bring has come.
  void pass(std::chrono::milliseconds span,
            std::chrono::milliseconds step = std::chrono::milliseconds(10));
  std::string stderr_text() const;
  VirtualClock& clock() { return clock_; }

 private:
  // stderr goes to a file while it lives (a REQUIRE that fails in the constructor restores it).
  struct StderrTo {
    explicit StderrTo(const std::filesystem::path& file);
    ~StderrTo();
    int saved = -1;
  };
  void start(const std::filesystem::path& state_dir, daemon::DaemonConfig config, bool verbose);
  void turn();

  std::filesystem::path err_;
  StderrTo stderr_to_;
  boost::asio::io_context io_;
  VirtualClock clock_{io_};
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<daemon::Daemon> daemon_;
};

}  // namespace oomtriage::testing
