// daemon/service/service_manager.h
//
// What the daemon owes its host: one instance per state folder (flock on STATE_DIR/oomtriage.lock,
// held for the process's life, so a second daemon is refused instead of posting every alert
// twice), systemd's notify protocol (READY, STATUS, RELOADING, STOPPING, watchdog pings), and
// descriptors: the soft limit is lifted to the hard one, and logs get what is left after a
// reserve for the store, inotify, sockets and config reads.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "parsers/result.h"

namespace oomtriage::daemon {

class InstanceLock {
 public:
  // Locks `state_dir`/oomtriage.lock and writes this pid into it. When another process holds it,
  // the error names that process's pid and the folder.
  static Result<InstanceLock> acquire(const std::string& state_dir);
  InstanceLock(InstanceLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  InstanceLock& operator=(InstanceLock&&) = delete;
  ~InstanceLock();

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// sd_notify(3); a no-op outside systemd.
void notify_service_manager(const std::string& state);
// Half the WatchdogSec= systemd set, or nullopt when it set none.
std::optional<std::chrono::microseconds> watchdog_ping_interval();

// Raises RLIMIT_NOFILE's soft limit to its hard limit (systemd: 1024 -> 524288).
void lift_descriptor_limit();
// How many descriptors logs may hold: the soft limit (0: unlimited) minus those already open and
// a reserve (64, or a quarter of a small limit); never fewer than 8.
size_t log_descriptor_budget(size_t soft_limit, size_t already_open);
// The budget for this process now.
size_t log_descriptor_budget();

}  // namespace oomtriage::daemon
