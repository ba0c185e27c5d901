// daemon/service/log_discovery.h
//
// Finding the logs the rules name. A full scan watches each rule's folders (its glob's fixed
// prefix and the folders the glob matches), follows every log the glob matches and Slurm's
// output files, and checks the identity of every followed log (renames, deletes and truncations
// inotify did not report). A folder that appears is looked into alone: a full scan would stat
// and read every followed log, which under 1,000 busy logs delays the alert the new folder may
// be about to need.
#pragma once

#include <string>

#include "daemon/common/daemon_config.h"
#include "daemon/service/directory_watcher.h"
#include "daemon/service/followed_logs.h"
#include "daemon/service/slurm_source.h"

namespace oomtriage::daemon {

class LogDiscovery {
 public:
  // `config` is the daemon's current config (a reload replaces it in place).
  LogDiscovery(const DaemonConfig& config, FollowedLogs& logs, const SlurmSource& slurm,
               const LogHost& host)
      : config_(config), logs_(logs), slurm_(slurm), host_(host) {}

  // Without a watcher (no inotify) nothing is watched: the rescan timer finds what comes.
  void set_watcher(DirectoryWatcher* watcher) { watcher_ = watcher; }

  // At the very first start (`first_start`) present logs are followed from their end: no alerts
  // for old crashes. Otherwise from the stored offset, or their start when new.
  void scan_all(bool first_start = false);
  // A folder appeared (a new job's): it and what below it may hold logs are watched, and the
  // logs already there followed from their start.
  void discover_under(const std::string& folder);

 private:
  void ensure_watch(const std::string& dir);

  const DaemonConfig& config_;
  FollowedLogs& logs_;
  const SlurmSource& slurm_;
  const LogHost& host_;
  DirectoryWatcher* watcher_ = nullptr;
  bool watch_limit_logged_ = false;
};

}  // namespace oomtriage::daemon
