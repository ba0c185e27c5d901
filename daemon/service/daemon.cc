// daemon/service/daemon.cc: the daemon's story, wiring its parts. run_daemon() takes the instance
// lock, opens the store and runs the Asio loop; Daemon reacts to the directory watcher's changes,
// the read pacer's due reads, the settle, checkpoint, rescan and store-retry timers, and signals.
// Each read of a file ends in one store transaction through the event sink: its new events (with
// their outbox rows), its resume offset, anchor and analyzer checkpoint.
#include "daemon/service/daemon.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/common/clock.h"
#include "daemon/common/metrics.h"
#include "daemon/common/read_buffer.h"
#include "daemon/common/version.h"
#include "daemon/net/metrics_server.h"
#include "daemon/render/journal_log.h"
#include "daemon/service/fleet_shipper.h"
#include "daemon/service/wal_checkpointer.h"
#include "daemon/service/directory_watcher.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/file_follower.h"
#include "daemon/service/file_identity.h"
#include "daemon/service/job_history.h"
#include "daemon/service/job_locator.h"
#include "daemon/service/read_pacer.h"
#include "daemon/service/service_manager.h"
#include "daemon/service/slurm_queue.h"
#include "daemon/service/ui_healer.h"
#include "db/store.h"
#include "parsers/log_analyzer.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 1 << 20;
constexpr size_t kReadBudgetPerTurn = 8 << 20;  // then other files get a turn
// A log whose name went away (rotated, or deleted while its writer still has it open) is read
// on until it has been quiet this long: a writer that has not reopened its log yet still writes
// to the old file (Fluent Bit's Rotate_Wait, Filebeat's close_inactive).
constexpr auto kLeavingQuiet = std::chrono::seconds(30);
constexpr auto kLeavingPoll = std::chrono::milliseconds(250);
// Offsets of files that only made progress (no event, no new outcome) are written this often,
// all in one transaction: after a kill -9 at most this much log is read again (events are unique
// per offset), and 1,000 busy logs cost ~33 row updates a second, not 1,000. (The analyzer's
// state is JSON; at 10 s its writing was a third of the daemon's CPU under that load.)
constexpr auto kCheckpointInterval = std::chrono::seconds(30);
constexpr int kPollSlices = 20;
// The WAL is copied into the database this often, on its own thread (wal_checkpointer.h).
constexpr auto kWalCheckpointInterval = std::chrono::seconds(2);

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

// A followed log: the follower (identity, reads, checkpoints), the job it belongs to, and what
// the loop needs to schedule it.
struct Tracked {
  std::unique_ptr<FileFollower> follower;
  const WatchRule* rule = nullptr;
  int64_t file_id = 0;
  Job job;
  std::optional<Clock::time_point> settle_at;
  parsers::Trainer stored_trainer = parsers::Trainer::kUnknown;
  // Progress not yet committed: offsets are written once per kCheckpointInterval unless an
  // event or a new outcome comes (a crash re-reads that much; events are unique per offset).
  bool dirty = false;
  bool queued = false;  // already in this inotify batch's read list
  Clock::time_point last_read{};
  Pace pace;
  int watch = -1;       // its inotify watch while it is quiet
  bool polled = false;  // in the busy list
  std::optional<parsers::Outcome> committed_outcome;
  bool read_error_logged = false;
  // The run's fatal OOM as this daemon saw it, and its ranked fixes: what healing starts from.
  std::optional<parsers::OomEvent> fatal_event;
  std::vector<triage::Fix> fatal_fixes;
  bool fatal_untold = false;  // the healer has not heard of it yet
  // Leaving (its name went away): when it last grew, and whether it was deleted.
  Clock::time_point last_growth{};
  bool deleted = false;

  const std::string& path() const { return follower->path(); }
  parsers::LogAnalyzer& analyzer() { return follower->analyzer(); }

  // The outcome a commit stores. An open incident's event is not stored yet (its traceback may
  // still be coming), so the run keeps the outcome it had: a reader of the store never sees a
  // run crashed_oom without the event that decided it (the two share one transaction).
  std::optional<parsers::Outcome> storable_outcome() {
    if (analyzer().has_open_incident()) return committed_outcome;
    return analyzer().outcome_so_far();
  }
};

enum class StartAt { kBeginning, kEnd, kStored };

class Daemon {
 public:
  Daemon(asio::io_context& io, db::Store& store, std::string store_path, DaemonConfig config,
         bool verbose)
      : io_(io),
        store_(store),
        store_path_(std::move(store_path)),
        config_(std::move(config)),
        verbose_(verbose),
        pacer_(std::chrono::milliseconds(config_.read_interval_ms)),
        sink_(store, metrics_, std::bind_front(&Daemon::poke_dispatcher, this), unix_now),
        inotify_(io),
        signals_(io, SIGINT, SIGTERM, SIGHUP) {}

  ~Daemon() {
    // The watcher owns the inotify descriptor.
    if (inotify_.is_open()) inotify_.release();
  }

  bool start() {
    metrics_.version = kVersion;
    // The WAL is checkpointed off the loop; SQLite's own checkpoint stays as a safety net.
    // SQLite's own checkpoint is only a safety net under the checkpointer thread: a store that
    // refuses the setting keeps SQLite's default (1,000 pages), which is also safe.
    note_store_failure("set_auto_checkpoint",
                       store_.set_auto_checkpoint(WalCheckpointer::kLoopAutoCheckpointPages));
    wal_checkpointer_ = std::make_unique<WalCheckpointer>(store_path_, kWalCheckpointInterval);
    for (const std::string& warning : config_.warnings) log_line(kWarning, "{}", warning);
    max_open_ = log_descriptor_budget();
    if (!config_.metrics_listen.empty()) {
      metrics_server_ = std::make_unique<MetricsServer>(io_, [this] { return render_metrics(); });
      if (auto listening = metrics_server_->listen(config_.metrics_listen); !listening) {
        log_line(kError, "{}", listening.error().message);
        return false;
      }
    }
    dispatcher_ = std::make_unique<AlertDispatcher>(io_, store_, config_, &metrics_);
    if (auto started = dispatcher_->start(); !started) {
      log_line(kError, "{}", started.error().message);
      return false;
    }
    dispatcher_->poke();
    if (config_.heal.enabled()) healer_ = make_healer();
    if (auto watcher = DirectoryWatcher::open(); !watcher) {
      log_line(kWarning, "{}: polling every {} s", watcher.error().message, config_.rescan_seconds);
    } else {
      watcher_.emplace(std::move(*watcher));
      inotify_.assign(watcher_->fd());
      wait_inotify();
    }
    // Only the very first scan of this store reads present logs from their end; a store that
    // exists but has no jobs yet is not a first start (a crash may have come while down).
    auto marker = store_.meta("first_scan_done");
    first_start_ = marker && !*marker && !config_.backfill;
    if (config_.backfill && marker && !*marker) {
      log_line(kNotice, "backfill: reading the logs already here from their beginning");
    }
    // Before the first scan: what it stores must be queued for the fleet store.
    if (!start_fleet_shipper()) return false;
    scan_all();
    start_slurm_poller();
    if (first_start_) mark_first_scan_done();
    first_start_ = false;
    drain_rotated_while_down();
    arm_rescan();
    wait_signals();
    log_line(kInfo, "watching {} file(s) from {} rule(s); store ready", files_.size(),
             config_.watch.size());
    notify_service_manager(fmt::format("READY=1\nSTATUS=watching {} log(s)", files_.size()));
    if (auto interval = watchdog_ping_interval()) {
      watchdog_interval_ = *interval;
      arm_watchdog();
    }
    write_textfile();
    return true;
  }

 private:
  // Its verdicts go out through whichever dispatcher is current.
  std::unique_ptr<UiHealer> make_healer() {
    return std::make_unique<UiHealer>(io_, store_, config_.heal, [this](AlertContent alert) {
      if (dispatcher_) dispatcher_->send_once(std::move(alert));
    });
  }

  // New events were stored: their alerts are due, and the fleet store wants them.
  void poke_dispatcher() {
    if (dispatcher_) dispatcher_->poke();
    if (fleet_) fleet_->poke();
  }

  // `store: postgresql://...`: the outbox queues for it and a thread ships it. Without one the
  // outbox is off (and emptied), so a node that never joins a fleet queues nothing.
  bool start_fleet_shipper() {
    const std::string host = config_.host.empty() ? this_host() : config_.host;
    // A reload that changes neither keeps the shipper: stopping it would wait for its call to
    // the database, and this loop never waits on the network.
    if (fleet_ && fleet_->url() == config_.store && fleet_->host() == host) return true;
    fleet_.reset();
    if (auto r = store_.set_fleet_outbox(config_.store); !r) {
      log_line(kError, "store {}: {}", store_path_, r.error().message);
      return false;
    }
    if (config_.store.empty()) return true;
    FleetShipper::Options options;
    options.url = config_.store;
    options.store_path = store_path_;
    options.host = host;
    fleet_ = std::make_unique<FleetShipper>(std::move(options));
    return true;
  }

  // --- service manager and metrics -----------------------------------------------------------
  void arm_watchdog() {
    watchdog_timer_.expires_after(watchdog_interval_);
    watchdog_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      notify_service_manager("WATCHDOG=1");
      arm_watchdog();
    });
  }

  std::string render_metrics() {
    metrics_.files_watched = files_.size();
    metrics_.fleet_configured = fleet_ != nullptr;
    if (fleet_) {
      metrics_.fleet_backlog = fleet_->backlog();
      metrics_.fleet_shipped = fleet_->shipped();
      metrics_.fleet_up = fleet_->up();
    }
    if (auto pending = store_.count_alerts("pending"))
      metrics_.outbox_pending = static_cast<uint64_t>(*pending);
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
        if (textfile_error_logged_++ == 0) log_line(kWarning, "cannot write {}", tmp);
        return;
      }
    }
    std::error_code ec;
    fs::rename(tmp, config_.metrics_textfile, ec);
  }

  // --- discovery ---------------------------------------------------------------------------
  void scan_all() {
    for (const auto& [path, rule] : slurm_paths_) {
      ensure_watch(fs::path(path).parent_path().string());
      if (!files_.count(path)) track(path, *rule, StartAt::kStored);
    }
    for (const WatchRule& rule : config_.watch) {
      if (rule.source == "slurm") continue;  // its files come from squeue
      ensure_watch(static_prefix(rule.logs));
      for (const std::string& dir : glob_paths(fs::path(rule.logs).parent_path().string(), true)) {
        ensure_watch(dir);
      }
      for (const std::string& path : glob_paths(rule.logs, false)) {
        if (!files_.count(path)) track(path, rule, first_start_ ? StartAt::kEnd : StartAt::kStored);
      }
    }
    // Identity checks catch renames, deletes and truncations inotify did not report.
    std::vector<std::string> paths;
    for (const auto& [path, file] : files_) paths.push_back(path);
    for (const std::string& path : paths) check_identity(path);
  }

  // Whether a rule's logs may sit in `dir` or below it: its folders match the first folders of
  // the rule's pattern (/out/*/*/log.txt: /out/a and /out/a/b, not /out/a/b/c).
  bool may_hold_logs(const std::string& dir) const {
    const auto parts_of = [](const fs::path& path) {
      std::vector<std::string> parts;
      for (const auto& part : path) {
        if (const std::string text = part.string(); !text.empty() && text != "/")
          parts.push_back(text);
      }
      return parts;
    };
    const std::vector<std::string> folders = parts_of(dir);
    for (const WatchRule& rule : config_.watch) {
      if (rule.source == "slurm") continue;
      const std::vector<std::string> pattern = parts_of(fs::path(rule.logs).parent_path());
      if (folders.size() > pattern.size()) continue;
      bool match = true;
      for (size_t i = 0; i < folders.size() && match; ++i) {
        match = ::fnmatch(pattern[i].c_str(), folders[i].c_str(), 0) == 0;
      }
      if (match) return true;
    }
    return false;
  }

  // A folder appeared (a new job's): watch it and what below it may hold logs, and follow the
  // logs already there. Only that folder is looked at; a full rescan would stat and read every
  // followed log, which under 1,000 busy logs delays the alert this folder may be about to need.
  void discover_under(const std::string& folder) {
    constexpr size_t kMaxFolders = 256;  // more than a job's tree: the full rescan does the rest
    std::vector<std::string> pending = {folder};
    size_t looked = 0;
    while (!pending.empty()) {
      if (++looked > kMaxFolders) {
        scan_all();
        return;
      }
      const std::string dir = std::move(pending.back());
      pending.pop_back();
      if (!may_hold_logs(dir)) continue;
      ensure_watch(dir);
      std::error_code ec;
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string path = it->path().string();
        std::error_code type_ec;
        if (it->is_directory(type_ec)) {
          pending.push_back(path);
        } else if (!files_.count(path)) {
          if (const WatchRule* rule = rule_of(path)) track(path, *rule, StartAt::kBeginning);
        }
      }
    }
  }

  // The rule a path belongs to: a Slurm job's output file squeue named, or a rule's glob.
  const WatchRule* rule_of(const std::string& path) const {
    if (auto it = slurm_paths_.find(path); it != slurm_paths_.end()) return it->second;
    return rule_for(config_.watch, path);
  }

  // The first `source: slurm` rule of the current config, if any.
  const WatchRule* slurm_rule() const {
    for (const WatchRule& rule : config_.watch) {
      if (rule.source == "slurm") return &rule;
    }
    return nullptr;
  }

  // squeue runs on its own thread while a `source: slurm` rule is configured.
  void start_slurm_poller() {
    slurm_poller_.reset();
    slurm_paths_.clear();
    const WatchRule* slurm = slurm_rule();
    if (!slurm) return;
    slurm_poller_ = std::make_unique<SlurmPoller>(
        std::chrono::seconds(slurm->poll_seconds),
        [this](Result<std::vector<SlurmJob>> jobs) {
          asio::post(io_, [this, jobs = std::move(jobs)] { on_slurm_jobs(jobs); });
        },
        [this](SlurmJob job, SlurmEnd end) {
          asio::post(io_, [this, job = std::move(job), end = std::move(end)] {
            on_slurm_ended(job, end);
          });
        });
  }

  // sacct's word on a job that left the queue. A CUDA OOM is in the log (sacct says FAILED);
  // a cgroup kill (OUT_OF_MEMORY) usually is too, as slurmstepd's "Detected 1 oom_kill event"
  // line, but when the log does not show it (the line went to another file, or the node lost
  // it) it becomes a host OOM at the log's end, in the phase and at the step the log was in.
  void on_slurm_ended(const SlurmJob& job, const SlurmEnd& end) {
    auto it = files_.find(job.stdout_path);
    if (it == files_.end()) return;
    Tracked& file = *it->second;
    if (verbose_)
      log_line(kDebug, "slurm job {} ended {} ({})", job.job_id, end.state, end.exit_code);
    read_file(file);  // all it wrote, before its last word
    parsers::LogAnalyzer& analyzer = file.analyzer();
    if (analyzer.has_open_incident()) {
      analyzer.settle();
      if (!commit(file, analyzer.take_events())) return;
    }
    if (end.state != "OUT_OF_MEMORY" || analyzer.outcome_so_far() == parsers::Outcome::kCrashedOom)
      return;
    analyzer.add_reported_event(
        parsers::OomKind::kHostKilled,
        fmt::format("Slurm job {} ended OUT_OF_MEMORY (sacct; exit code {}): the job's cgroup "
                    "reached its memory limit (host RAM) and the kernel killed it",
                    job.job_id, end.exit_code));
    // Its last word: kept by the sink if the store refuses, never read again from the file.
    commit(file, analyzer.take_events(), /*can_rewind=*/false);
  }

  void on_slurm_jobs(const Result<std::vector<SlurmJob>>& jobs) {
    const WatchRule* slurm = slurm_rule();
    if (!slurm) return;  // a reload took the rule away
    if (!jobs) {
      if (slurm_error_ != jobs.error().message) {
        log_line(kWarning, "slurm: {} (will ask again in {} s)", jobs.error().message,
                 slurm->poll_seconds);
        slurm_error_ = jobs.error().message;
      }
      return;
    }
    slurm_error_.clear();
    bool found = false;
    for (const SlurmJob& job : *jobs) {
      if (slurm_paths_.emplace(job.stdout_path, slurm).second) {
        found = true;
        if (verbose_) log_line(kDebug, "slurm job {} writes to {}", job.job_id, job.stdout_path);
      }
    }
    if (found) scan_all();
  }

  void ensure_watch(const std::string& dir) {
    if (!watcher_ || watcher_->watching(dir)) return;
    auto watched = watcher_->watch(dir);
    if (!watched && watched.error().code == ErrorCode::kIo && !watch_limit_logged_) {
      log_line(kWarning, "{}: those files are polled every {} s", watched.error().message,
               config_.rescan_seconds);
      watch_limit_logged_ = true;
    }
  }

  // Drains inotify as soon as it is readable. Busy logs are polled, not heard (read_pacer.h), so
  // the events that come are few: names, and the first write of a quiet log, which may be the
  // OOM line an alert waits for; no batching delay is added to it.
  void wait_inotify() {
    inotify_.async_wait(asio::posix::stream_descriptor::wait_read,
                        [this](const boost::system::error_code& ec) {
                          if (ec) {
                            if (ec != asio::error::operation_aborted) {
                              log_line(kError, "inotify wait failed: {}", ec.message());
                            }
                            return;
                          }
                          on_changes(watcher_->drain());
                          wait_inotify();
                        });
  }

  void on_changes(const std::vector<FsChange>& changes) {
    std::vector<std::string> written;
    std::vector<std::string> folders;
    bool rescan = false;
    for (const FsChange& change : changes) {
      switch (change.kind) {
        case FsChange::kRescan: rescan = true; break;
        case FsChange::kFolderAppeared: folders.push_back(change.path); break;
        case FsChange::kAppeared:
        case FsChange::kVanished:
          if (files_.count(change.path)) {
            check_identity(change.path);
          } else if (const WatchRule* rule = rule_of(change.path);
                     rule && change.kind == FsChange::kAppeared) {
            track(change.path, *rule, StartAt::kBeginning);
          }
          break;
        case FsChange::kFileWritten:
          if (auto it = by_watch_.find(change.watch);
              it != by_watch_.end() && !it->second->queued) {
            it->second->queued = true;
            written.push_back(it->second->path());
          }
          break;
      }
    }
    // A later change of the same batch may have let the file go (a write, then its deletion).
    for (const std::string& path : written) {
      if (auto it = files_.find(path); it != files_.end()) it->second->queued = false;
    }
    // A rescan may drop files (rotation): read only those still followed.
    if (rescan) {
      scan_all();
    } else {
      for (const std::string& folder : folders) discover_under(folder);
    }
    const auto now = Clock::now();
    for (const std::string& path : written) {
      auto it = files_.find(path);
      if (it == files_.end()) continue;
      Tracked& file = *it->second;
      // Read now, whatever follows: the first write after a quiet spell is where an OOM shows.
      read_file(file);
      if (pacer_.on_write(file.pace, now)) make_busy(file);
    }
  }

  // --- pace: quiet logs are watched, busy ones polled -----------------------------------------
  void watch_quietly(Tracked& file) {
    if (!watcher_ || file.watch >= 0) return;
    auto watch = watcher_->watch_file(file.path());
    if (!watch) {
      // Out of watches (or the name is gone): the log is polled instead.
      if (!file_watch_failed_logged_) {
        log_line(kWarning, "{}: {} and others are polled every {} ms", watch.error().message,
                 file.path(), pacer_.interval().count());
        file_watch_failed_logged_ = true;
      }
      file.pace.busy = true;
      poll(file);
      return;
    }
    file.watch = *watch;
    by_watch_[file.watch] = &file;
  }

  void unwatch(Tracked& file) {
    if (file.watch < 0) return;
    by_watch_.erase(file.watch);
    if (watcher_) watcher_->unwatch_file(file.watch);
    file.watch = -1;
  }

  // Its writes come faster than the interval: stop hearing each one, read it once per interval.
  void make_busy(Tracked& file) {
    unwatch(file);
    poll(file);
  }

  void poll(Tracked& file) {
    if (!file.polled) {
      file.polled = true;
      busy_.push_back(&file);
    }
    arm_polls();
  }

  // The log no longer exists for the loop: no watch, no poll.
  void forget(Tracked& file) {
    unwatch(file);
    if (file.polled) {
      file.polled = false;
      std::erase(busy_, &file);
    }
  }

  // Busy logs are polled in slices spread over the interval, each once per interval, so the
  // loop is never held by 1,000 reads in a row while a quiet log's OOM line waits.
  void arm_polls() {
    if (polls_armed_ || busy_.empty()) return;
    polls_armed_ = true;
    const auto slice = std::max(pacer_.interval() / kPollSlices, std::chrono::milliseconds(10));
    poll_timer_.expires_after(slice);
    poll_timer_.async_wait([this](const boost::system::error_code& ec) {
      polls_armed_ = false;
      if (ec) return;
      // A read never ends a followed file (names are the watcher's and the rescan's business),
      // so the list is walked by index and pruned after; the quiet ones are watched last.
      std::vector<Tracked*> quiet;
      const size_t n = busy_.size();
      const size_t take = (n + kPollSlices - 1) / kPollSlices;
      if (poll_cursor_ >= n) poll_cursor_ = 0;
      const size_t end = std::min(n, poll_cursor_ + take);
      for (size_t i = poll_cursor_; i < end; ++i) {
        Tracked* file = busy_[i];
        const uint64_t bytes = read_file(*file);
        if (file->pace.busy && pacer_.on_poll(file->pace, bytes)) {
          file->polled = false;
          quiet.push_back(file);
        } else if (!file->pace.busy) {
          file->polled = false;  // polled once for want of a descriptor
        }
      }
      // Only this slice's files can have left the list; the others are not touched (1,000
      // Tracked objects walked 20 times a second were a cache miss each, 15% of the loop's CPU).
      const auto first = busy_.begin() + static_cast<std::ptrdiff_t>(poll_cursor_);
      const auto last = busy_.begin() + static_cast<std::ptrdiff_t>(end);
      const auto kept =
          std::remove_if(first, last, [](const Tracked* file) { return !file->polled; });
      poll_cursor_ = end - static_cast<size_t>(last - kept);
      busy_.erase(kept, last);
      for (Tracked* file : quiet) {
        // Watched, then read once more for what came before the watch.
        watch_quietly(*file);
        if (file->watch >= 0) read_file(*file);
      }
      arm_polls();
    });
  }

  // --- files -------------------------------------------------------------------------------
  void track(const std::string& path, const WatchRule& rule, StartAt start) {
    const int fd = open_within_budget(path, nullptr);
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
      store_refused(stored.error().message);
      return;
    }
    const auto& row = *stored;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    // The same content as before: the bytes before the stored offset. A file rewritten in place
    // or a reused inode fails it. (The anchor is written with the offset in one transaction, so
    // it is never stale; the head fingerprint may lag a truncation by one commit and is not
    // trusted alone.)
    const bool same_file = row && row->offset <= size && anchor_of(fd, row->offset) == row->anchor;
    auto file = std::make_unique<Tracked>();
    file->rule = &rule;
    if (start == StartAt::kStored && same_file) {
      // Resume where the last run left off.
      file->follower = std::make_unique<FileFollower>(
          path, rule.trainer, fd, st.st_dev, st.st_ino,
          Checkpoint{row->offset, row->line, row->analyzer_state, row->generation},
          rule.source == "kubernetes");
      file->file_id = row->id;
      if (row->fingerprint_len >= static_cast<int64_t>(kFingerprintBytes))
        file->follower->set_fingerprinted();
      if (!register_job(*file, row->run_id)) return;
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
      if (rule.source == "kubernetes" && start == StartAt::kBeginning) {
        // kubelet renamed the container's log and the runtime opened a new one: the stream goes
        // on here, with the decoder's and the analyzer's state at the old file's end.
        if (std::optional<Checkpoint> carried = take_over_rotated(path)) {
          begin.line = carried->line;
          begin.analyzer_state = carried->analyzer_state;
        }
      }
      file->follower = std::make_unique<FileFollower>(path, rule.trainer, fd, st.st_dev, st.st_ino,
                                                      begin, rule.source == "kubernetes");
      if (head) file->follower->set_fingerprinted();
      if (!register_job(*file, 0)) return;
      fresh.job_id = file->job.job_id;
      fresh.run_id = file->job.run_id;
      auto id = store_.insert_file(fresh, unix_now());
      if (!id) {
        store_refused(id.error().message);
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
    watch_quietly(ref);  // before the first read: no write falls between the two
    read_file(ref);
  }

  // A log followed before a restart may have been rotated while the daemon was down: find it
  // where rotated logs go by (device, inode) and the bytes before the stored offset, and read
  // what it got after that offset.
  void drain_rotated_while_down() {
    auto rows = store_.active_files();
    if (!rows) return;
    for (const db::FileRow& row : *rows) {
      if (auto it = files_.find(row.path); it != files_.end() && it->second->file_id == row.id) {
        continue;
      }
      const WatchRule* rule = rule_of(row.path);
      const auto same = [&row](int fd) { return anchor_of(fd, row.offset) == row.anchor; };
      const std::optional<std::string> found =
          rule ? find_by_identity(rotation_folders(row.path, *rule), row.dev, row.ino, same)
               : std::nullopt;
      const int fd = found ? open_log(*found) : -1;
      if (fd < 0) {
        // Unmarked, it is looked for again at the next start: counted, nothing lost.
        note_store_failure("set_file_state", store_.set_file_state(row.id, "gone", unix_now()));
        continue;
      }
      Tracked file;
      file.rule = rule;
      file.file_id = row.id;
      // The job is named after where the log lived.
      file.follower = std::make_unique<FileFollower>(
          row.path, rule->trainer, fd, row.dev, row.ino,
          Checkpoint{row.offset, row.line, row.analyzer_state, row.generation},
          rule->source == "kubernetes");
      if (!register_job(file, row.run_id)) continue;
      if (verbose_)
        log_line(kDebug, "draining {} (rotated to {} while oomtriage was down)", row.path, *found);
      finish(file, "rotated");
    }
  }

  // The folder that tells a job from another of its name: its log's. A container log's job is
  // named by its namespace and owner, and each restarted pod logs to a new folder: the name alone.
  static std::string home_of(const Tracked& file) {
    if (file.rule->source == "kubernetes") return "";
    return fs::path(file.path()).parent_path().string();
  }

  // Finds or creates the job, its config snapshot and (for a new file) a new run.
  bool register_job(Tracked& file, int64_t run_id) {
    const int64_t now = unix_now();
    Job& job = file.job;
    job.name = expand_template(file.rule->job, file.path());
    refresh_config(file);
    const std::string trainer(parsers::to_string(file.rule->trainer));
    auto id = store_.upsert_job(job.name, home_of(file), trainer,
                                fs::path(file.path()).parent_path().string(), now);
    if (!id) {
      // Not followed yet: the store's retry scans again (nothing was read, nothing is lost).
      store_refused(id.error().message);
      return false;
    }
    job.job_id = *id;
    snapshot(file);
    if (run_id != 0) {
      job.run_id = run_id;
      return true;
    }
    if (file.rule->source == "kubernetes") {
      // kubelet rotates <restart>.log by renaming it and starting a new one of the same name:
      // the container's run goes on (a restart is the next number, a new run).
      if (auto story = store_.job_story_by_id(job.job_id); story && *story) {
        for (auto run = (*story)->runs.rbegin(); run != (*story)->runs.rend(); ++run) {
          if (run->log_path == file.path()) {
            job.run_id = run->id;
            return true;
          }
        }
      }
    }
    auto run = store_.start_run(job.job_id, file.path(), job.snapshot_id, now);
    if (!run) {
      store_refused(run.error().message);
      return false;
    }
    job.run_id = *run;
    return true;
  }

  // A store refusal before a file was followed: nothing was read, so a rescan on the store's
  // retry picks the file up again.
  void store_refused(const std::string& message) {
    sink_.refused(message);
    rescan_on_retry_ = true;
    arm_store_retry();
  }

  // The same registry as scan and fix: the rule's `config:` when it names an existing file, the
  // log's own facts, the trainer the rule or the log names.
  void refresh_config(Tracked& file) {
    std::optional<fs::path> explicit_config;
    if (!file.rule->config.empty()) {
      const std::string config_path = expand_template(file.rule->config, file.path());
      std::error_code ec;
      if (fs::exists(config_path, ec)) explicit_config = config_path;
    }
    const parsers::LogAnalysis facts = file.analyzer().job_facts();
    const parsers::Trainer trainer =
        file.rule->trainer != parsers::Trainer::kUnknown ? file.rule->trainer : facts.trainer;
    auto located = locate_job(file.path(), explicit_config, trainer, facts);
    if (!located && warned_configs_.insert(located.error().message).second) {
      ++metrics_.parse_errors["bad_job_config"];
      log_line(kWarning, "{}; triaging without it", located.error().message);
    }
    JobLookup lookup = located ? std::move(*located) : JobLookup{};
    if (!located) lookup.config_problem = located.error().message;
    Job& job = file.job;
    if (!lookup.warning.empty() && warned_configs_.insert(lookup.warning).second) {
      ++metrics_.parse_errors["bad_job_config"];
      log_line(kWarning, "{}", lookup.warning);  // each bad field once, the job goes on
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

  // Reads what the file grew by (bounded per turn), and commits what it produced. Returns the
  // bytes read.
  uint64_t read_file(Tracked& file) {
    if (rewound_.count(file.path())) return 0;  // waiting for the store; the retry reads it
    if (!ensure_open(file)) {
      // Out of descriptors for the moment (every open log busy with an incident or unsaved
      // progress): the next poll tries again, when one of them may be idle.
      if (open_hit_limit_) poll(file);
      return 0;
    }
    file.last_read = Clock::now();
    FileFollower& follower = *file.follower;
    FileFollower::Read read = follower.read(kReadBudgetPerTurn, buffer_.span());
    if (read.rewritten) {
      // Shorter, or other bytes where the last read ended: truncated (copytruncate, perhaps
      // already written past the old offset) or rewritten in place. Read it again from 0.
      log_line(kNotice, "{} was truncated (copytruncate?): reading it again from the start",
               file.path());
      follower.analyzer().settle();
      commit(file, follower.analyzer().take_events(), /*can_rewind=*/false);
      follower.restart();
      read = follower.read(kReadBudgetPerTurn, buffer_.span());
    }
    if (read.error && !file.read_error_logged) {
      log_line(kWarning, "read {}: {}", file.path(), std::strerror(read.error));
      file.read_error_logged = true;
    }
    if (read.bytes > 0) file.last_growth = file.last_read;
    metrics_.bytes_read += read.bytes;
    metrics_.records += follower.take_new_records();
    if (const uint64_t cut = follower.take_new_cut_records()) {
      metrics_.parse_errors["record_too_long"] += cut;
      log_line(kWarning, "{}: a record longer than {} bytes was cut", file.path(),
               parsers::kMaxRecordBytes);
    }
    std::vector<parsers::OomEvent> events = follower.analyzer().take_events();
    if (healer_ && healer_->awaits_step(file.job.name)) {
      if (const auto step = follower.analyzer().training_step())
        healer_->training_step(file.job.name, file.job.run_id, *step, file.path());
    }
    if (!events.empty() || file.storable_outcome() != file.committed_outcome) {
      if (!commit(file, std::move(events))) return read.bytes;  // rewound: read again later
    } else if (read.bytes > 0) {
      file.dirty = true;
      arm_checkpoint();
    }
    if (follower.analyzer().has_open_incident()) {
      file.settle_at = Clock::now() + std::chrono::milliseconds(config_.settle_ms);
      arm_settle();
    }
    if (read.more) {
      asio::post(io_, [this, path = file.path()] {
        if (auto it = files_.find(path); it != files_.end()) read_file(*it->second);
      });
    }
    return read.bytes;
  }

  // The path may now be another file (rotation, restart) or nothing (deleted). The old file
  // leaves: it is read on while its writer may still write to it, then finished.
  void check_identity(const std::string& path) {
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
      // A busy log is read within the interval anyway, and that read sees a truncation too.
      if (!file.polled) read_file(file);
      return;
    }
    rewound_.erase(path);
    read_file(file);
    rewound_.erase(path);
    std::unique_ptr<Tracked> leaving = std::move(it->second);
    files_.erase(it);
    forget(*leaving);  // the leaving timer polls it now
    if (leaving->follower->is_open()) {
      struct stat old {};
      leaving->deleted = ::fstat(leaving->follower->fd(), &old) != 0 || old.st_nlink == 0;
      leaving->last_growth = Clock::now();
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
      if (const WatchRule* rule = rule_of(path)) track(path, *rule, StartAt::kBeginning);
    }
  }

  // A container log rotated away under `path` (kubelet's rename) whose successor now exists:
  // read to its end and committed without finishing its analyzer (an incident open at the
  // rotation goes on in the new file), marked rotated; its checkpoint starts the successor.
  std::optional<Checkpoint> take_over_rotated(const std::string& path) {
    for (auto it = leaving_.begin(); it != leaving_.end(); ++it) {
      Tracked& old = **it;
      if (old.path() != path || old.deleted || old.rule == nullptr ||
          old.rule->source != "kubernetes") {
        continue;
      }
      drain(old);
      std::optional<Checkpoint> carried;
      if (commit(old, old.analyzer().take_events(), /*can_rewind=*/false)) {
        carried = old.follower->checkpoint();
      }
      note_store_failure("set_file_state",
                         store_.set_file_state(old.file_id, "rotated", unix_now()));
      leaving_.erase(it);
      return carried;
    }
    return std::nullopt;
  }

  // Reads a leaving log to its end (its last unterminated line included), commits, marks it.
  void finish(Tracked& file, const char* state) {
    drain(file);
    parsers::LogAnalysis last = file.analyzer().finish();
    commit(file, std::move(last.events), /*can_rewind=*/false);
    note_store_failure("set_file_state", store_.set_file_state(file.file_id, state, unix_now()));
  }

  // Reads everything a file not followed by its name holds now. Its progress cannot be read
  // again by name, so a refused commit is kept by the sink instead of rewinding.
  void drain(Tracked& file) {
    FileFollower& follower = *file.follower;
    for (int turn = 0; turn < 4096; ++turn) {
      const FileFollower::Read read = follower.read(kReadBudgetPerTurn, buffer_.span());
      metrics_.bytes_read += read.bytes;
      if (read.bytes > 0) file.last_growth = Clock::now();
      if (!read.more) break;
    }
    metrics_.records += follower.take_new_records();
    std::vector<parsers::OomEvent> events = follower.analyzer().take_events();
    if (!events.empty() || file.storable_outcome() != file.committed_outcome) {
      commit(file, std::move(events), /*can_rewind=*/false);
    }
  }

  void arm_leaving() {
    if (leaving_armed_ || leaving_.empty()) return;
    leaving_armed_ = true;
    leaving_timer_.expires_after(kLeavingPoll);
    leaving_timer_.async_wait([this](const boost::system::error_code& ec) {
      leaving_armed_ = false;
      if (ec) return;
      const auto now = Clock::now();
      const auto settle = std::chrono::milliseconds(config_.settle_ms);
      std::erase_if(leaving_, [&](std::unique_ptr<Tracked>& file) {
        drain(*file);
        if (file->analyzer().has_open_incident() && now - file->last_growth >= settle) {
          file->analyzer().settle();
          commit(*file, file->analyzer().take_events(), /*can_rewind=*/false);
        }
        if (now - file->last_growth < kLeavingQuiet) return false;
        finish(*file, file->deleted ? "gone" : "rotated");
        return true;
      });
      arm_leaving();
    });
  }

  // --- descriptors -------------------------------------------------------------------------
  // A closed idle log is reopened by its path when the path still is the same file; when it was
  // rotated meanwhile, its inode is looked for where rotated logs go, so its tail is drained.
  bool ensure_open(Tracked& file) {
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
      if (auto found = find_by_identity(rotation_folders(file.path(), *file.rule), follower.dev(),
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

  size_t open_logs() const {
    size_t open = leaving_.size();
    for (const auto& [path, file] : files_) open += file->follower->is_open();
    return open;
  }

  // Opens `path` after making room; out of descriptors all the same, the budget was too
  // generous: it shrinks to what is open, and one more try follows.
  int open_within_budget(const std::string& path, const Tracked* keep) {
    make_room(keep);
    int fd = open_log(path);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      const size_t open = open_logs();
      max_open_ = std::max<size_t>(8, open > 1 ? open - 1 : 1);
      make_room(keep);
      fd = open_log(path);
    }
    return fd;
  }

  // Closes the least recently read idle logs until one more descriptor fits. A log with
  // uncommitted progress, an open incident or a pending retry stays open, and so does a
  // leaving one (a deleted file could not be opened again).
  void make_room(const Tracked* keep) {
    size_t open = open_logs();
    while (open >= max_open_) {
      Tracked* idle = nullptr;
      for (auto& [path, file] : files_) {
        if (!file->follower->is_open() || file.get() == keep || file->dirty || file->settle_at ||
            file->analyzer().has_open_incident() || rewound_.count(path)) {
          continue;
        }
        if (!idle || file->last_read < idle->last_read) idle = file.get();
      }
      if (!idle) {
        if (!fd_limit_logged_) {
          log_line(kWarning, "{} logs open, all busy: going past the budget of {}", open,
                   max_open_);
          fd_limit_logged_ = true;
        }
        return;
      }
      idle->follower->close_descriptor();
      ++metrics_.files_closed_idle;
      --open;
    }
  }

  // --- events ------------------------------------------------------------------------------
  // Returns false when the store refused. A file that stays is then rewound to its last commit
  // and read again; the last progress of a file that is going away (rotated, truncated,
  // drained) cannot be read again, so the sink keeps it and retries it first.
  bool commit(Tracked& file, std::vector<parsers::OomEvent> events, bool can_rewind = true) {
    db::Progress progress = progress_of(file, std::move(events));
    if (!sink_.commit(progress)) {
      if (can_rewind) {
        rewind(file);
      } else {
        sink_.keep(std::move(progress));
        arm_store_retry();
      }
      return false;
    }
    committed(file, progress);
    return true;
  }

  // The healer hears of a run's end once the store holds it.
  void run_changed(Tracked& file, parsers::Outcome outcome) {
    RunEnded run;
    run.job = file.job.name;
    run.job_id = file.job.job_id;
    run.run_id = file.job.run_id;
    run.outcome = outcome;
    run.fatal = file.fatal_event;
    run.fixes = file.fatal_fixes;
    run.last_saved_step = file.analyzer().last_saved_step();
    run.trainer = std::string(parsers::to_string(file.analyzer().trainer()));
    run.family =
        file.job.config ? std::string(parsers::to_string(file.job.config->family)) : "unknown";
    run.log_path = file.path();
    healer_->run_ended(run);
  }

  void committed(Tracked& file, const db::Progress& progress) {
    file.dirty = false;
    if (first_scan_marker_pending_) mark_first_scan_done();
    const std::optional<parsers::Outcome> outcome = file.storable_outcome();
    if (healer_ && outcome && (outcome != file.committed_outcome || file.fatal_untold)) {
      file.fatal_untold = false;
      run_changed(file, *outcome);
    }
    file.committed_outcome = outcome;
    file.follower->committed(
        {progress.offset, progress.line, progress.analyzer_state, progress.generation});
    if (progress.fingerprint && progress.fingerprint->second > 0)
      file.follower->set_fingerprinted();
  }

  // A store call the daemon survives failing: counted by operation, logged the first time.
  template <class T>
  void note_store_failure(const char* operation, const Result<T>& result) {
    if (result) return;
    if (metrics_.store_errors[operation]++ == 0) {
      log_line(kWarning, "store: {}: {} (counted in oomtriage_store_errors_total)", operation,
               result.error().message);
    }
  }

  // The marker that makes every later start read present logs from their stored offsets. A
  // write the store refuses is tried again at the next commit: left unwritten, the next start
  // would be a first start and skip what the logs got while the daemon was down.
  void mark_first_scan_done() {
    auto marked = store_.set_meta("first_scan_done", std::to_string(unix_now()));
    first_scan_marker_pending_ = !marked;
    note_store_failure("set_first_scan_done", marked);
  }

  // Offsets move only after the store accepted the events: the analyzer and the read position
  // go back to the last commit, and the file is read again once the store answers.
  void rewind(Tracked& file) {
    file.follower->rewind();
    file.dirty = false;
    file.settle_at.reset();
    rewound_.insert(file.path());
    arm_store_retry();
  }

  // Retries with the sink's backoff; never blocks the loop.
  void arm_store_retry() {
    if (store_retry_armed_) return;
    store_retry_armed_ = true;
    store_retry_timer_.expires_after(sink_.next_retry_delay());
    store_retry_timer_.async_wait([this](const boost::system::error_code& ec) {
      store_retry_armed_ = false;
      if (ec) return;
      if (!sink_.retry_kept()) {
        arm_store_retry();
        return;
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
    FileFollower& follower = *file.follower;
    const Checkpoint checkpoint = follower.checkpoint();
    db::Progress progress;
    progress.file_id = file.file_id;
    progress.job_id = file.job.job_id;
    progress.run_id = file.job.run_id;
    progress.generation = checkpoint.generation;
    progress.offset = checkpoint.offset;
    progress.line = checkpoint.line;
    progress.analyzer_state = checkpoint.analyzer_state;
    progress.anchor = anchor_of(follower.fd(), progress.offset);
    if (!follower.fingerprinted()) {
      // A new file (or a new generation after a truncation) has no head to compare until a KiB
      // exists; the store forgets the old head meanwhile.
      auto head = head_fingerprint(follower.fd());
      progress.fingerprint.emplace(head.value_or(""),
                                   head ? static_cast<int64_t>(kFingerprintBytes) : 0);
    }
    parsers::LogAnalyzer& analyzer = follower.analyzer();
    if (const auto outcome = file.storable_outcome()) {
      progress.outcome = std::string(parsers::to_string(*outcome));
    }
    for (const auto& alert : config_.alerts) progress.receivers.push_back(alert.name);
    if (const parsers::Trainer trainer = analyzer.trainer();
        trainer != parsers::Trainer::kUnknown && trainer != file.stored_trainer) {
      // The trainer is known once the log shows it; the job row follows.
      // Tried again at the next commit until the store keeps it.
      auto upserted =
          store_.upsert_job(file.job.name, home_of(file), std::string(parsers::to_string(trainer)),
                            fs::path(file.path()).parent_path().string(), unix_now());
      if (upserted) file.stored_trainer = trainer;
      note_store_failure("upsert_job", upserted);
    }
    if (!events.empty()) {
      // The config as it is now: a new snapshot when it changed since the last event.
      refresh_config(file);
      snapshot(file);
      progress.snapshot_id = file.job.snapshot_id;
    }
    const std::string family =
        file.job.config ? std::string(parsers::to_string(file.job.config->family)) : "unknown";
    const triage::JobView job{file.job.config ? &*file.job.config : nullptr,
                              file.job.config_problem, &file.job.files};
    const triage::History history = history_of(file, events);
    for (const parsers::OomEvent& event : events) {
      std::vector<triage::Fix> fixes =
          triage::triage_event(event, analyzer.trainer(), analyzer.arguments(), job, history);
      progress.events.push_back(event_row(event, fixes, family));
      if (!event.recovered) {
        file.fatal_event = event;
        file.fatal_fixes = fixes;
        file.fatal_untold = true;
      }
      log_line(event.recovered ? kWarning : kError, "{}",
               event_journal_text(file.job.name, file.path(), event, fixes));
    }
    return progress;
  }

  // The job's story before this run, read only when a crash of this run can use it: the fixes
  // the run carried from the previous run's crash go last when it crashed again in that phase.
  triage::History history_of(const Tracked& file, const std::vector<parsers::OomEvent>& events) {
    const bool any_fatal = std::any_of(events.begin(), events.end(),
                                       [](const parsers::OomEvent& e) { return !e.recovered; });
    if (!any_fatal || file.job.files.empty()) return {};
    auto story = store_.job_story_by_id(file.job.job_id);
    if (!story) {
      ++metrics_.store_errors["read_story"];
      return {};  // ranked as a first crash; the store's failure is counted
    }
    if (!*story) return {};
    return {previous_crash(**story, file.job.run_id), {}};
  }

  void arm_checkpoint() {
    if (checkpoint_armed_) return;
    checkpoint_armed_ = true;
    checkpoint_timer_.expires_after(kCheckpointInterval);
    checkpoint_timer_.async_wait([this](const boost::system::error_code& ec) {
      checkpoint_armed_ = false;
      if (ec) return;
      std::vector<db::Progress> batch;
      std::vector<Tracked*> files;
      for (auto& [path, file] : files_) {
        if (!file->dirty || !file->follower->is_open()) continue;
        batch.push_back(progress_of(*file, {}));
        files.push_back(file.get());
      }
      if (batch.empty()) return;
      if (!sink_.commit(batch)) {
        for (Tracked* file : files) rewind(*file);
        return;
      }
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
      // Rows made pending from outside (`oomtriage alerts resend`) go out within a rescan.
      if (dispatcher_) dispatcher_->poke();
      write_textfile();
      notify_service_manager(fmt::format("STATUS=watching {} log(s)", files_.size()));
      arm_rescan();
    });
  }

  void arm_settle() {
    std::optional<Clock::time_point> earliest;
    for (auto& [path, file] : files_) {
      if (file->settle_at && (!earliest || *file->settle_at < *earliest))
        earliest = file->settle_at;
    }
    if (!earliest) return;
    settle_timer_.expires_at(*earliest);
    settle_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      const auto now = Clock::now();
      for (auto& [path, file] : files_) {
        if (file->settle_at && *file->settle_at <= now) {
          file->settle_at.reset();
          file->analyzer().settle();
          commit(*file, file->analyzer().take_events());
        }
      }
      arm_settle();
    });
  }

  // Reads every file to its end and commits (a leaving file stays active in the store, so a
  // restart finds it by its inode and reads on).
  void drain_all() {
    for (auto& [path, file] : files_) {
      read_file(*file);
      commit(*file, file->analyzer().take_events());
    }
    for (auto& file : leaving_) drain(*file);
  }

  void wait_signals() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      if (signal == SIGHUP) {
        notify_service_manager("RELOADING=1");
        reload_config();
        notify_service_manager(fmt::format("READY=1\nSTATUS=watching {} log(s)", files_.size()));
        wait_signals();
        return;
      }
      log_line(kInfo, "signal {}: draining {} file(s) and stopping", signal, files_.size());
      notify_service_manager("STOPPING=1");
      drain_all();
      write_textfile();
      io_.stop();
    });
  }

  void reload_config() {
    if (config_.source == "inline") {
      log_line(kNotice, "SIGHUP: the inline config has nothing to reload");
      return;
    }
    auto fresh = load_daemon_config(config_.source);
    if (!fresh) {
      log_line(kError, "SIGHUP: keeping the old config: {}", fresh.error().message);
      return;
    }
    // Files keep their rule pointer into the old config: drain and re-track them under the new
    // one (leaving files are finished now).
    drain_all();
    for (auto& file : leaving_) finish(*file, file->deleted ? "gone" : "rotated");
    leaving_.clear();
    for (const auto& [path, file] : files_) forget(*file);
    files_.clear();
    auto dispatcher = std::make_unique<AlertDispatcher>(io_, store_, *fresh, &metrics_);
    if (auto started = dispatcher->start(); !started) {
      log_line(kError, "SIGHUP: keeping the old alert receivers: {}", started.error().message);
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
    for (const std::string& warning : config_.warnings) log_line(kWarning, "{}", warning);
    // Kept once made: its questions to the UI under way answer into it.
    if (healer_) {
      healer_->set_config(config_.heal);
    } else if (config_.heal.enabled()) {
      healer_ = make_healer();
    }
    start_slurm_poller();
    if (!start_fleet_shipper()) log_line(kError, "SIGHUP: no fleet store until the next reload");
    scan_all();
    log_line(kNotice, "SIGHUP: config reloaded from {} ({} rule(s))", config_.source,
             config_.watch.size());
  }

  asio::io_context& io_;
  db::Store& store_;
  std::string store_path_;
  DaemonConfig config_;
  bool verbose_;
  Metrics metrics_;
  ReadPacer pacer_;
  EventSink sink_;
  std::optional<DirectoryWatcher> watcher_;
  asio::posix::stream_descriptor inotify_;
  asio::steady_timer rescan_timer_{io_};
  asio::steady_timer settle_timer_{io_};
  asio::steady_timer checkpoint_timer_{io_};
  bool checkpoint_armed_ = false;
  asio::steady_timer poll_timer_{io_};
  bool polls_armed_ = false;
  size_t poll_cursor_ = 0;                      // the next busy log to poll
  std::vector<Tracked*> busy_;                  // polled once per interval
  std::unordered_map<int, Tracked*> by_watch_;  // quiet logs, by their watch descriptor
  bool file_watch_failed_logged_ = false;
  asio::steady_timer leaving_timer_{io_};
  bool leaving_armed_ = false;
  asio::signal_set signals_;
  ReadBuffer buffer_{kReadChunk};
  std::map<std::string, std::unique_ptr<Tracked>> files_;
  std::vector<std::unique_ptr<Tracked>> leaving_;        // no longer named by their path
  std::map<std::string, const WatchRule*> slurm_paths_;  // output files squeue named
  std::string slurm_error_;                              // logged once until squeue answers
  std::unique_ptr<SlurmPoller> slurm_poller_;            // last: stopped before the rest goes
  std::unique_ptr<WalCheckpointer> wal_checkpointer_;
  std::unique_ptr<FleetShipper> fleet_;  // `store: postgresql://...`
  std::unique_ptr<AlertDispatcher> dispatcher_;
  std::vector<std::unique_ptr<AlertDispatcher>> retired_dispatchers_;  // draining after SIGHUP
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<UiHealer> healer_;  // the `heal:` section, when present
  asio::steady_timer watchdog_timer_{io_};
  std::chrono::microseconds watchdog_interval_{0};
  int textfile_error_logged_ = 0;
  std::set<std::string> unreadable_logged_;
  std::set<std::string> warned_configs_;
  std::map<std::string, std::string> config_texts_;
  bool first_start_ = false;
  bool first_scan_marker_pending_ = false;  // its write failed: tried again at the next commit
  bool watch_limit_logged_ = false;
  size_t max_open_ = 4096;       // log descriptors open at once (start() derives it from the limit)
  bool open_hit_limit_ = false;  // the last reopen failed for want of descriptors
  bool fd_limit_logged_ = false;
  asio::steady_timer store_retry_timer_{io_};
  bool store_retry_armed_ = false;
  bool rescan_on_retry_ = false;  // a log could not be registered: scan again on the retry
  std::set<std::string> rewound_;
};

}  // namespace

int run_daemon(DaemonConfig config, const std::string& store_path, bool verbose) {
  // One descriptor per open log: lift the soft limit to the hard one (systemd: 1024/512K).
  lift_descriptor_limit();
  // One daemon per state dir: a second one would post every alert twice.
  auto lock = InstanceLock::acquire(fs::path(store_path).parent_path().string());
  if (!lock && lock.error().code == ErrorCode::kDatabaseBusy) {
    log_line(kError, "{}", lock.error().message);
    return 1;
  }
  if (!lock) {
    log_line(kError, "cannot open store {}: {}", store_path, lock.error().message);
    return 2;
  }
  // A short busy timeout: a locked store is retried by the loop's own backoff, not waited on.
  auto store = db::Store::open(store_path, 250);
  if (!store) {
    log_line(kError, "store {}: {}", store_path, store.error().message);
    return 2;
  }
  asio::io_context io;
  Daemon daemon(io, **store, store_path, std::move(config), verbose);
  if (!daemon.start()) return 1;
  io.run();
  return 0;
}

}  // namespace oomtriage::daemon
