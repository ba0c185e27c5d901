// tests/support/virtual_daemon.cc: the in-process daemon's start, its turns and stderr.
#include "tests/support/virtual_daemon.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "daemon/common/daemon_config.h"
#include "daemon/service/daemon_loop.h"
#include "db/store.h"

namespace oomtriage::testing {

VirtualDaemon::VirtualDaemon(const std::filesystem::path& state_dir,
                             const std::filesystem::path& config, const std::filesystem::path& err)
    : err_(err), stderr_to_(err) {
  auto loaded = daemon::load_daemon_config(config.string());
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().message));
  start(state_dir, std::move(*loaded), /*verbose=*/false);
}

VirtualDaemon::VirtualDaemon(const std::filesystem::path& state_dir, daemon::DaemonConfig config,
                             const std::filesystem::path& err, bool verbose)
    : err_(err), stderr_to_(err) {
  start(state_dir, std::move(config), verbose);
}

// The loop's journal lines (daemon/common/journal_log.h) go to stderr: to `file` meanwhile.
VirtualDaemon::StderrTo::StderrTo(const std::filesystem::path& file) {
  std::fflush(stderr);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
}

VirtualDaemon::StderrTo::~StderrTo() {
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
}

void VirtualDaemon::start(const std::filesystem::path& state_dir, daemon::DaemonConfig config,
                          bool verbose) {
  std::filesystem::create_directories(state_dir);
  const std::string store_path = (state_dir / "oomtriage.db").string();
  auto store = db::Store::open(store_path, 250);
  REQUIRE_MESSAGE(store, (store ? "" : store.error().message));
  store_ = std::move(*store);
  daemon_ = std::make_unique<daemon::Daemon>(io_, clock_, *store_, store_path, std::move(config),
                                             verbose, daemon::unknown_card_size());
  REQUIRE(daemon_->start());
}

VirtualDaemon::~VirtualDaemon() {
  daemon_.reset();  // before the store it writes to
  store_.reset();
}

void VirtualDaemon::turn() {
  io_.restart();
  io_.run_for(std::chrono::milliseconds(1));
}

bool VirtualDaemon::run_until(const std::function<bool()>& done, std::chrono::milliseconds limit,
                              std::chrono::milliseconds step) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    turn();
    if (done()) return true;
    clock_.advance(step);
  }
  return done();
}

void VirtualDaemon::pass(std::chrono::milliseconds span, std::chrono::milliseconds step) {
  for (std::chrono::milliseconds passed{0}; passed < span; passed += step) {
    clock_.advance(step);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      turn();
    } while (daemon_->alerts_in_flight() && std::chrono::steady_clock::now() < deadline);
  }
}

std::string VirtualDaemon::stderr_text() const {
  std::fflush(stderr);
  std::ifstream in(err_);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace oomtriage::testing
