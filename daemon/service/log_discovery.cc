// daemon/service/log_discovery.cc: full scans and new folders.
#include "daemon/service/log_discovery.h"

#include <filesystem>
#include <vector>

#include "daemon/common/journal_log.h"

namespace oomtriage::daemon {

namespace fs = std::filesystem;

void LogDiscovery::scan_all(bool first_start) {
  for (const auto& [path, rule] : slurm_.paths()) {
    ensure_watch(fs::path(path).parent_path().string());
    logs_.track(path, rule, StartAt::kStored);
  }
  for (const WatchRule& rule : config_.watch) {
    if (rule.source == "slurm") continue;  // its files come from squeue
    ensure_watch(static_prefix(rule.logs));
    for (const std::string& dir : glob_paths(fs::path(rule.logs).parent_path().string(), true)) {
      ensure_watch(dir);
    }
    for (const std::string& path : glob_paths(rule.logs, false)) {
      logs_.track(path, rule, first_start ? StartAt::kEnd : StartAt::kStored);
    }
  }
  std::vector<std::string> paths;
  for (const auto& [path, file] : logs_.by_path()) paths.push_back(path);
  for (const std::string& path : paths) logs_.check_identity(path);
}

void LogDiscovery::discover_under(const std::string& folder) {
  constexpr size_t kMaxFolders = 256;  // more than a job's tree: the full scan does the rest
  std::vector<std::string> pending = {folder};
  size_t looked = 0;
  while (!pending.empty()) {
    if (++looked > kMaxFolders) {
      scan_all();
      return;
    }
    const std::string dir = std::move(pending.back());
    pending.pop_back();
    if (!may_hold_logs(config_.watch, dir)) continue;
    ensure_watch(dir);
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string path = it->path().string();
      std::error_code type_ec;
      if (it->is_directory(type_ec)) {
        pending.push_back(path);
      } else if (!logs_.find(path)) {
        if (std::optional<WatchRule> rule = host_.rule_of(path))
          logs_.track(path, *rule, StartAt::kBeginning);
      }
    }
  }
}

void LogDiscovery::ensure_watch(const std::string& dir) {
  if (!watcher_ || watcher_->watching(dir)) return;
  auto watched = watcher_->watch(dir);
  if (!watched && watched.error().code == ErrorCode::kIo && !watch_limit_logged_) {
    log_line(kWarning, "{}: those files are polled every {} s", watched.error().message,
             config_.rescan_seconds);
    watch_limit_logged_ = true;
  }
}

}  // namespace oomtriage::daemon
