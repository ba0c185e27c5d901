// daemon/service/directory_watcher.h
//
// Which paths the rules follow and what inotify says about them. A log created, renamed or
// deleted is seen by the folder it lives in; a log's writes by its own watch, which the daemon
// drops while the log is busy (it polls it then). The watcher turns the kernel's events into a
// short list of changes: a log was written, a name appeared or went away, or "scan again" (the
// queue overflowed, a folder came or went).
// Without inotify (or past its watch limit) the daemon's rescan timer does the work alone.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_set>
#include <string>
#include <vector>

#include "daemon/common/daemon_config.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

struct FsChange {
  enum Kind {
    kFileWritten,     // IN_MODIFY on a watched log (see watch_file)
    kFileClosed,      // IN_CLOSE_WRITE on a log watched for closes only
    kAppeared,        // IN_CREATE, IN_MOVED_TO
    kVanished,        // IN_DELETE, IN_MOVED_FROM
    kFolderAppeared,  // IN_CREATE, IN_MOVED_TO of a folder (a new job's)
    kRescan,          // overflow, a folder deleted, moved away or unwatched
  } kind;
  std::string path;  // kAppeared, kVanished, kFolderAppeared
  int watch = -1;    // kFileWritten, kFileClosed: the log's watch descriptor
};

class DirectoryWatcher {
 public:
  // An inotify instance (non-blocking, close-on-exec); an error when the kernel refuses one.
  static Result<DirectoryWatcher> open();
  DirectoryWatcher(DirectoryWatcher&& other) noexcept;
  DirectoryWatcher& operator=(DirectoryWatcher&&) = delete;
  ~DirectoryWatcher();

  int fd() const { return fd_; }
  // Watches `dir` (once). An error when the kernel refuses it; ENOSPC (the watch limit) says so.
  Result<Ok> watch(const std::string& dir);
  bool watching(const std::string& dir) const { return dirs_.count(dir) > 0; }
  // Watches the file `path` names now for writes (the watch stays with that file when it is
  // renamed, and needs no descriptor, so a log closed for the descriptor budget is still heard)
  // and returns the watch descriptor its kFileWritten changes carry. Folders are watched for
  // names only: a log's writes come from its own watch, so a busy log can stop them.
  // `closes_only` watches it for closes of descriptors written through instead (kFileClosed): a
  // busy log's trainer that died closes it, a redraw does not. One file has one watch: unwatch the
  // other kind first.
  Result<int> watch_file(const std::string& path, bool closes_only = false);
  void unwatch_file(int watch);
  // Reads what the kernel queued (never blocks) and returns it in order.
  std::vector<FsChange> drain();

 private:
  explicit DirectoryWatcher(int fd) : fd_(fd) {}
  void translate(size_t bytes, std::vector<FsChange>& changes);
  Result<int> add_watch(const std::string& path, uint32_t mask);

  int fd_ = -1;
  std::map<int, std::string> watches_;  // watch descriptor -> folder
  std::set<std::string> dirs_;
  std::unordered_set<int> file_watches_;
  std::array<char, 64 * 1024> buffer_{};
};

// The paths a glob matches now (files, or folders only).
std::vector<std::string> glob_paths(const std::string& pattern, bool only_dirs);
// The leading folders of a glob that hold no wildcard: "/srv/out/*/log.txt" -> "/srv/out".
std::string static_prefix(const std::string& pattern);
// The first rule whose glob matches `path`, or null.
const WatchRule* rule_for(const std::vector<WatchRule>& rules, const std::string& path);
// Whether a rule's logs may sit in `dir` or below it: its folders match the first folders of a
// rule's pattern (/out/*/*/log.txt: /out/a and /out/a/b, not /out/a/b/c). Slurm rules name no
// folders (squeue does).
bool may_hold_logs(const std::vector<WatchRule>& rules, const std::string& dir);

}  // namespace oomtriage::daemon
