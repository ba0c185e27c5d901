// daemon/service/daemon.cc: the daemon's story, wiring its parts. run_daemon() takes the instance
// lock, opens the store and runs the Asio loop; Daemon reacts to the directory watcher's changes,
// the read scheduler's due reads, the settle, checkpoint, rescan and store-retry timers, and
// signals. The parts: the followed logs (followed_logs.h: tracking, identity, rotation, the
// descriptor budget), the read scheduler (read_scheduler.h: quiet logs watched, busy ones
// polled), the job registry (job_registry.h: jobs, runs, configs, ranking) and the event sink
// (event_sink.h). Each read of a log ends in one store transaction through the sink: its new
// events (with their outbox rows), its resume offset, anchor and analyzer checkpoint.
#include "daemon/service/daemon.h"

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

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/common/clock.h"
#include "daemon/common/journal_log.h"
#include "daemon/common/metrics.h"
#include "daemon/common/read_buffer.h"
#include "daemon/common/version.h"
#include "daemon/net/metrics_server.h"
#include "daemon/service/directory_watcher.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/file_identity.h"
#include "daemon/service/fleet_shipper.h"
#include "daemon/service/followed_logs.h"
#include "daemon/service/gpu_monitor.h"
#include "daemon/service/job_registry.h"
#include "daemon/service/log_discovery.h"
#include "daemon/service/read_scheduler.h"
#include "daemon/service/service_manager.h"
#include "daemon/service/slurm_source.h"
#include "daemon/service/store_failures.h"
#include "daemon/service/ui_healer.h"
#include "daemon/service/wal_checkpointer.h"
#include "db/store.h"
#include "db/store_recovery.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// Offsets of logs that only made progress (no event, no new outcome) are written this often,
// all in one transaction: after a kill -9 at most this much log is read again (events are unique
// per offset), and 1,000 busy logs cost ~33 row updates a second, not 1,000. (The analyzer's
// state is JSON; at 10 s its writing was a third of the daemon's CPU under that load.)
constexpr auto kCheckpointInterval = std::chrono::seconds(30);
// The WAL is copied into the database this often, on its own thread (wal_checkpointer.h).
constexpr auto kWalCheckpointInterval = std::chrono::seconds(2);

class Daemon final : public LogHost {
 public:
  Daemon(asio::io_context& io, db::Store& store, std::string store_path, DaemonConfig config,
         bool verbose, CardSizeProvider card_size)
      : io_(io),
        store_(store),
        store_path_(std::move(store_path)),
        config_(std::move(config)),
        verbose_(verbose),
        sink_(store, metrics_, std::bind_front(&Daemon::poke_dispatcher, this), unix_now),
        registry_(store, metrics_, unix_now),
        preflight_(
            store, metrics_, unix_now,
            [this](AlertContent alert) {
              if (dispatcher_) dispatcher_->send_once(std::move(alert));
            },
            std::move(card_size), verbose),
        scheduler_(io, std::chrono::milliseconds(config_.read_interval_ms),
                   [this](Tracked& file) { return read(file); }),
        logs_(io, store, registry_, scheduler_, metrics_, buffer_, *this, unix_now, verbose),
        inotify_(io),
        signals_(io, SIGINT, SIGTERM, SIGHUP),
        gpu_(
            io, store, metrics_, unix_now, [this] { return sampled_runs(); },
            [this](AlertContent alert) {
              if (dispatcher_) dispatcher_->send_once(std::move(alert));
            },
            [](const std::string& line) { log_line(kNotice, "{}", line); }) {
    sink_.on_damaged([this](const std::string& message) { store_damaged(message); });
  }

  // This start follows a recovery of the store (at the start, or of a store damaged while the
  // last loop ran); `recoveries` counts them since the process started.
  void set_recovery(std::optional<db::StoreRecovery> recovery, uint64_t recoveries) {
    recovery_ = std::move(recovery);
    metrics_.store_recoveries = recoveries;
  }
  // Why the loop stopped to have the store recovered, when it did.
  const std::optional<std::string>& damage() const { return damage_; }
  // The config as the last SIGHUP left it, for the loop that follows a recovery.
  DaemonConfig take_config() { return std::move(config_); }

  ~Daemon() override {
    // The watcher owns the inotify descriptor.
    if (inotify_.is_open()) inotify_.release();
  }

  bool start() {
    metrics_.version = kVersion;
    // The WAL is checkpointed off the loop; SQLite's own checkpoint is only a safety net under
    // the checkpointer thread: a store that refuses the setting keeps SQLite's default (1,000
    // pages), which is also safe.
    count_store_failure(metrics_, "set_auto_checkpoint",
                        store_.set_auto_checkpoint(WalCheckpointer::kLoopAutoCheckpointPages));
    wal_checkpointer_ = std::make_unique<WalCheckpointer>(store_path_, kWalCheckpointInterval);
    for (const std::string& warning : config_.warnings) log_line(kWarning, "{}", warning);
    logs_.set_descriptor_budget(log_descriptor_budget());
    logs_.set_settle(std::chrono::milliseconds(config_.settle_ms));
    scheduler_.set_burst_check(std::chrono::milliseconds(config_.burst_check_ms));
    if (!config_.metrics_listen.empty()) {
      metrics_server_ = std::make_unique<MetricsServer>(io_, [this] { return render_metrics(); });
      if (auto listening = metrics_server_->listen(config_.metrics_listen); !listening) {
        log_line(kError, "{}", listening.error().message);
        return false;
      }
      // The port it got (port 0 asks the kernel for a free one).
      log_line(kInfo, "serving /metrics on port {}", metrics_server_->port());
    }
    dispatcher_ = std::make_unique<AlertDispatcher>(io_, store_, config_, &metrics_);
    if (auto started = dispatcher_->start(); !started) {
      log_line(kError, "{}", started.error().message);
      return false;
    }
    dispatcher_->poke();
    if (config_.heal.enabled()) healer_ = make_healer();
    // Each job's config is judged when its log is first followed (before the first scan).
    preflight_.configure(config_);
    registry_.set_on_registered([this](const Tracked& file) { preflight_check(file); });
    if (auto watcher = DirectoryWatcher::open(); !watcher) {
      log_line(kWarning, "{}: polling every {} s", watcher.error().message, config_.rescan_seconds);
    } else {
      watcher_.emplace(std::move(*watcher));
      scheduler_.set_watcher(&*watcher_);
      discovery_.set_watcher(&*watcher_);
      inotify_.assign(watcher_->fd());
      wait_inotify();
    }
    // Only the very first scan of this store reads present logs from their end; a store that
    // exists but has no jobs yet is not a first start (a crash may have come while down).
    auto marker = store_.meta("first_scan_done");
    count_store_failure(metrics_, "read_first_scan_done", marker);
    const bool first_start = marker && !*marker && !config_.backfill;
    if (config_.backfill && marker && !*marker) {
      log_line(kNotice, "backfill: reading the logs already here from their beginning");
    }
    // Before the first scan: what it stores must be queued for the fleet store.
    if (!start_fleet_shipper()) return false;
    if (recovery_) announce_recovery(*recovery_);
    logs_.set_recovering(recovery_.has_value());
    discovery_.scan_all(first_start);
    logs_.set_recovering(false);
    slurm_.configure(config_.watch);
    if (first_start) mark_first_scan_done();
    logs_.drain_rotated_while_down();
    arm_rescan();
    wait_signals();
    log_line(kInfo, "watching {} file(s) from {} rule(s); store ready", logs_.size(),
             config_.watch.size());
    notify_service_manager(fmt::format("READY=1\nSTATUS=watching {} log(s)", logs_.size()));
    if (auto interval = watchdog_ping_interval()) {
      watchdog_interval_ = *interval;
      arm_watchdog();
    }
    write_textfile();
    start_gpu_monitor();
    return true;
  }

 private:
  // --- the GPU memory timeline (gpu_monitor.h) -------------------------------------------------
  void start_gpu_monitor() {
    gpu_.start(std::chrono::milliseconds(config_.gpu_sample_ms), config_.near_oom_share);
  }

  // Every followed run with its logs, folder, and where its log says it is now.
  std::vector<SampledRun> sampled_runs() {
    std::map<int64_t, SampledRun> runs;
    for (auto& [path, file] : logs_.by_path()) {
      Tracked* log = file.get();
      if (log->job.run_id == 0) continue;
      SampledRun& run = runs[log->job.run_id];
      run.logs.push_back(path);
      if (run.run_id != 0) continue;  // its first log tells the rest
      run.run_id = log->job.run_id;
      run.folder = job_home(*log);
      if (log->is_container_log()) run.pod_uid = pod_of(path).uid;
      run.step = log->analyzer().training_step();
      run.phase = log->analyzer().current_phase();
      run.alert.job = log->job.name;
      run.alert.trainer = std::string(parsers::to_string(log->analyzer().trainer()));
      run.alert.model_family =
          log->job.config ? std::string(parsers::to_string(log->job.config->family)) : "unknown";
      run.alert.log_path = path;
      run.alert.total_steps = log->analyzer().training_total();
      // Called within this sample, while the log is still followed.
      run.fixes = [log](parsers::Phase phase, uint64_t peak, uint64_t card) {
        parsers::OomEvent near;
        near.phase = phase;
        near.step = log->analyzer().training_step();
        near.figures.total_capacity_bytes = card;
        near.figures.this_process_in_use_bytes = peak;
        const triage::JobView job{log->job.config ? &*log->job.config : nullptr,
                                  log->job.config_problem, &log->job.files};
        return triage::triage_event(near, log->analyzer().trainer(), log->analyzer().arguments(),
                                    job, {});
      };
    }
    std::vector<SampledRun> list;
    list.reserve(runs.size());
    for (auto& [id, run] : runs) list.push_back(std::move(run));
    return list;
  }

  // --- a damaged store ----------------------------------------------------------------------
  // SQLite found the store damaged: retrying cannot mend it. The loop stops (no drain: nothing
  // more can be stored) and run_daemon() moves the store aside, salvages it and starts again.
  void store_damaged(const std::string& message) {
    if (damage_) return;
    damage_ = message;
    log_line(kCritical, "store {} is damaged ({}): moving it aside and salvaging it", store_path_,
             message);
    io_.stop();
  }

  // One critical journal line and one alert per recovery; `report` and `check-config` read the
  // same facts from the store's meta.
  void announce_recovery(const db::StoreRecovery& recovery) {
    log_line(kCritical,
             "store {} was damaged ({}); kept as {} and replaced by a fresh store: {}. Logs it "
             "no longer knew are read from their start; their alerts say they may have gone out "
             "before.",
             store_path_, recovery.reason, recovery.damaged_path, recovery.summary());
    AlertContent alert;
    alert.store_recovered = true;
    alert.event_id = recovery.recovered_at;
    alert.job = "oomtriage store";
    alert.step = "-";
    alert.log_path = recovery.damaged_path;
    alert.message = fmt::format(
        "The store {} was damaged ({}). It was moved aside to {} and a fresh store took its "
        "place: {}. Logs whose read position was lost are read again from their start.",
        store_path_, recovery.reason, recovery.damaged_path, recovery.summary());
    alert.starts_at = utc_time(recovery.recovered_at);
    if (dispatcher_) dispatcher_->send_once(std::move(alert));
  }

  // Its verdicts go out through whichever dispatcher is current.
  std::unique_ptr<UiHealer> make_healer() {
    return std::make_unique<UiHealer>(io_, store_, config_.heal, [this](AlertContent alert) {
      if (dispatcher_) dispatcher_->send_once(std::move(alert));
    });
  }

  void preflight_check(const Tracked& file) {
    const Job& job = file.job;
    if (!job.config || !job.config_sha256) return;
    preflight_.on_job({job.job_id, job.name, std::string(parsers::to_string(job.config->trainer)),
                       file.path(), *job.config_sha256, &*job.config});
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
    if (fleet_ && fleet_->url() == config_.store && fleet_->host() == host &&
        fleet_->keep_days() == config_.fleet_keep_days) {
      return true;
    }
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
    options.keep_days = config_.fleet_keep_days;
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
    metrics_.files_watched = logs_.size();
    metrics_.fleet_configured = fleet_ != nullptr;
    if (fleet_) {
      metrics_.fleet_backlog = fleet_->backlog();
      metrics_.fleet_shipped = fleet_->shipped();
      metrics_.fleet_up = fleet_->up();
    }
    // A store that cannot count keeps the last figure (counted as a store error).
    auto pending = store_.count_alerts("pending");
    count_store_failure(metrics_, "count_alerts", pending);
    if (pending) metrics_.outbox_pending = static_cast<uint64_t>(*pending);
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
  // The rule a path belongs to: a Slurm job's output file squeue named, or a rule's glob.
  std::optional<WatchRule> rule_of(const std::string& path) const override {
    if (std::optional<WatchRule> slurm = slurm_.rule_of(path)) return slurm;
    if (const WatchRule* rule = rule_for(config_.watch, path)) return *rule;
    return std::nullopt;
  }

  // Drains inotify as soon as it is readable. Busy logs are polled, not heard (read_scheduler.h),
  // so the events that come are few: names, and the first write of a quiet log, which may be the
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
    std::vector<std::string> closed;
    std::vector<std::string> folders;
    bool rescan = false;
    for (const FsChange& change : changes) {
      switch (change.kind) {
        case FsChange::kRescan: rescan = true; break;
        case FsChange::kFolderAppeared: folders.push_back(change.path); break;
        case FsChange::kAppeared:
        case FsChange::kVanished:
          if (logs_.find(change.path)) {
            logs_.check_identity(change.path);
          } else if (change.kind == FsChange::kAppeared) {
            if (std::optional<WatchRule> rule = rule_of(change.path))
              logs_.track(change.path, *rule, StartAt::kBeginning);
          }
          break;
        case FsChange::kFileWritten:
          if (Tracked* file = scheduler_.by_watch(change.watch); file && !file->queued) {
            file->queued = true;
            written.push_back(file->path());
          }
          break;
        case FsChange::kFileClosed:
          // A busy log's writers all closed it: a trainer that died, or one that finished.
          if (Tracked* file = scheduler_.by_close_watch(change.watch); file && !file->queued) {
            file->queued = true;
            closed.push_back(file->path());
          }
          break;
      }
    }
    // A later change of the same batch may have let the file go (a write, then its deletion).
    for (const auto* paths : {&written, &closed}) {
      for (const std::string& path : *paths)
        if (Tracked* file = logs_.find(path)) file->queued = false;
    }
    // A rescan may drop files (rotation): read only those still followed.
    if (rescan) {
      discovery_.scan_all();
    } else {
      for (const std::string& folder : folders) discovery_.discover_under(folder);
    }
    const auto now = Clock::now();
    for (const std::string& path : written) {
      Tracked* file = logs_.find(path);
      if (!file) continue;
      // Read now, whatever follows: the first write after a quiet spell is where an OOM shows.
      read(*file);
      scheduler_.written(*file, now);
    }
    for (const std::string& path : closed) {
      if (Tracked* file = logs_.find(path)) read(*file);
    }
  }

  // --- reads and commits ---------------------------------------------------------------------
  // Reads what the log grew by (bounded per turn), and commits what it produced.
  uint64_t read(Tracked& file) override {
    if (file.awaiting_store) return 0;  // the store's retry reads it
    if (!logs_.ensure_open(file)) {
      // Out of descriptors for the moment (every open log busy with an incident or unsaved
      // progress): the next poll tries again, when one of them may be idle.
      if (logs_.out_of_descriptors()) scheduler_.poll(file);
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
      file.checked_to = file.polled_to = 0;  // the burst checks' marks were the old content's
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
      if (!commit(file, std::move(events), /*can_rewind=*/true)) return read.bytes;
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
        if (Tracked* same = logs_.find(path)) this->read(*same);
      });
    }
    return read.bytes;
  }

  // Offsets move only after the store accepted the events. A log that stays is rewound to its
  // last commit and read again once the store answers; the last progress of one going away
  // (rotated, truncated, drained) cannot be read again, so the sink keeps it and retries it.
  bool commit(Tracked& file, std::vector<parsers::OomEvent> events, bool can_rewind) override {
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

  // A store refusal before a log was followed: nothing was read, so a rescan on the store's
  // retry picks the log up again.
  void store_refused(const Error& error) override {
    sink_.refused(error);
    if (damage_) return;
    rescan_on_retry_ = true;
    arm_store_retry();
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
    if (const auto outcome = file.storable_outcome()) {
      progress.outcome = std::string(parsers::to_string(*outcome));
    }
    for (const auto& alert : config_.alerts) progress.receivers.push_back(alert.name);
    registry_.note_trainer(file);  // the trainer is known once the log shows it
    progress.events = registry_.triage_events(file, events);
    if (!events.empty()) progress.snapshot_id = file.job.snapshot_id;
    return progress;
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

  // The marker that makes every later start read present logs from their stored offsets. A
  // write the store refuses is tried again at the next commit: left unwritten, the next start
  // would be a first start and skip what the logs got while the daemon was down.
  void mark_first_scan_done() {
    auto marked = store_.set_meta("first_scan_done", std::to_string(unix_now()));
    first_scan_marker_pending_ = !marked;
    count_store_failure(metrics_, "set_first_scan_done", marked);
  }

  // The analyzer and the read position go back to the last commit; the store's retry reads on.
  void rewind(Tracked& file) {
    file.follower->rewind();
    file.dirty = false;
    file.settle_at.reset();
    file.awaiting_store = true;
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
      std::vector<Tracked*> waiting;
      for (auto& [path, file] : logs_.by_path()) {
        if (!file->awaiting_store) continue;
        file->awaiting_store = false;
        waiting.push_back(file.get());
      }
      for (Tracked* file : waiting) read(*file);
      if (rescan_on_retry_) {
        rescan_on_retry_ = false;
        discovery_.scan_all();
      }
    });
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
      for (auto& [path, file] : logs_.by_path()) {
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
      discovery_.scan_all();
      for (auto& [path, file] : logs_.by_path()) read(*file);
      // Rows made pending from outside (`oomtriage alerts resend`) go out within a rescan.
      if (dispatcher_) dispatcher_->poke();
      write_textfile();
      notify_service_manager(fmt::format("STATUS=watching {} log(s)", logs_.size()));
      arm_rescan();
    });
  }

  void arm_settle() {
    std::optional<Clock::time_point> earliest;
    for (auto& [path, file] : logs_.by_path()) {
      if (file->settle_at && (!earliest || *file->settle_at < *earliest))
        earliest = file->settle_at;
    }
    if (!earliest) return;
    settle_timer_.expires_at(*earliest);
    settle_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      const auto now = Clock::now();
      for (auto& [path, file] : logs_.by_path()) {
        if (file->settle_at && *file->settle_at <= now) {
          // While the incident's traceback is still to come, the log must be quiet for longer.
          const auto quiet =
              file->analyzer().quiet_before_settle(std::chrono::milliseconds(config_.settle_ms));
          if (now - file->last_growth < quiet) {
            file->settle_at = file->last_growth + quiet;
            continue;
          }
          file->settle_at.reset();
          file->analyzer().settle();
          commit(*file, file->analyzer().take_events(), /*can_rewind=*/true);
        }
      }
      arm_settle();
    });
  }

  void wait_signals() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      if (signal == SIGHUP) {
        request_reload();
        wait_signals();
        return;
      }
      log_line(kInfo, "signal {}: draining {} file(s) and stopping", signal, logs_.size());
      notify_service_manager("STOPPING=1");
      logs_.drain_all();
      gpu_.stop();
      write_textfile();
      io_.stop();
    });
  }

  // --- reloads (SIGHUP), coalesced ---------------------------------------------------------
  // A storm of SIGHUPs (a config-management loop gone wrong) must not hold the loop that stores
  // and alerts: a signal while a reload is pending adds nothing (the pending one reads the file
  // as it is when it runs), and reloads run at most every kReloadSpacing. A file that does not
  // parse is read once more after kReloadRetry (it may be half-written) before the old config
  // is kept.
  static constexpr std::chrono::milliseconds kReloadSpacing{1000};
  static constexpr std::chrono::milliseconds kReloadRetry{300};

  void request_reload() {
    if (reload_pending_) {
      ++metrics_.reloads_coalesced;
      return;
    }
    const auto due = std::max(std::chrono::steady_clock::now(), last_reload_ + kReloadSpacing);
    schedule_reload(due, /*retry=*/false);
  }

  void schedule_reload(std::chrono::steady_clock::time_point due, bool retry) {
    reload_pending_ = true;
    reload_timer_.expires_at(due);
    reload_timer_.async_wait([this, retry](const boost::system::error_code& ec) {
      if (ec) return;
      reload_pending_ = false;
      last_reload_ = std::chrono::steady_clock::now();
      ++metrics_.reloads;
      notify_service_manager("RELOADING=1");
      reload_config(retry);
      notify_service_manager(fmt::format("READY=1\nSTATUS=watching {} log(s)", logs_.size()));
    });
  }

  void reload_config(bool retry) {
    if (config_.source == "inline") {
      log_line(kNotice, "SIGHUP: the inline config has nothing to reload");
      return;
    }
    auto fresh = load_daemon_config(config_.source);
    if (!fresh && !retry) {
      schedule_reload(std::chrono::steady_clock::now() + kReloadRetry, /*retry=*/true);
      return;
    }
    if (!fresh) {
      log_line(kError, "SIGHUP: keeping the old config: {}", fresh.error().message);
      return;
    }
    // A log whose rule is unchanged stays as it is (its incident, its watch, its descriptor);
    // one whose rule changed or went away is read to its end and committed under the old
    // config, then tracked again under the new one from its stored offset.
    logs_.let_go_if([&fresh](const Tracked& file) {
      const WatchRule* rule = nullptr;
      if (file.rule.source == "slurm") {
        for (const WatchRule& candidate : fresh->watch) {
          if (candidate.source == "slurm") {
            rule = &candidate;
            break;
          }
        }
      } else {
        rule = rule_for(fresh->watch, file.path());
      }
      return rule == nullptr || *rule != file.rule;
    });
    replace_dispatcher(*fresh);
    config_ = std::move(*fresh);
    preflight_.configure(config_);
    logs_.set_settle(std::chrono::milliseconds(config_.settle_ms));
    scheduler_.set_burst_check(std::chrono::milliseconds(config_.burst_check_ms));
    for (const std::string& warning : config_.warnings) log_line(kWarning, "{}", warning);
    // Kept once made: its questions to the UI under way answer into it.
    if (healer_) {
      healer_->set_config(config_.heal);
    } else if (config_.heal.enabled()) {
      healer_ = make_healer();
    }
    slurm_.configure(config_.watch);
    start_gpu_monitor();
    if (!start_fleet_shipper()) log_line(kError, "SIGHUP: no fleet store until the next reload");
    discovery_.scan_all();
    log_line(kNotice, "SIGHUP: config reloaded from {} ({} rule(s))", config_.source,
             config_.watch.size());
  }

  // The old dispatcher may have a request in flight: it lives until that answers, and the new
  // one waits so that the row is not sent twice.
  void replace_dispatcher(const DaemonConfig& fresh) {
    auto dispatcher = std::make_unique<AlertDispatcher>(io_, store_, fresh, &metrics_);
    if (auto started = dispatcher->start(); !started) {
      log_line(kError, "SIGHUP: keeping the old alert receivers: {}", started.error().message);
      return;
    }
    dispatcher->hold();
    if (dispatcher_) {
      dispatcher->take_over(*dispatcher_);
      AlertDispatcher* old = dispatcher_.get();
      retired_dispatchers_.push_back(std::move(dispatcher_));
      old->retire([this, old] {
        std::erase_if(retired_dispatchers_, [old](const auto& d) { return d.get() == old; });
        if (retired_dispatchers_.empty() && dispatcher_) dispatcher_->release();
      });
    }
    dispatcher_ = std::move(dispatcher);
  }

  asio::io_context& io_;
  db::Store& store_;
  std::string store_path_;
  DaemonConfig config_;
  bool verbose_;
  Metrics metrics_;
  ReadBuffer buffer_{kReadChunk};
  EventSink sink_;
  JobRegistry registry_;
  PreflightAlerts preflight_;
  ReadScheduler scheduler_;
  FollowedLogs logs_;
  std::optional<DirectoryWatcher> watcher_;
  asio::posix::stream_descriptor inotify_;
  asio::steady_timer rescan_timer_{io_};
  asio::steady_timer settle_timer_{io_};
  asio::steady_timer checkpoint_timer_{io_};
  bool checkpoint_armed_ = false;
  asio::signal_set signals_;
  asio::steady_timer reload_timer_{io_};
  bool reload_pending_ = false;
  std::chrono::steady_clock::time_point last_reload_{};
  GpuMonitor gpu_;
  std::unique_ptr<WalCheckpointer> wal_checkpointer_;
  std::unique_ptr<FleetShipper> fleet_;  // `store: postgresql://...`
  std::unique_ptr<AlertDispatcher> dispatcher_;
  std::vector<std::unique_ptr<AlertDispatcher>> retired_dispatchers_;  // draining after SIGHUP
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<UiHealer> healer_;  // the `heal:` section, when present
  asio::steady_timer watchdog_timer_{io_};
  std::chrono::microseconds watchdog_interval_{0};
  int textfile_error_logged_ = 0;
  std::optional<db::StoreRecovery> recovery_;  // this start follows one
  std::optional<std::string> damage_;          // the loop stopped for a recovery
  bool first_scan_marker_pending_ = false;     // its write failed: tried again at the next commit
  asio::steady_timer store_retry_timer_{io_};
  bool store_retry_armed_ = false;
  bool rescan_on_retry_ = false;  // a log could not be registered: scan again on the retry
  LogDiscovery discovery_{config_, logs_, slurm_, *this};
  SlurmSource slurm_{io_, logs_, *this, [this] { discovery_.scan_all(); }, verbose_};  // last:
  // its squeue thread stops before the rest goes
};

}  // namespace

int run_daemon(DaemonConfig config, const std::string& store_path, bool verbose,
               CardSizeProvider card_size) {
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
  // A damaged store is moved aside and salvaged here rather than refused: refusing it was a
  // restart loop under systemd, and no OOM was stored until a person came.
  auto recovered = db::recover_if_damaged(store_path, unix_now());
  if (!recovered) {
    log_line(kError, "store {}: {}", store_path, recovered.error().message);
    return 2;
  }
  std::optional<db::StoreRecovery> recovery = std::move(*recovered);
  std::vector<int64_t> recovered_at;
  for (;;) {
    if (recovery) recovered_at.push_back(recovery->recovered_at);
    // A short busy timeout: a locked store is retried by the loop's own backoff, not waited on.
    auto store = db::Store::open(store_path, 250);
    if (!store && store.error().code == ErrorCode::kDatabaseDamaged && !recovery) {
      // Damage quick_check did not see, met by the migration.
      auto again = db::recover_store(store_path, store.error().message, unix_now());
      if (!again) {
        log_line(kError, "store {}: {}", store_path, again.error().message);
        return 2;
      }
      recovery = std::move(*again);
      continue;
    }
    if (!store) {
      log_line(kError, "store {}: {}", store_path, store.error().message);
      return 2;
    }
    std::optional<std::string> damage;
    {
      asio::io_context io;
      Daemon daemon(io, **store, store_path, std::move(config), verbose, card_size);
      daemon.set_recovery(std::move(recovery), recovered_at.size());
      if (!daemon.start()) return 1;
      io.run();
      damage = daemon.damage();
      config = daemon.take_config();
    }
    store->reset();
    if (!damage) return 0;
    // A fresh store damaged again and again is a failing disk, not something a recovery mends:
    // the third within an hour stops the daemon (exit 2) instead of salvaging in a loop.
    const int64_t now = unix_now();
    if (std::count_if(recovered_at.begin(), recovered_at.end(),
                      [now](int64_t at) { return now - at < 3600; }) >= 2) {
      log_line(kCritical,
               "store {} was damaged again ({}) after two recoveries within an hour: the disk may "
               "be failing; stopping",
               store_path, *damage);
      return 2;
    }
    auto again = db::recover_store(store_path, *damage, now);
    if (!again) {
      log_line(kError, "store {}: {}", store_path, again.error().message);
      return 2;
    }
    recovery = std::move(*again);
  }
}

}  // namespace oomtriage::daemon
