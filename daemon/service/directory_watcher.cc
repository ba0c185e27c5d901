// daemon/service/directory_watcher.cc: inotify(7), glob(3) and fnmatch(3).
#include "daemon/service/directory_watcher.h"

#include <fnmatch.h>
#include <glob.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace oomtriage::daemon {

Result<DirectoryWatcher> DirectoryWatcher::open() {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::kIo, std::string("inotify: ") + std::strerror(errno));
  return DirectoryWatcher(fd);
}

DirectoryWatcher::DirectoryWatcher(DirectoryWatcher&& other) noexcept
    : fd_(other.fd_),
      watches_(std::move(other.watches_)),
      dirs_(std::move(other.dirs_)),
      file_watches_(std::move(other.file_watches_)) {
  other.fd_ = -1;
}

DirectoryWatcher::~DirectoryWatcher() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Ok> DirectoryWatcher::watch(const std::string& dir) {
  if (dirs_.count(dir)) return Ok{};
  const uint32_t mask =
      IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_ONLYDIR;
  auto wd = add_watch(dir, mask);
  if (!wd) return wd.error();
  watches_[*wd] = dir;
  dirs_.insert(dir);
  return Ok{};
}

Result<int> DirectoryWatcher::watch_file(const std::string& path, bool closes_only) {
  auto wd = add_watch(path, closes_only ? IN_CLOSE_WRITE : IN_MODIFY);
  if (wd) file_watches_.insert(*wd);
  return wd;
}

// The watch limit (ENOSPC) is an environment limit (kIo); anything else is about the path.
Result<int> DirectoryWatcher::add_watch(const std::string& path, uint32_t mask) {
  const int wd = ::inotify_add_watch(fd_, path.c_str(), mask);
  if (wd >= 0) return wd;
  const int error = errno;
  if (error == ENOSPC) return make_error(ErrorCode::kIo, "inotify watch limit reached at " + path);
  return make_error(ErrorCode::kNotFound, "cannot watch " + path + ": " + std::strerror(error));
}

void DirectoryWatcher::unwatch_file(int watch) {
  if (file_watches_.erase(watch)) ::inotify_rm_watch(fd_, watch);
}

std::vector<FsChange> DirectoryWatcher::drain() {
  std::vector<FsChange> changes;
  for (int round = 0; round < 64; ++round) {
    const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
    if (n <= 0) break;  // EAGAIN: drained
    translate(static_cast<size_t>(n), changes);
  }
  return changes;
}

void DirectoryWatcher::translate(size_t bytes, std::vector<FsChange>& changes) {
  for (size_t at = 0; at + sizeof(inotify_event) <= bytes;) {
    const auto* event = reinterpret_cast<const inotify_event*>(buffer_.data() + at);
    at += sizeof(inotify_event) + event->len;
    if (event->mask & IN_Q_OVERFLOW) {
      changes.push_back({FsChange::kRescan, ""});
      continue;
    }
    if (file_watches_.count(event->wd)) {
      if (event->mask & IN_IGNORED) {
        file_watches_.erase(event->wd);  // the file is gone for good
      } else if (event->mask & IN_MODIFY) {
        changes.push_back({FsChange::kFileWritten, "", event->wd});
      } else if (event->mask & IN_CLOSE_WRITE) {
        changes.push_back({FsChange::kFileClosed, "", event->wd});
      }
      continue;
    }
    auto dir = watches_.find(event->wd);
    if (dir == watches_.end()) continue;
    if (event->mask & (IN_IGNORED | IN_DELETE_SELF)) {
      dirs_.erase(dir->second);
      if (event->mask & IN_IGNORED) watches_.erase(dir);
      changes.push_back({FsChange::kRescan, ""});
      continue;
    }
    std::string path = dir->second + '/' + (event->len > 0 ? event->name : "");
    if (event->mask & IN_ISDIR) {
      // A new job folder is looked into alone; one that went away may have taken followed logs.
      if (event->mask & (IN_CREATE | IN_MOVED_TO)) {
        changes.push_back({FsChange::kFolderAppeared, std::move(path)});
      } else {
        changes.push_back({FsChange::kRescan, ""});
      }
      continue;
    }
    if (event->mask & (IN_CREATE | IN_MOVED_TO)) {
      changes.push_back({FsChange::kAppeared, std::move(path)});
    } else if (event->mask & (IN_DELETE | IN_MOVED_FROM)) {
      changes.push_back({FsChange::kVanished, std::move(path)});
    }
  }
}

std::vector<std::string> glob_paths(const std::string& pattern, bool only_dirs) {
  glob_t g{};
  std::vector<std::string> paths;
  if (::glob(pattern.c_str(), only_dirs ? GLOB_ONLYDIR : 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  return paths;
}

std::string static_prefix(const std::string& pattern) {
  const size_t wildcard = pattern.find_first_of("*?[");
  const std::string head = wildcard == std::string::npos ? pattern : pattern.substr(0, wildcard);
  const size_t slash = head.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : head.substr(0, slash));
}

const WatchRule* rule_for(const std::vector<WatchRule>& rules, const std::string& path) {
  for (const WatchRule& rule : rules) {
    if (::fnmatch(rule.logs.c_str(), path.c_str(), FNM_PATHNAME) == 0) return &rule;
  }
  return nullptr;
}

bool may_hold_logs(const std::vector<WatchRule>& rules, const std::string& dir) {
  const auto parts_of = [](const std::filesystem::path& path) {
    std::vector<std::string> parts;
    for (const auto& part : path) {
      if (const std::string text = part.string(); !text.empty() && text != "/")
        parts.push_back(text);
    }
    return parts;
  };
  const std::vector<std::string> folders = parts_of(dir);
  for (const WatchRule& rule : rules) {
    if (rule.source == "slurm") continue;
    const std::vector<std::string> pattern =
        parts_of(std::filesystem::path(rule.logs).parent_path());
    if (folders.size() > pattern.size()) continue;
    bool match = true;
    for (size_t i = 0; i < folders.size() && match; ++i) {
      match = ::fnmatch(pattern[i].c_str(), folders[i].c_str(), 0) == 0;
    }
    if (match) return true;
  }
  return false;
}

}  // namespace oomtriage::daemon
