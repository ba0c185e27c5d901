// daemon/service/daemon.cc: the daemon's story. run_daemon() opens the store, scans the globs, and runs
// the Asio loop; Daemon holds the watched files and reacts to inotify events, the rescan timer,
// the settle timer and signals. Each read of a file ends in one store transaction: its new events
// (with their outbox rows), its resume offset and its analyzer checkpoint.
#include "daemon/service/daemon.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio.hpp>
#include <fmt/format.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <deque>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/common/clock.h"
#include "daemon/service/job_history.h"
#include "daemon/service/job_locator.h"
#include "daemon/common/metrics.h"
#include "daemon/net/metrics_server.h"
#include "daemon/common/version.h"
#include "daemon/render/json_output.h"
#include "db/store.h"
#include "parsers/log_analyzer.h"
#include "triage/ranker.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 1 << 20;
constexpr size_t kReadBudgetPerTurn = 8 << 20;  // then other files get a turn
constexpr size_t kFingerprintBytes = 1024;  // never shorter: none until this much exists
constexpr uint64_t kAnchorBytes = 256;
constexpr uint64_t kTailBytes = 64;  // the last bytes fed, checked before every read
constexpr auto kInotifyBatch = std::chrono::milliseconds(5);
constexpr double kReadBurst = 4.0;


// journald reads "<N>" at the start of a stderr line as the priority.
template <class... Args>
void log_line(int priority, fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "<{}>oomtriage: {}\n", priority, fmt::format(format, std::forward<Args>(args)...));
}

std::string bytes_at(int fd, uint64_t from, uint64_t length) {
  std::string bytes(length, '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(from));
  bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return bytes;
}

std::string fingerprint_of(int fd, uint64_t length) { return sha256_hex(bytes_at(fd, 0, length)); }

// The last bytes before `offset` (at most kTailBytes): what a read ending there fed last.
std::string tail_before(int fd, uint64_t offset) {
  const uint64_t length = std::min<uint64_t>(offset, kTailBytes);
  return bytes_at(fd, offset - length, length);
}

// The hash of the bytes just before `offset`: what was read there must still be there.
std::string anchor_of(int fd, uint64_t offset) {
  if (offset == 0) return "";
  const uint64_t from = offset > kAnchorBytes ? offset - kAnchorBytes : 0;
  return sha256_hex(bytes_at(fd, from, offset - from));
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

// The leading directories of a glob that contain no wildcard.
std::string static_prefix(const std::string& pattern) {
  const size_t wildcard = pattern.find_first_of("*?[");
  const std::string head = wildcard == std::string::npos ? pattern : pattern.substr(0, wildcard);
  const size_t slash = head.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : head.substr(0, slash));
}

struct Job {
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::optional<int64_t> snapshot_id;
  std::string name;
  std::optional<parsers::JobConfig> config;
  std::string config_problem;
  std::optional<std::string> config_path;
  std::optional<std::string> config_sha256;
  std::vector<parsers::NativeFile> files;  // the config files read, for what a run carried
};

struct Tracked {
  std::string path;
  const WatchRule* rule = nullptr;
  int fd = -1;
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t file_id = 0;
  int64_t generation = 0;
  uint64_t read_pos = 0;
  std::string tail;             // the last bytes fed, ending at read_pos
  bool fingerprinted = false;   // the store holds the first KiB's hash
  std::unique_ptr<parsers::LogAnalyzer> analyzer;
  Job job;
  std::optional<Clock::time_point> settle_at;
  parsers::Trainer stored_trainer = parsers::Trainer::kUnknown;
  // Progress not yet committed: offsets are written at most once a second per file unless an
  // event or a new outcome comes (a crash re-reads that second; events are unique per offset).
  bool dirty = false;
  bool queued = false;  // already in this inotify batch's read list
  bool read_scheduled = false;
  Clock::time_point last_read{};
  // Reads on inotify events come from a token bucket: a quiet log is read at once, a burst of
  // a few writes too, and a busy log settles to one read per read_interval_ms.
  double read_tokens = kReadBurst;
  Clock::time_point tokens_at{};
  std::optional<parsers::Outcome> committed_outcome;
  // The last progress the store accepted: after a failed commit the analyzer and the read
  // position go back here and the bytes are read again, so no event is skipped.
  struct Committed {
    uint64_t offset = 0;
    int64_t line = 1;
    std::string analyzer_state = "{}";
    int64_t generation = 0;
  } committed;
  bool read_error_logged = false;
  uint64_t records_counted = 0;
  uint64_t truncated_counted = 0;

  ~Tracked() {
    if (fd >= 0) ::close(fd);
  }
};

enum class StartAt { kBeginning, kEnd, kStored };

class Daemon {
 public:
  Daemon(asio::io_context& io, db::Store& store, DaemonConfig config, bool verbose)
      : io_(io), store_(store), config_(std::move(config)), verbose_(verbose), inotify_(io),
        rescan_timer_(io), settle_timer_(io), checkpoint_timer_(io), read_timer_(io), batch_timer_(io), signals_(io, SIGINT, SIGTERM, SIGHUP) {}

  bool start() {
    metrics_.version = kVersion;
    // Descriptors for logs: the soft limit minus a reserve for the store, inotify, sockets and
    // config reads. Idle logs beyond it are closed and reopened by path and identity.
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      // Descriptors already open (the store, inherited ones) count against the limit too.
      size_t already_open = 0;
      std::error_code ec;
      for (auto it = fs::directory_iterator("/proc/self/fd", ec); !ec && it != fs::directory_iterator();
           it.increment(ec)) {
        ++already_open;
      }
      const size_t soft = static_cast<size_t>(limit.rlim_cur);
      const size_t reserve = std::min<size_t>(64, soft / 4);
      max_open_ = soft > already_open + reserve + 8 ? soft - already_open - reserve : 8;
    }
    if (!config_.metrics_listen.empty()) {
      metrics_server_ = std::make_unique<MetricsServer>(io_, [this] { return render_metrics(); });
      std::string error;
      if (!metrics_server_->listen(config_.metrics_listen, error)) {
        log_line(3, "{}", error);
        return false;
      }
    }
    dispatcher_ = std::make_unique<AlertDispatcher>(io_, store_, config_, &metrics_);
    std::string error;
    if (!dispatcher_->start(error)) {
      log_line(3, "{}", error);
      return false;
    }
    dispatcher_->poke();
    const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
      log_line(4, "inotify unavailable ({}): polling every {} s", std::strerror(errno),
               config_.rescan_seconds);
    } else {
      inotify_.assign(fd);
      wait_inotify();
    }
    // Only the very first scan of this store reads present logs from their end; a store that
    // exists but has no jobs yet is not a first start (a crash may have come while down).
    auto marker = store_.meta("first_scan_done");
    first_start_ = marker && !*marker;
    scan_all();
    if (first_start_) (void)store_.set_meta("first_scan_done", std::to_string(unix_now()));
    first_start_ = false;
    drain_rotated_while_down();
    arm_rescan();
    wait_signals();
    log_line(6, "watching {} file(s) from {} rule(s); store ready", files_.size(),
             config_.watch.size());
    notify(fmt::format("READY=1\nSTATUS=watching {} log(s)", files_.size()));
    uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
      watchdog_interval_ = std::chrono::microseconds(watchdog_usec / 2);
      arm_watchdog();
    }
    write_textfile();
    return true;
  }

 private:
  // --- service manager and metrics -----------------------------------------------------------
  static void notify(const std::string& state) { sd_notify(0, state.c_str()); }

  void arm_watchdog() {
    watchdog_timer_.expires_after(watchdog_interval_);
    watchdog_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      notify("WATCHDOG=1");
      arm_watchdog();
    });
  }

  std::string render_metrics() {
    metrics_.files_watched = files_.size();
    if (auto pending = store_.count_alerts("pending")) metrics_.outbox_pending = static_cast<uint64_t>(*pending);
    return metrics_.render();
  }

  // node_exporter's textfile collector reads whole files: write aside, then rename.
  void write_textfile() {
    if (config_.metrics_textfile.empty()) return;
    const std::string tmp = config_.metrics_textfile + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << render_metrics();
      if (!out) {
        if (textfile_error_logged_++ == 0) log_line(4, "cannot write {}", tmp);
        return;
      }
    }
    std::error_code ec;
    fs::rename(tmp, config_.metrics_textfile, ec);
  }

  // --- discovery ---------------------------------------------------------------------------
  void scan_all() {
    for (const WatchRule& rule : config_.watch) {
      ensure_watch(static_prefix(rule.logs));
      for (const std::string& dir : glob_paths(fs::path(rule.logs).parent_path().string(), true)) {
        ensure_watch(dir);
      }
      for (const std::string& path : glob_paths(rule.logs, false)) {
        auto it = files_.find(path);
        if (it == files_.end()) {
          track(path, rule, first_start_ ? StartAt::kEnd : StartAt::kStored);
        }
      }
    }
    // Identity checks catch renames, deletes and truncations inotify did not report.
    std::vector<std::string> paths;
    for (const auto& [path, file] : files_) paths.push_back(path);
    for (const std::string& path : paths) check_identity(path);
  }

  void ensure_watch(const std::string& dir) {
    if (!inotify_.is_open() || watched_dirs_.count(dir)) return;
    const uint32_t mask = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_MODIFY |
                          IN_CLOSE_WRITE | IN_DELETE_SELF | IN_ONLYDIR;
    const int wd = ::inotify_add_watch(inotify_.native_handle(), dir.c_str(), mask);
    if (wd < 0) {
      if (errno == ENOSPC && !watch_limit_logged_) {
        log_line(4, "inotify watch limit reached at {}: those files are polled every {} s", dir,
                 config_.rescan_seconds);
        watch_limit_logged_ = true;
      }
      return;
    }
    watches_[wd] = dir;
    watched_dirs_.insert(dir);
  }

  const WatchRule* rule_for(const std::string& path) const {
    for (const WatchRule& rule : config_.watch) {
      if (::fnmatch(rule.logs.c_str(), path.c_str(), FNM_PATHNAME) == 0) return &rule;
    }
    return nullptr;
  }

  // Waits for inotify, then lets events gather for a few milliseconds so that one wake-up
  // handles a batch: with 1,000 busy logs that is the difference between 10,000 wake-ups a
  // second and 50.
  void wait_inotify() {
    inotify_.async_wait(asio::posix::stream_descriptor::wait_read,
                        [this](const boost::system::error_code& ec) {
                          if (ec) {
                            if (ec != asio::error::operation_aborted) {
                              log_line(3, "inotify wait failed: {}", ec.message());
                            }
                            return;
                          }
                          batch_timer_.expires_after(kInotifyBatch);
                          batch_timer_.async_wait([this](const boost::system::error_code& e) {
                            if (e) return;
                            drain_inotify();
                            wait_inotify();
                          });
                        });
  }

  void drain_inotify() {
    for (int round = 0; round < 64; ++round) {
      const ssize_t n = ::read(inotify_.native_handle(), inotify_buffer_.data(), inotify_buffer_.size());
      if (n <= 0) return;  // EAGAIN: drained
      on_inotify(static_cast<size_t>(n));
    }
  }

  void on_inotify(size_t n) {
    std::vector<Tracked*> to_read;
    bool rescan = false;
    for (size_t at = 0; at + sizeof(inotify_event) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(inotify_buffer_.data() + at);
      at += sizeof(inotify_event) + event->len;
      if (event->mask & IN_Q_OVERFLOW) {
        rescan = true;
        continue;
      }
      auto dir = watches_.find(event->wd);
      if (dir == watches_.end()) continue;
      if (event->mask & (IN_IGNORED | IN_DELETE_SELF)) {
        watched_dirs_.erase(dir->second);
        if (event->mask & IN_IGNORED) watches_.erase(dir);
        rescan = true;
        continue;
      }
      std::string path = dir->second;
      path += '/';
      path += event->len > 0 ? event->name : "";
      if (event->mask & IN_ISDIR) {
        rescan = true;  // a new job folder: watch it and pick up what is already inside
        continue;
      }
      if (event->mask & (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)) {
        if (files_.count(path)) {
          check_identity(path);
        } else if (const WatchRule* rule = rule_for(path);
                   rule && (event->mask & (IN_CREATE | IN_MOVED_TO))) {
          track(path, *rule, StartAt::kBeginning);
        }
        continue;
      }
      if (event->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
        if (auto it = files_.find(path); it != files_.end()) {
          if (!it->second->queued) {
            it->second->queued = true;
            to_read.push_back(it->second.get());
          }
        } else if (const WatchRule* rule = rule_for(path)) {
          track(path, *rule, StartAt::kBeginning);
        }
      }
    }
    // A rescan may drop files (rotation): read only those still followed.
    std::vector<std::string> paths;
    for (Tracked* file : to_read) {
      file->queued = false;
      paths.push_back(file->path);
    }
    if (rescan) scan_all();
    const auto now = Clock::now();
    const auto interval = std::chrono::milliseconds(config_.read_interval_ms);
    for (const std::string& path : paths) {
      auto it = files_.find(path);
      if (it == files_.end()) continue;
      Tracked& file = *it->second;
      const double refill = interval.count() > 0
                                ? std::chrono::duration<double>(now - file.tokens_at) / interval
                                : kReadBurst;
      file.read_tokens = std::min(kReadBurst, file.read_tokens + refill);
      file.tokens_at = now;
      if (file.read_tokens >= 1.0) {
        file.read_tokens -= 1.0;
        read_file(file);
      } else if (!file.read_scheduled) {
        file.read_scheduled = true;
        // Due times on a 100 ms grid: one timer wake-up serves many files.
        const auto due = file.last_read + interval;
        const auto grid = std::chrono::milliseconds(100);
        const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(due.time_since_epoch());
        scheduled_reads_.emplace(Clock::time_point((since / grid + 1) * grid), path);
        arm_reads();
      }
    }
  }

  // --- files -------------------------------------------------------------------------------
  void track(const std::string& path, const WatchRule& rule, StartAt start) {
    const int fd = open_within_budget(path, nullptr);
    if (fd < 0) {
      if (errno != ENOENT) ++metrics_.parse_errors["unreadable_file"];
      if (errno != ENOENT && unreadable_logged_.insert(path).second) {
        log_line(4, "cannot read {}: {} (will retry on the next rescan)", path, std::strerror(errno));
      }
      return;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return;
    }
    auto file = std::make_unique<Tracked>();
    file->path = path;
    file->rule = &rule;
    file->fd = fd;
    file->dev = st.st_dev;
    file->ino = st.st_ino;
    const int64_t now = unix_now();
    const uint64_t fingerprint_len = std::min<uint64_t>(kFingerprintBytes, st.st_size);

    parsers::AnalyzerOptions options;
    options.trainer = rule.trainer;
    auto stored = store_.find_file(st.st_dev, st.st_ino);
    if (!stored) {
      store_failed(stored.error().message);
      rescan_on_retry_ = true;
      arm_store_retry();
      return;
    }
    const auto& row = *stored;
    // The same content as before: the head (once a KiB existed) and the bytes before the
    // stored offset. A file rewritten in place or a reused inode fails one of them.
    // (The anchor is written with the offset in one transaction, so it is never stale; the head
    // fingerprint may lag a truncation by one commit and is not trusted alone.)
    const bool same_file = row && row->offset <= static_cast<uint64_t>(st.st_size) &&
                           anchor_of(fd, row->offset) == row->anchor;
    if (start == StartAt::kStored && row && same_file && row->offset <= uint64_t(st.st_size)) {
      // Resume where the last run left off.
      file->file_id = row->id;
      file->generation = row->generation;
      file->read_pos = row->offset;
      file->analyzer = std::make_unique<parsers::LogAnalyzer>(options, row->analyzer_state,
                                                              row->offset, row->line);
      file->committed = {row->offset, row->line, row->analyzer_state, row->generation};
      file->tail = tail_before(fd, row->offset);
      file->fingerprinted = row->fingerprint_len >= static_cast<int64_t>(kFingerprintBytes);
      if (!register_job(*file, row->run_id)) return;
    } else {
      db::FileRow fresh;
      fresh.path = path;
      fresh.dev = st.st_dev;
      fresh.ino = st.st_ino;
      if (fingerprint_len == kFingerprintBytes) {
        fresh.fingerprint = fingerprint_of(fd, fingerprint_len);
        fresh.fingerprint_len = static_cast<int64_t>(fingerprint_len);
        file->fingerprinted = true;
      }
      fresh.generation = row ? row->generation + 1 : 0;  // a reused inode is a new file
      int64_t line = 1;
      if (start == StartAt::kEnd) {
        // Present at the first start: no alerts for old crashes, but the job is registered.
        fresh.offset = static_cast<uint64_t>(st.st_size);
        line = count_lines(fd, fresh.offset);
        fresh.anchor = anchor_of(fd, fresh.offset);
        file->tail = tail_before(fd, fresh.offset);
      }
      fresh.line = line;
      if (!register_job(*file, 0)) return;
      fresh.job_id = file->job.job_id;
      fresh.run_id = file->job.run_id;
      auto id = store_.insert_file(fresh, now);
      if (!id) {
        store_failed(id.error().message);
        rescan_on_retry_ = true;
        arm_store_retry();
        return;
      }
      file->file_id = *id;
      file->generation = fresh.generation;
      file->read_pos = fresh.offset;
      file->analyzer = fresh.offset == 0
                           ? std::make_unique<parsers::LogAnalyzer>(options)
                           : std::make_unique<parsers::LogAnalyzer>(options, "{}", fresh.offset, line);
      file->committed = {fresh.offset, line, "{}", fresh.generation};
    }
    if (verbose_) log_line(7, "following {} (job {}, from byte {})", path, file->job.name, file->read_pos);
    Tracked& ref = *file;
    files_[path] = std::move(file);
    read_file(ref);
  }

  // A log followed before a restart may have been rotated while the daemon was down: find it
  // beside its old name by (device, inode) and read what it got after the stored offset.
  void drain_rotated_while_down() {
    auto rows = store_.active_files();
    if (!rows) return;
    for (const db::FileRow& row : *rows) {
      if (auto it = files_.find(row.path); it != files_.end() && it->second->file_id == row.id) {
        continue;
      }
      const WatchRule* rule = rule_for(row.path);
      const std::optional<std::string> found = rule ? find_rotated(row, *rule) : std::nullopt;
      if (!found || !rule) {
        (void)store_.set_file_state(row.id, "gone", unix_now());
        continue;
      }
      Tracked file;
      file.path = *found;
      file.rule = rule;
      file.fd = ::open(found->c_str(), O_RDONLY | O_CLOEXEC);
      if (file.fd < 0) continue;
      file.dev = row.dev;
      file.ino = row.ino;
      file.file_id = row.id;
      file.generation = row.generation;
      file.read_pos = row.offset;
      parsers::AnalyzerOptions options;
      options.trainer = rule->trainer;
      file.analyzer = std::make_unique<parsers::LogAnalyzer>(options, row.analyzer_state, row.offset, row.line);
      file.path = row.path;  // the job is named after where the log lived
      if (!register_job(file, row.run_id)) continue;
      if (verbose_) log_line(7, "draining {} (rotated to {} while oomtriage was down)", row.path, *found);
      struct stat st {};
      for (int turn = 0; turn < 4096 && ::fstat(file.fd, &st) == 0 &&
                         static_cast<uint64_t>(st.st_size) > file.read_pos;
           ++turn) {
        read_file(file);
      }
      parsers::LogAnalysis last = file.analyzer->finish();
      commit(file, std::move(last.events), /*can_rewind=*/false);
      (void)store_.set_file_state(row.id, "rotated", unix_now());
    }
  }

  // Where a log rotated while the daemon was down went: its own folder, its logs/ (AI
  // Toolkit's restarts), the rule's rotated_to folders; the same inode and the same first KiB.
  std::optional<std::string> find_rotated(const db::FileRow& row, const WatchRule& rule) const {
    return find_rotated(row, rule, [&](int fd) { return anchor_of(fd, row.offset) == row.anchor; });
  }

  std::optional<std::string> find_rotated(const db::FileRow& row, const WatchRule& rule,
                                          const std::function<bool(int)>& same_content) const {
    const fs::path home = fs::path(row.path).parent_path();
    std::vector<fs::path> dirs = {home, home / "logs"};
    for (const std::string& dir : rule.rotated_to) dirs.emplace_back(expand_template(dir, row.path));
    for (const fs::path& dir : dirs) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        struct stat st {};
        if (::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
            static_cast<uint64_t>(st.st_dev) != row.dev ||
            static_cast<uint64_t>(st.st_ino) != row.ino) {
          continue;
        }
        const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        const bool same = same_content(fd);
        ::close(fd);
        if (same) return entry.path().string();
      }
    }
    return std::nullopt;
  }

  static int64_t count_lines(int fd, uint64_t upto) {
    std::vector<char> buffer(kReadChunk);
    int64_t lines = 1;
    for (uint64_t pos = 0; pos < upto;) {
      const ssize_t n = ::pread(fd, buffer.data(), std::min<uint64_t>(buffer.size(), upto - pos), static_cast<off_t>(pos));
      if (n <= 0) break;
      lines += std::count(buffer.data(), buffer.data() + n, '\n');
      pos += static_cast<uint64_t>(n);
    }
    return lines;
  }

  // Finds or creates the job, its config snapshot and (for a new file) a new run.
  bool register_job(Tracked& file, int64_t run_id) {
    const int64_t now = unix_now();
    Job& job = file.job;
    job.name = expand_template(file.rule->job, file.path);
    refresh_config(file, rule_config(file));
    const std::string trainer(parsers::to_string(file.rule->trainer));
    auto id = store_.upsert_job(job.name, trainer, fs::path(file.path).parent_path().string(), now);
    if (!id) {
      // Not followed yet: the store's retry scans again (nothing was read, nothing is lost).
      store_failed(id.error().message);
      rescan_on_retry_ = true;
      arm_store_retry();
      return false;
    }
    job.job_id = *id;
    snapshot(file);
    if (run_id != 0) {
      job.run_id = run_id;
      return true;
    }
    auto run = store_.start_run(job.job_id, file.path, job.snapshot_id, now);
    if (!run) {
      store_failed(run.error().message);
      rescan_on_retry_ = true;
      arm_store_retry();
      return false;
    }
    job.run_id = *run;
    return true;
  }

  // The rule's `config:` when it names an existing file; else the registry looks for one.
  std::optional<fs::path> rule_config(const Tracked& file) const {
    if (file.rule->config.empty()) return std::nullopt;
    const std::string config_path = expand_template(file.rule->config, file.path);
    std::error_code ec;
    if (fs::exists(config_path, ec)) return fs::path(config_path);
    return std::nullopt;
  }

  void refresh_config(Tracked& file, const std::optional<fs::path>& explicit_config) {
    // The same registry as scan and fix: the log's own facts, the trainer the rule or the log
    // names.
    const parsers::LogAnalysis facts = file.analyzer ? file.analyzer->job_facts() : parsers::LogAnalysis{};
    const parsers::Trainer trainer =
        file.rule->trainer != parsers::Trainer::kUnknown ? file.rule->trainer : facts.trainer;
    JobLookup lookup = locate_job(file.path, explicit_config, trainer, facts);
    Job& job = file.job;
    if (!lookup.warning.empty() && warned_configs_.insert(lookup.warning).second) {
      ++metrics_.parse_errors["bad_job_config"];
      log_line(4, "{}", lookup.warning);  // each bad field once, the job goes on
    }
    job.config = std::move(lookup.config);
    job.config_problem = lookup.config_problem;
    job.config_path = lookup.job ? lookup.job->config_path : std::nullopt;
    job.config_sha256 = lookup.job ? lookup.job->config_sha256 : std::nullopt;
    job.files = std::move(lookup.files);
    if (job.config_path) config_texts_[*job.config_path] = lookup.config_text;
  }

  void snapshot(Tracked& file) {
    Job& job = file.job;
    if (!job.config_path || !job.config_sha256) return;
    auto id = store_.add_config_snapshot(job.job_id, *job.config_path, *job.config_sha256,
                                         config_texts_[*job.config_path], unix_now());
    if (id) job.snapshot_id = *id;
  }

  // Reads what the file grew by (bounded per turn), and commits what it produced.
  void read_file(Tracked& file) {
    if (rewound_.count(file.path)) return;  // waiting for the store; the retry reads it
    if (!ensure_open(file)) {
      // Out of descriptors for the moment (every open log busy with an incident or unsaved
      // progress): try again shortly, when one of them is idle.
      if (open_hit_limit_) schedule_read(file, std::chrono::milliseconds(100));
      return;
    }
    file.last_read = Clock::now();
    struct stat st {};
    if (::fstat(file.fd, &st) != 0) return;
    if (static_cast<uint64_t>(st.st_size) < file.read_pos ||
        (file.read_pos > 0 &&
         bytes_at(file.fd, file.read_pos - file.tail.size(), file.tail.size()) != file.tail)) {
      // Shorter, or other bytes where the last read ended: truncated (copytruncate, perhaps
      // already written past the old offset) or rewritten in place. Read it again from 0.
      truncated(file);
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    size_t budget = static_cast<size_t>(std::min<uint64_t>(kReadBudgetPerTurn, size - file.read_pos));
    const bool more = size - file.read_pos > kReadBudgetPerTurn;
    while (budget > 0) {
      const ssize_t n = ::pread(file.fd, buffer_.data(), std::min(buffer_.size(), budget),
                                static_cast<off_t>(file.read_pos));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (!file.read_error_logged) {
          log_line(4, "read {}: {}", file.path, std::strerror(errno));
          file.read_error_logged = true;
        }
        break;
      }
      if (n == 0) break;
      std::string_view data(buffer_.data(), static_cast<size_t>(n));
      if (file.read_pos == 0) {
        // copytruncate leaves a hole of NULs where the writer's old offset was.
        const size_t skip = data.find_first_not_of('\0');
        if (skip == std::string_view::npos) {
          file.read_pos += data.size();
          continue;
        }
        data.remove_prefix(skip);
        file.read_pos += skip;
      }
      file.analyzer->feed(data);
      file.read_pos += data.size();
      file.tail.append(data.substr(data.size() - std::min<size_t>(data.size(), kTailBytes)));
      if (file.tail.size() > kTailBytes) file.tail.erase(0, file.tail.size() - kTailBytes);
      metrics_.bytes_read += data.size();
      budget -= std::min(budget, static_cast<size_t>(n));
    }
    std::vector<parsers::OomEvent> events = file.analyzer->take_events();
    const uint64_t records = file.analyzer->records();
    metrics_.records += records - std::min(records, file.records_counted);
    file.records_counted = records;
    const uint64_t truncated = file.analyzer->truncated_records();
    if (truncated > file.truncated_counted) {
      metrics_.parse_errors["record_too_long"] += truncated - file.truncated_counted;
      log_line(4, "{}: a record longer than {} bytes was cut", file.path, parsers::kMaxRecordBytes);
      file.truncated_counted = truncated;
    }
    const parsers::Outcome outcome = file.analyzer->outcome_so_far();
    if (!events.empty() || outcome != file.committed_outcome) {
      if (!commit(file, std::move(events))) return;  // rewound: read again once the store answers
    } else {
      file.dirty = true;
      arm_checkpoint();
    }
    if (file.analyzer->has_open_incident()) {
      file.settle_at = Clock::now() + std::chrono::milliseconds(config_.settle_ms);
      arm_settle();
    }
    if (more) {
      asio::post(io_, [this, path = file.path] {
        if (auto it = files_.find(path); it != files_.end()) read_file(*it->second);
      });
    }
  }

  void truncated(Tracked& file) {
    log_line(5, "{} was truncated (copytruncate?): reading it again from the start", file.path);
    parsers::LogAnalyzer& old = *file.analyzer;
    old.settle();
    commit(file, old.take_events(), /*can_rewind=*/false);
    ++file.generation;
    file.read_pos = 0;
    parsers::AnalyzerOptions options;
    options.trainer = file.rule->trainer;
    file.analyzer = std::make_unique<parsers::LogAnalyzer>(options);
    file.committed = {0, 1, "{}", file.generation};
    file.tail.clear();
    file.fingerprinted = false;  // the head is new content
  }

  // The path may now be another file (rotation, restart) or nothing (deleted): drain the old one.
  void check_identity(const std::string& path) {
    auto it = files_.find(path);
    if (it == files_.end()) return;
    Tracked& file = *it->second;
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && st.st_dev == file.dev && st.st_ino == file.ino) {
      // A closed idle log that has not grown stays closed (its bytes are checked when it grows).
      if (file.fd < 0 && static_cast<uint64_t>(st.st_size) == file.read_pos) return;
      read_file(file);
      return;
    }
    // Drain what the old file still holds, its last unterminated line included, then let it go.
    rewound_.erase(path);
    read_file(file);
    rewound_.erase(path);
    parsers::LogAnalysis last = file.analyzer->finish();
    commit(file, std::move(last.events), /*can_rewind=*/false);
    struct stat old {};
    const bool gone = file.fd < 0 || ::fstat(file.fd, &old) != 0 || old.st_nlink == 0;
    (void)store_.set_file_state(file.file_id, gone ? "gone" : "rotated", unix_now());
    if (verbose_) log_line(7, "{} {}", path, gone ? "was deleted" : "was rotated away");
    files_.erase(it);
    if (exists) {
      if (const WatchRule* rule = rule_for(path)) track(path, *rule, StartAt::kBeginning);
    }
  }

  // --- descriptors -------------------------------------------------------------------------
  // A closed idle log is reopened by its path when the path still is the same file; when it was
  // rotated meanwhile, its inode is looked for where rotated logs go, so its tail is drained.
  bool ensure_open(Tracked& file) {
    open_hit_limit_ = false;
    if (file.fd >= 0) return true;
    int fd = open_within_budget(file.path, &file);
    struct stat st {};
    if (fd >= 0 && (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != file.dev ||
                    static_cast<uint64_t>(st.st_ino) != file.ino)) {
      ::close(fd);
      fd = -1;
      db::FileRow row;
      row.path = file.path;
      row.dev = file.dev;
      row.ino = file.ino;
      const auto same = [&file](int candidate) {
        return bytes_at(candidate, file.read_pos - file.tail.size(), file.tail.size()) == file.tail;
      };
      if (auto found = find_rotated(row, *file.rule, same)) {
        fd = ::open(found->c_str(), O_RDONLY | O_CLOEXEC);
      }
    }
    if (fd < 0) {
      open_hit_limit_ = errno == EMFILE || errno == ENFILE;
      return false;
    }
    file.fd = fd;
    return true;
  }

  void schedule_read(Tracked& file, std::chrono::milliseconds delay) {
    if (file.read_scheduled) return;
    file.read_scheduled = true;
    scheduled_reads_.emplace(Clock::now() + delay, file.path);
    arm_reads();
  }

  size_t open_logs() const {
    size_t open = 0;
    for (const auto& [path, file] : files_) open += file->fd >= 0;
    return open;
  }

  // Opens `path` after making room; out of descriptors all the same, the budget was too
  // generous: it shrinks to what is open, and one more try follows.
  int open_within_budget(const std::string& path, const Tracked* keep) {
    make_room(keep);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      const size_t open = open_logs();
      max_open_ = std::max<size_t>(8, open > 1 ? open - 1 : 1);
      make_room(keep);
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    }
    return fd;
  }

  // Closes the least recently read idle logs until one more descriptor fits. A log with
  // uncommitted progress, an open incident or a pending retry stays open.
  void make_room(const Tracked* keep) {
    size_t open = open_logs();
    while (open >= max_open_) {
      Tracked* idle = nullptr;
      for (auto& [path, file] : files_) {
        if (file->fd < 0 || file.get() == keep || file->dirty || file->settle_at ||
            file->analyzer->has_open_incident() || rewound_.count(path)) {
          continue;
        }
        if (!idle || file->last_read < idle->last_read) idle = file.get();
      }
      if (!idle) {
        if (!fd_limit_logged_) {
          log_line(4, "{} logs open, all busy: going past the budget of {}", open, max_open_);
          fd_limit_logged_ = true;
        }
        return;
      }
      ::close(idle->fd);
      idle->fd = -1;
      ++metrics_.files_closed_idle;
      --open;
    }
  }

  // --- events ------------------------------------------------------------------------------
  // Returns false when the store refused. A file that stays is then rewound to its last commit
  // and read again; the last progress of a file that is going away (rotated, truncated,
  // drained) cannot be read again, so it is kept and retried first.
  bool commit(Tracked& file, std::vector<parsers::OomEvent> events, bool can_rewind = true) {
    db::Progress progress = progress_of(file, std::move(events));
    auto result = store_.commit_progress(progress, unix_now());
    if (!result) {
      store_failed(result.error().message);
      if (can_rewind) {
        rewind(file);
      } else {
        orphans_.push_back(std::move(progress));
        arm_store_retry();
      }
      return false;
    }
    store_recovered();
    if (*result > 0) {
      for (const auto& row : progress.events) ++metrics_.events[{row.kind, row.phase}];
      if (dispatcher_) dispatcher_->poke();
    }
    committed(file, progress);
    return true;
  }

  void committed(Tracked& file, const db::Progress& progress) {
    file.dirty = false;
    file.committed_outcome = file.analyzer->outcome_so_far();
    file.committed = {progress.offset, progress.line, progress.analyzer_state, progress.generation};
    if (progress.fingerprint && progress.fingerprint->second > 0) file.fingerprinted = true;
  }

  // Offsets move only after the store accepted the events: the analyzer and the read position
  // go back to the last commit, and the file is read again once the store answers.
  void rewind(Tracked& file) {
    parsers::AnalyzerOptions options;
    options.trainer = file.rule->trainer;
    const auto& c = file.committed;
    file.analyzer = c.offset == 0 && c.analyzer_state == "{}"
                        ? std::make_unique<parsers::LogAnalyzer>(options)
                        : std::make_unique<parsers::LogAnalyzer>(options, c.analyzer_state,
                                                                 c.offset, c.line);
    file.read_pos = c.offset;
    file.tail = tail_before(file.fd, c.offset);
    file.generation = c.generation;
    file.dirty = false;
    file.records_counted = 0;
    file.truncated_counted = 0;
    file.settle_at.reset();
    rewound_.insert(file.path);
    arm_store_retry();
  }

  void store_failed(const std::string& message) {
    ++metrics_.store_failures;
    if (!store_failing_) {
      log_line(3, "store: {}; nothing is lost: the logs are read again from the last commit "
                  "once it answers",
               message);
      store_failing_ = true;
    }
  }

  void store_recovered() {
    if (!store_failing_) return;
    store_failing_ = false;
    store_retry_delay_ = std::chrono::milliseconds(0);
    log_line(5, "store: answering again");
  }

  // Retries the rewound files with a backoff (250 ms doubling to 30 s); never blocks the loop.
  void arm_store_retry() {
    if (store_retry_armed_) return;
    store_retry_armed_ = true;
    store_retry_delay_ = std::clamp(store_retry_delay_ * 2, std::chrono::milliseconds(250),
                                    std::chrono::milliseconds(30000));
    store_retry_timer_.expires_after(store_retry_delay_);
    store_retry_timer_.async_wait([this](const boost::system::error_code& ec) {
      store_retry_armed_ = false;
      if (ec) return;
      while (!orphans_.empty()) {
        auto result = store_.commit_progress(orphans_.front(), unix_now());
        if (!result) {
          store_failed(result.error().message);
          arm_store_retry();
          return;
        }
        store_recovered();
        for (const auto& row : orphans_.front().events) ++metrics_.events[{row.kind, row.phase}];
        if (dispatcher_ && *result > 0) dispatcher_->poke();
        orphans_.pop_front();
      }
      std::set<std::string> paths;
      paths.swap(rewound_);
      for (const std::string& path : paths) {
        if (auto it = files_.find(path); it != files_.end()) read_file(*it->second);
      }
      if (rescan_on_retry_) {
        rescan_on_retry_ = false;
        scan_all();
      }
    });
  }

  db::Progress progress_of(Tracked& file, std::vector<parsers::OomEvent> events) {
    db::Progress progress;
    progress.file_id = file.file_id;
    progress.job_id = file.job.job_id;
    progress.run_id = file.job.run_id;
    progress.generation = file.generation;
    progress.offset = file.analyzer->resume_offset();
    progress.line = file.analyzer->resume_line();
    progress.analyzer_state = file.analyzer->checkpoint();
    progress.anchor = anchor_of(file.fd, progress.offset);
    if (!file.fingerprinted) {
      // A new file (or a new generation after a truncation) has no head to compare until a KiB
      // exists; the store forgets the old head meanwhile.
      struct stat st {};
      if (::fstat(file.fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= kFingerprintBytes) {
        progress.fingerprint.emplace(fingerprint_of(file.fd, kFingerprintBytes),
                                     static_cast<int64_t>(kFingerprintBytes));
      } else {
        progress.fingerprint.emplace("", 0);
      }
    }
    progress.outcome = std::string(parsers::to_string(file.analyzer->outcome_so_far()));
    for (const auto& alert : config_.alerts) progress.receivers.push_back(alert.name);
    if (const parsers::Trainer trainer = file.analyzer->trainer();
        trainer != parsers::Trainer::kUnknown && trainer != file.stored_trainer) {
      // The trainer is known once the log shows it; the job row follows.
      if (store_.upsert_job(file.job.name, std::string(parsers::to_string(trainer)),
                            fs::path(file.path).parent_path().string(), unix_now())) {
        file.stored_trainer = trainer;
      }
    }
    if (!events.empty()) {
      // The config as it is now: a new snapshot when it changed since the last event.
      refresh_config(file, rule_config(file));
      snapshot(file);
      progress.snapshot_id = file.job.snapshot_id;
    }
    for (const parsers::OomEvent& event : events) {
      parsers::LogAnalysis single;
      single.trainer = file.analyzer->trainer();
      single.arguments = file.analyzer->arguments();
      single.events = {event};
      triage::TriageInput input{&single, file.job.config ? &*file.job.config : nullptr,
                                file.job.config_problem};
      input.tried_and_failed = tried_and_failed(file, event);
      const std::vector<triage::Fix> fixes = triage::rank_fixes(input);
      nlohmann::ordered_json fixes_json = nlohmann::ordered_json::array();
      for (const auto& fix : fixes) fixes_json.push_back(fix_to_json(fix));
      const auto dump = [](const nlohmann::ordered_json& j) {
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      };
      db::EventRow row;
      row.offset = event.offset;
      row.model_family = file.job.config ? std::string(parsers::to_string(file.job.config->family))
                                         : "unknown";
      row.kind = parsers::to_string(event.kind);
      row.phase = parsers::to_string(event.phase);
      row.step = event.step;
      row.recovered = event.recovered;
      row.event_json = dump(event_to_json(event));
      row.fixes_json = dump(fixes_json);
      progress.events.push_back(std::move(row));
      const std::string step =
          event.step ? (event.total_steps ? fmt::format(" at step {}/{}", *event.step, *event.total_steps)
                                          : fmt::format(" at step {}", *event.step))
                     : "";
      log_line(event.recovered ? 4 : 3, "job {}: {} OOM{} in {}{} ({}:{}){}", file.job.name,
               parsers::to_string(event.kind), event.recovered ? " (recovered)" : "",
               parsers::to_string(event.phase), step, file.path, event.line,
               fixes.empty() ? "" : "; top fix: " + fixes.front().id);
    }
    return progress;
  }

  // The fixes this run carried from the previous run's crash, when it crashed again in the same
  // phase: the ranker puts them last so that the next lever leads.
  std::vector<std::string> tried_and_failed(const Tracked& file, const parsers::OomEvent& event) {
    if (event.recovered || file.job.files.empty()) return {};
    auto story = store_.job_story(file.job.name);
    if (!story || !*story) return {};
    return daemon::tried_and_failed(**story, file.job.run_id, event, file.job.files);
  }

  void arm_reads() {
    if (scheduled_reads_.empty()) return;
    read_timer_.expires_at(scheduled_reads_.begin()->first);
    read_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      const auto now = Clock::now();
      while (!scheduled_reads_.empty() && scheduled_reads_.begin()->first <= now) {
        const std::string path = scheduled_reads_.begin()->second;
        scheduled_reads_.erase(scheduled_reads_.begin());
        if (auto it = files_.find(path); it != files_.end()) {
          it->second->read_scheduled = false;
          read_file(*it->second);
        }
      }
      arm_reads();
    });
  }

  void arm_checkpoint() {
    if (checkpoint_armed_) return;
    checkpoint_armed_ = true;
    checkpoint_timer_.expires_after(std::chrono::seconds(1));
    checkpoint_timer_.async_wait([this](const boost::system::error_code& ec) {
      checkpoint_armed_ = false;
      if (ec) return;
      std::vector<db::Progress> batch;
      std::vector<Tracked*> files;
      for (auto& [path, file] : files_) {
        if (!file->dirty) continue;
        batch.push_back(progress_of(*file, {}));
        files.push_back(file.get());
      }
      if (batch.empty()) return;
      if (auto r = store_.commit_progress(batch, unix_now()); !r) {
        store_failed(r.error().message);
        for (Tracked* file : files) rewind(*file);
        return;
      }
      store_recovered();
      for (size_t i = 0; i < files.size(); ++i) committed(*files[i], batch[i]);
    });
  }

  // --- timers and signals --------------------------------------------------------------------
  void arm_rescan() {
    rescan_timer_.expires_after(std::chrono::seconds(config_.rescan_seconds));
    rescan_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      scan_all();
      for (auto& [path, file] : files_) read_file(*file);
      write_textfile();
      notify(fmt::format("STATUS=watching {} log(s)", files_.size()));
      arm_rescan();
    });
  }

  void arm_settle() {
    std::optional<Clock::time_point> earliest;
    for (auto& [path, file] : files_) {
      if (file->settle_at && (!earliest || *file->settle_at < *earliest)) earliest = file->settle_at;
    }
    if (!earliest) return;
    settle_timer_.expires_at(*earliest);
    settle_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      const auto now = Clock::now();
      for (auto& [path, file] : files_) {
        if (file->settle_at && *file->settle_at <= now) {
          file->settle_at.reset();
          file->analyzer->settle();
          commit(*file, file->analyzer->take_events());
        }
      }
      arm_settle();
    });
  }

  void wait_signals() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      if (signal == SIGHUP) {
        reload();
        wait_signals();
        return;
      }
      log_line(6, "signal {}: draining {} file(s) and stopping", signal, files_.size());
      notify("STOPPING=1");
      for (auto& [path, file] : files_) {
        read_file(*file);
        commit(*file, file->analyzer->take_events());
      }
      write_textfile();
      io_.stop();
    });
  }

  void reload() {
    notify("RELOADING=1");
    reload_config();
    notify(fmt::format("READY=1\nSTATUS=watching {} log(s)", files_.size()));
  }

  void reload_config() {
    if (config_.source == "inline") {
      log_line(5, "SIGHUP: the inline config has nothing to reload");
      return;
    }
    auto fresh = load_daemon_config(config_.source);
    if (!fresh) {
      log_line(3, "SIGHUP: keeping the old config: {}", fresh.error().message);
      return;
    }
    // Files keep their rule pointer into the old config: drain and re-track them under the new one.
    for (auto& [path, file] : files_) {
      read_file(*file);
      commit(*file, file->analyzer->take_events());
    }
    files_.clear();
    auto dispatcher = std::make_unique<AlertDispatcher>(io_, store_, *fresh, &metrics_);
    std::string error;
    if (!dispatcher->start(error)) {
      log_line(3, "SIGHUP: keeping the old alert receivers: {}", error);
    } else {
      // The old dispatcher may have a request in flight: it lives until that answers, and the
      // new one waits so that the row is not sent twice.
      dispatcher->hold();
      if (dispatcher_) {
        AlertDispatcher* old = dispatcher_.get();
        retired_dispatchers_.push_back(std::move(dispatcher_));
        old->retire([this, old] {
          std::erase_if(retired_dispatchers_, [old](const auto& d) { return d.get() == old; });
          if (retired_dispatchers_.empty() && dispatcher_) dispatcher_->release();
        });
      }
      dispatcher_ = std::move(dispatcher);
    }
    config_ = std::move(*fresh);
    scan_all();
    log_line(5, "SIGHUP: config reloaded from {} ({} rule(s))", config_.source, config_.watch.size());
  }

  asio::io_context& io_;
  db::Store& store_;
  DaemonConfig config_;
  bool verbose_;
  asio::posix::stream_descriptor inotify_;
  asio::steady_timer rescan_timer_;
  asio::steady_timer settle_timer_;
  asio::steady_timer checkpoint_timer_;
  bool checkpoint_armed_ = false;
  asio::steady_timer read_timer_;
  asio::steady_timer batch_timer_;
  std::multimap<Clock::time_point, std::string> scheduled_reads_;
  asio::signal_set signals_;
  std::array<char, 64 * 1024> inotify_buffer_{};
  std::vector<char> buffer_ = std::vector<char>(kReadChunk);
  std::map<std::string, std::unique_ptr<Tracked>> files_;
  std::unique_ptr<AlertDispatcher> dispatcher_;
  std::vector<std::unique_ptr<AlertDispatcher>> retired_dispatchers_;  // draining after SIGHUP
  Metrics metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  asio::steady_timer watchdog_timer_{io_};
  std::chrono::microseconds watchdog_interval_{0};
  int textfile_error_logged_ = 0;
  std::map<int, std::string> watches_;
  std::set<std::string> watched_dirs_;
  std::set<std::string> unreadable_logged_;
  std::set<std::string> warned_configs_;
  std::map<std::string, std::string> config_texts_;
  bool first_start_ = false;
  bool watch_limit_logged_ = false;
  size_t max_open_ = 4096;  // log descriptors open at once (start() derives it from the limit)
  bool open_hit_limit_ = false;  // the last reopen failed for want of descriptors
  bool fd_limit_logged_ = false;
  asio::steady_timer store_retry_timer_{io_};
  std::chrono::milliseconds store_retry_delay_{0};
  bool store_retry_armed_ = false;
  bool store_failing_ = false;
  bool rescan_on_retry_ = false;  // a log could not be registered: scan again on the retry
  std::set<std::string> rewound_;
  std::deque<db::Progress> orphans_;
};

}  // namespace

int run_daemon(DaemonConfig config, const std::string& store_path, bool verbose) {
  // One descriptor per followed log: lift the soft limit to the hard one (systemd: 1024/512K).
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::error_code ec;
  const fs::path state_dir = fs::path(store_path).parent_path();
  fs::create_directories(state_dir, ec);
  // One daemon per state dir: a second one would post every alert twice.
  const std::string lock_path = (state_dir / "oomtriage.lock").string();
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    log_line(3, "cannot open store {}: {} (its lock file {})", store_path, std::strerror(errno),
             lock_path);
    return 2;
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t n = ::pread(lock_fd, pid, sizeof pid - 1, 0);
    log_line(3, "another oomtriage daemon{} already uses {}; not starting a second one",
             n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<size_t>(n))) : "",
             state_dir.string());
    ::close(lock_fd);
    return 1;
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd, 0) == 0) (void)!::pwrite(lock_fd, pid.data(), pid.size(), 0);
  // A short busy timeout: a locked store is retried by the loop's own backoff, not waited on.
  auto store = db::Store::open(store_path, 250);
  if (!store) {
    log_line(3, "store {}: {}", store_path, store.error().message);
    return 2;
  }
  asio::io_context io;
  Daemon daemon(io, **store, std::move(config), verbose);
  if (!daemon.start()) return 1;
  io.run();
  return 0;
}

}  // namespace oomtriage::daemon
