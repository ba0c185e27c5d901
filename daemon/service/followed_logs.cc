// daemon/service/followed_logs.cc: tracking a log, its identity checks and rotation, leaving logs
// read to their end, and the descriptor budget.
#include "daemon/service/followed_logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "daemon/common/journal_log.h"
#include "daemon/service/file_identity.h"
#include "daemon/service/store_failures.h"

namespace oomtriage::daemon {

namespace fs = std::filesystem;

namespace {
// A log whose name went away (rotated, or deleted while its writer still has it open) is read
// on until it has been quiet this long: a writer that has not reopened its log yet still writes
// to the old file (Fluent Bit's Rotate_Wait, Filebeat's close_inactive).
constexpr auto kLeavingQuiet = std::chrono::seconds(30);
constexpr auto kLeavingPoll = std::chrono::milliseconds(250);
constexpr auto kDescriptorRetry = std::chrono::milliseconds(500);
}  // namespace

FollowedLogs::FollowedLogs(boost::asio::io_context& io, db::Store& store, JobRegistry& registry,
                           ReadScheduler& scheduler, Metrics& metrics, ReadBuffer& buffer,
                           LogHost& host, std::function<int64_t()> wall_clock, bool verbose,
                           LoopClock& clock)
    : store_(store),
      registry_(registry),
      scheduler_(scheduler),
      metrics_(metrics),
      buffer_(buffer),
      host_(host),
      wall_clock_(std::move(wall_clock)),
      verbose_(verbose),
      clock_(clock),
      leaving_timer_(clock.timer(io)),
      waiting_timer_(clock.timer(io)) {}

Tracked* FollowedLogs::find(const std::string& path) {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : it->second.get();
}

void FollowedLogs::track(const std::string& path, const WatchRule& rule, StartAt start) {
  if (files_.count(path)) return;
  const int fd = open_within_budget(path, nullptr);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    wait_for_descriptor(path, start);
    return;
  }
  if (fd < 0) {
    if (errno != ENOENT) ++metrics_.parse_errors["unreadable_file"];
    if (errno != ENOENT && unreadable_logged_.insert(path).second) {
      log_line(kWarning, "cannot read {}: {} (will retry on the next rescan)", path,
               std::strerror(errno));
    }
    return;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return;
  }
  auto stored = store_.find_file(st.st_dev, st.st_ino);
  if (!stored) {
    ::close(fd);
    host_.store_refused(stored.error());
    return;
  }
  const auto& row = *stored;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // The same content as before: the bytes before the stored offset. A file rewritten in place
  // or a reused inode fails it. (The anchor is written with the offset in one transaction, so
  // it is never stale; the head fingerprint may lag a truncation by one commit and is not
  // trusted alone.)
  const bool same_file = row && row->offset <= size && anchor_of(fd, row->offset) == row->anchor;
  const bool container_log = rule.source == "kubernetes";
  auto file = std::make_unique<Tracked>();
  file->rule = rule;
  if (start == StartAt::kStored && same_file) {
    // Resume where the last run left off.
    file->follower = std::make_unique<FileFollower>(
        path, rule.trainer, fd, st.st_dev, st.st_ino,
        Checkpoint{row->offset, row->line, row->analyzer_state, row->generation}, container_log);
    file->file_id = row->id;
    if (recovering_) file->resend_below = size;
    if (row->fingerprint_len >= static_cast<int64_t>(kFingerprintBytes))
      file->follower->set_fingerprinted();
    if (auto registered = registry_.register_job(*file, row->run_id); !registered) {
      host_.store_refused(registered.error());
      return;
    }
  } else {
    db::FileRow fresh;
    fresh.path = path;
    fresh.dev = st.st_dev;
    fresh.ino = st.st_ino;
    fresh.generation = row ? row->generation + 1 : 0;  // a reused inode is a new file
    if (start == StartAt::kEnd) {
      // Present at the first start: no alerts for old crashes, but the job is registered.
      fresh.offset = size;
      fresh.skipped_bytes = size;
      fresh.line = count_lines(fd, size);
      fresh.anchor = anchor_of(fd, size);
    }
    const std::optional<std::string> head = head_fingerprint(fd);
    if (head) {
      fresh.fingerprint = *head;
      fresh.fingerprint_len = static_cast<int64_t>(kFingerprintBytes);
    }
    Checkpoint begin{fresh.offset, fresh.line, "{}", fresh.generation};
    if (container_log && start == StartAt::kBeginning) {
      // kubelet renamed the container's log and the runtime opened a new one: the stream goes
      // on here, with the decoder's and the analyzer's state at the old file's end.
      if (std::optional<Checkpoint> carried = take_over_rotated(path)) {
        begin.line = carried->line;
        begin.analyzer_state = carried->analyzer_state;
      }
    }
    file->follower = std::make_unique<FileFollower>(path, rule.trainer, fd, st.st_dev, st.st_ino,
                                                    begin, container_log);
    if (recovering_ && start == StartAt::kStored && !row) file->resend_below = size;
    if (head) file->follower->set_fingerprinted();
    if (auto registered = registry_.register_job(*file, 0); !registered) {
      host_.store_refused(registered.error());
      return;
    }
    fresh.job_id = file->job.job_id;
    fresh.run_id = file->job.run_id;
    auto id = store_.insert_file(fresh, wall_clock_());
    if (!id) {
      host_.store_refused(id.error());
      return;
    }
    file->file_id = *id;
  }
  if (verbose_) {
    log_line(kDebug, "following {} (job {}, from byte {})", path, file->job.name,
             file->follower->read_pos());
  }
  Tracked& ref = *file;
  files_[path] = std::move(file);
  scheduler_.watch_quietly(ref);  // before the first read: no write falls between the two
  host_.read(ref);
}

// A log followed before a restart may have been rotated while the daemon was down: find it
// where rotated logs go by (device, inode) and the bytes before the stored offset, and read
// what it got after that offset.
void FollowedLogs::drain_rotated_while_down() {
  auto rows = store_.active_files();
  count_store_failure(metrics_, "active_files", rows);  // looked for again at the next start
  if (!rows) return;
  for (const db::FileRow& row : *rows) {
    if (const Tracked* file = find(row.path); file && file->file_id == row.id) continue;
    const std::optional<WatchRule> rule = host_.rule_of(row.path);
    const auto same = [&row](int fd) { return anchor_of(fd, row.offset) == row.anchor; };
    const std::optional<std::string> found =
        rule ? find_by_identity(rotation_folders(row.path, *rule), row.dev, row.ino, same)
             : std::nullopt;
    const int fd = found ? open_log(*found) : -1;
    if (fd < 0) {
      // Unmarked, it is looked for again at the next start: counted, nothing lost.
      count_store_failure(metrics_, "set_file_state",
                          store_.set_file_state(row.id, "gone", wall_clock_()));
      continue;
    }
    Tracked file;
    file.rule = *rule;
    file.file_id = row.id;
    // The job is named after where the log lived.
    file.follower = std::make_unique<FileFollower>(
        row.path, rule->trainer, fd, row.dev, row.ino,
        Checkpoint{row.offset, row.line, row.analyzer_state, row.generation},
        rule->source == "kubernetes");
    if (auto registered = registry_.register_job(file, row.run_id); !registered) {
      host_.store_refused(registered.error());
      continue;
    }
    if (verbose_)
      log_line(kDebug, "draining {} (rotated to {} while oomtriage was down)", row.path, *found);
    finish(file, "rotated");
  }
}

// The old file leaves: it is read on while its writer may still write to it, then finished.
void FollowedLogs::check_identity(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end()) return;
  Tracked& file = *it->second;
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && st.st_dev == file.follower->dev() && st.st_ino == file.follower->ino()) {
    // A closed idle log that has not grown stays closed (its bytes are checked when it grows).
    if (!file.follower->is_open() &&
        static_cast<uint64_t>(st.st_size) == file.follower->read_pos()) {
      return;
    }
    // A busy log is read by its checks and polls, which see it grow but not shrink below what
    // they saw (a check past the end reads nothing): that is a truncation, read it now.
    const uint64_t seen = std::max(file.checked_to, file.follower->read_pos());
    if (!file.polled || static_cast<uint64_t>(st.st_size) < seen) host_.read(file);
    return;
  }
  // Its last bytes under this name, even while the store's retry is pending.
  file.awaiting_store = false;
  host_.read(file);
  file.awaiting_store = false;
  std::unique_ptr<Tracked> leaving = std::move(it->second);
  files_.erase(it);
  scheduler_.forget(*leaving);  // the leaving timer polls it now
  if (leaving->follower->is_open()) {
    struct stat old {};
    leaving->deleted = ::fstat(leaving->follower->fd(), &old) != 0 || old.st_nlink == 0;
    leaving->last_growth = clock_.now();
    if (verbose_)
      log_line(kDebug, "{} {}", path, leaving->deleted ? "was deleted" : "was rotated away");
    leaving_.push_back(std::move(leaving));
    arm_leaving();
  } else {
    // Closed while idle and gone meanwhile: whatever it got after is found by its inode, or
    // is lost with it (a deleted file that nothing holds open).
    finish(*leaving, "gone");
  }
  if (exists) {
    if (std::optional<WatchRule> rule = host_.rule_of(path))
      track(path, *rule, StartAt::kBeginning);
  }
}

// A container log rotated away under `path` (kubelet's rename) whose successor now exists:
// read to its end and committed without finishing its analyzer (an incident open at the
// rotation goes on in the new file), marked rotated; its checkpoint starts the successor.
std::optional<Checkpoint> FollowedLogs::take_over_rotated(const std::string& path) {
  for (auto it = leaving_.begin(); it != leaving_.end(); ++it) {
    Tracked& old = **it;
    if (old.path() != path || old.deleted || !old.is_container_log()) continue;
    drain(old);
    std::optional<Checkpoint> carried;
    if (host_.commit(old, old.analyzer().take_events(), /*can_rewind=*/false)) {
      carried = old.follower->checkpoint();
    }
    count_store_failure(metrics_, "set_file_state",
                        store_.set_file_state(old.file_id, "rotated", wall_clock_()));
    leaving_.erase(it);
    return carried;
  }
  return std::nullopt;
}

// Reads a leaving log to its end (its last unterminated line included), commits, marks it.
void FollowedLogs::finish(Tracked& file, const char* state) {
  drain(file);
  parsers::LogAnalysis last = file.analyzer().finish();
  host_.commit(file, std::move(last.events), /*can_rewind=*/false);
  count_store_failure(metrics_, "set_file_state",
                      store_.set_file_state(file.file_id, state, wall_clock_()));
}

// Reads everything a log not followed by its name holds now. Its progress cannot be read
// again by name, so a refused commit is kept by the sink instead of rewinding.
void FollowedLogs::drain(Tracked& file) {
  FileFollower& follower = *file.follower;
  for (int turn = 0; turn < 4096; ++turn) {
    const FileFollower::Read read = follower.read(kReadBudgetPerTurn, buffer_.span());
    metrics_.bytes_read += read.bytes;
    if (read.bytes > 0) file.last_growth = clock_.now();
    if (!read.more) break;
  }
  metrics_.records += follower.take_new_records();
  std::vector<parsers::OomEvent> events = follower.analyzer().take_events();
  if (!events.empty() || file.storable_outcome() != file.committed_outcome) {
    host_.commit(file, std::move(events), /*can_rewind=*/false);
  }
}

void FollowedLogs::drain_all() {
  for (auto& [path, file] : files_) {
    host_.read(*file);
    host_.commit(*file, file->analyzer().take_events(), /*can_rewind=*/true);
  }
  for (auto& file : leaving_) drain(*file);
}

void FollowedLogs::let_go_if(const std::function<bool(const Tracked&)>& changed) {
  for (auto it = files_.begin(); it != files_.end();) {
    Tracked& file = *it->second;
    if (!changed(file)) {
      ++it;
      continue;
    }
    host_.read(file);
    host_.commit(file, file.analyzer().take_events(), /*can_rewind=*/true);
    scheduler_.forget(file);
    it = files_.erase(it);
  }
}

void FollowedLogs::arm_leaving() {
  if (leaving_armed_ || leaving_.empty()) return;
  leaving_armed_ = true;
  leaving_timer_->expires_after(kLeavingPoll);
  leaving_timer_->async_wait([this](const boost::system::error_code& ec) {
    leaving_armed_ = false;
    if (ec) return;
    leaving_turn();
    arm_leaving();
  });
}

void FollowedLogs::leaving_turn() {
  const auto now = clock_.now();
  std::erase_if(leaving_, [&](std::unique_ptr<Tracked>& file) {
    drain(*file);
    if (file->analyzer().has_open_incident() &&
        now - file->last_growth >= file->analyzer().quiet_before_settle(settle_)) {
      file->analyzer().settle();
      host_.commit(*file, file->analyzer().take_events(), /*can_rewind=*/false);
    }
    if (now - file->last_growth < kLeavingQuiet) return false;
    finish(*file, file->deleted ? "gone" : "rotated");
    return true;
  });
}

// A closed idle log is reopened by its path when the path still is the same file; when it was
// rotated meanwhile, its inode is looked for where rotated logs go, so its tail is drained.
bool FollowedLogs::ensure_open(Tracked& file) {
  open_hit_limit_ = false;
  FileFollower& follower = *file.follower;
  if (follower.is_open()) return true;
  int fd = open_within_budget(file.path(), &file);
  struct stat st {};
  if (fd >= 0 && (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != follower.dev() ||
                  static_cast<uint64_t>(st.st_ino) != follower.ino())) {
    ::close(fd);
    fd = -1;
    const auto same = [&follower](int candidate) { return follower.holds_last_read(candidate); };
    if (auto found = find_by_identity(rotation_folders(file.path(), file.rule), follower.dev(),
                                      follower.ino(), same)) {
      fd = open_log(*found);
    }
  }
  if (fd < 0) {
    open_hit_limit_ = errno == EMFILE || errno == ENFILE;
    return false;
  }
  follower.adopt_descriptor(fd);
  return true;
}

size_t FollowedLogs::open_logs() const {
  size_t open = leaving_.size();
  for (const auto& [path, file] : files_) open += file->follower->is_open();
  return open;
}

// Opens `path` after making room, never past the budget (errno EMFILE when every open log is
// busy). Out of descriptors all the same, the budget was too generous: it shrinks to what is
// open, and one more try follows.
int FollowedLogs::open_within_budget(const std::string& path, const Tracked* keep) {
  if (!make_room(keep)) {
    errno = EMFILE;
    return -1;
  }
  int fd = open_log(path);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    const size_t open = open_logs();
    max_open_ = std::max<size_t>(8, open > 1 ? open - 1 : 1);
    if (!make_room(keep)) {
      errno = EMFILE;
      return -1;
    }
    fd = open_log(path);
  }
  return fd;
}

// Closes the least recently read idle logs until one more descriptor fits; false when none is
// idle. A log with uncommitted progress, an open incident or a pending retry stays open, and so
// does a leaving one (a deleted file could not be opened again).
bool FollowedLogs::make_room(const Tracked* keep) {
  size_t open = open_logs();
  while (open >= max_open_) {
    Tracked* idle = nullptr;
    for (auto& [path, file] : files_) {
      if (!file->follower->is_open() || file.get() == keep || file->dirty || file->settle_at ||
          file->analyzer().has_open_incident() || file->awaiting_store) {
        continue;
      }
      if (!idle || file->last_read < idle->last_read) idle = file.get();
    }
    if (!idle) {
      if (!fd_limit_logged_) {
        log_line(kWarning,
                 "{} logs open, all busy: the others wait for one to go idle (a budget of {} "
                 "descriptors; raise LimitNOFILE= to read more logs at once)",
                 open, max_open_);
        fd_limit_logged_ = true;
      }
      return false;
    }
    idle->follower->close_descriptor();
    ++metrics_.files_closed_idle;
    --open;
  }
  return true;
}

// A new log found while no descriptor was free is tracked a moment later, from where it was
// asked to start (a rescan would find it too, but much later).
void FollowedLogs::wait_for_descriptor(const std::string& path, StartAt start) {
  waiting_for_descriptor_.insert_or_assign(path, start);
  if (waiting_armed_) return;
  waiting_armed_ = true;
  waiting_timer_->expires_after(kDescriptorRetry);
  waiting_timer_->async_wait([this](const boost::system::error_code& ec) {
    waiting_armed_ = false;
    if (ec) return;
    auto waiting = std::exchange(waiting_for_descriptor_, {});
    for (const auto& [path, start] : waiting) {
      // under the rule it has now: a reload meanwhile may have changed or dropped it
      if (const std::optional<WatchRule> rule = host_.rule_of(path)) track(path, *rule, start);
    }
  });
}

}  // namespace oomtriage::daemon
