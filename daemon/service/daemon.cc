// daemon/service/daemon.cc: the daemon's story, wiring its parts. run_daemon() takes the instance
// lock, opens the store and runs the Asio loop; Daemon (daemon_loop.h) reacts to the directory
// watcher's changes, the read scheduler's due reads, the settle, checkpoint, rescan and
// store-retry timers, and signals. The parts: the followed logs (followed_logs.h: tracking,
// identity, rotation, the descriptor budget), the read scheduler (read_scheduler.h: quiet logs
// watched, busy ones polled), the job registry (job_registry.h: jobs, runs, configs, ranking) and
// the event sink (event_sink.h). Each read of a log ends in one store transaction through the
// sink: its new events (with their outbox rows), its resume offset, anchor and analyzer
// checkpoint. This file holds the start, the GPU timeline's runs, a damaged store, the fleet
// shipper and the service manager's and metrics' side; reads and commits are in
// daemon_reads.cc, signals and reloads in daemon_reload.cc.
#include "daemon/service/daemon.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include "daemon/common/clock.h"
#include "daemon/common/guarded_run.h"
#include "daemon/common/journal_log.h"
#include "daemon/common/version.h"
#include "daemon/service/daemon_loop.h"
#include "daemon/service/service_manager.h"
#include "daemon/service/store_failures.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// The WAL is copied into the database this often, on its own thread (wal_checkpointer.h).
constexpr auto kWalCheckpointInterval = std::chrono::seconds(2);

// The parts that stamp the store take Unix seconds as a function: the loop's clock's.
std::function<int64_t()> wall_clock_of(LoopClock& clock) {
  return [&clock] { return clock.unix_now(); };
}

}  // namespace

Daemon::Daemon(asio::io_context& io, LoopClock& clock, db::Store& store, std::string store_path,
               DaemonConfig config, bool verbose, CardSizeProvider card_size)
    : io_(io),
      clock_(clock),
      store_(store),
      store_path_(std::move(store_path)),
      config_(std::move(config)),
      verbose_(verbose),
      sink_(store, metrics_, std::bind_front(&Daemon::poke_dispatcher, this), wall_clock_of(clock)),
      registry_(store, metrics_, wall_clock_of(clock)),
      preflight_(
          store, metrics_, wall_clock_of(clock),
          [this](AlertContent alert) {
            if (dispatcher_) dispatcher_->send_once(std::move(alert));
          },
          std::move(card_size), verbose),
      scheduler_(
          io, std::chrono::milliseconds(config_.read_interval_ms),
          [this](Tracked& file) { return read(file); }, clock),
      logs_(io, store, registry_, scheduler_, metrics_, buffer_, *this, wall_clock_of(clock),
            verbose, clock),
      inotify_(io),
      signals_(io, SIGINT, SIGTERM, SIGHUP),
      gpu_(
          io, store, metrics_, wall_clock_of(clock), [this] { return sampled_runs(); },
          [this](AlertContent alert) {
            if (dispatcher_) dispatcher_->send_once(std::move(alert));
          },
          [](const std::string& line) { log_line(kNotice, "{}", line); }, clock) {
  sink_.on_damaged([this](const std::string& message) { store_damaged(message); });
}

Daemon::~Daemon() {
  // The watcher owns the inotify descriptor.
  if (inotify_.is_open()) inotify_.release();
  for (int fd : {identity_folder_, identity_spare_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool Daemon::start() {
  metrics_.version = kVersion;
  // The WAL is checkpointed off the loop; SQLite's own checkpoint is only a safety net under
  // the checkpointer thread: a store that refuses the setting keeps SQLite's default (1,000
  // pages), which is also safe.
  count_store_failure(metrics_, "set_auto_checkpoint",
                      store_.set_auto_checkpoint(WalCheckpointer::kLoopAutoCheckpointPages));
  wal_checkpointer_ = std::make_unique<WalCheckpointer>(store_path_, kWalCheckpointInterval);
  const std::string folder = fs::path(store_path_).parent_path().string();
  identity_folder_ =
      ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  identity_spare_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
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
  dispatcher_ = std::make_unique<AlertDispatcher>(io_, store_, config_, &metrics_, nullptr, clock_);
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
  keep_identity();
  slurm_.configure(config_.watch);
  if (first_start) mark_first_scan_done();
  logs_.drain_rotated_while_down();
  arm_rescan();
  arm_live();  // takes up the stalls stored before this start
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

bool Daemon::alerts_in_flight() const {
  if (dispatcher_ && dispatcher_->in_flight()) return true;
  return std::any_of(retired_dispatchers_.begin(), retired_dispatchers_.end(),
                     [](const auto& retired) { return retired->in_flight(); });
}

// --- the GPU memory timeline (gpu_monitor.h) ---------------------------------------------------
void Daemon::start_gpu_monitor() {
  gpu_.start(std::chrono::milliseconds(config_.gpu_sample_ms), config_.near_oom_share);
}

// Every followed run with its logs, folder, and where its log says it is now.
std::vector<SampledRun> Daemon::sampled_runs() {
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
    if (log->job.config_path) run.config = *log->job.config_path;
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
      const triage::JobView job{log->job.config ? &*log->job.config : nullptr,
                                log->job.config_problem, &log->job.files};
      return triage::triage_pressure(
          triage::pressure_of_near_oom(phase, log->analyzer().training_step(), peak, card),
          log->analyzer().trainer(), log->analyzer().arguments(), job, {});
    };
  }
  std::vector<SampledRun> list;
  list.reserve(runs.size());
  for (auto& [id, run] : runs) list.push_back(std::move(run));
  return list;
}

// --- a damaged store ----------------------------------------------------------------------
// --- a damaged store ----------------------------------------------------------------------
// SQLite found the store damaged: retrying cannot mend it. The loop stops (no drain: nothing
// more can be stored) and run_daemon() moves the store aside, salvages it and starts again.
void Daemon::store_damaged(const std::string& message) {
  if (damage_) return;
  damage_ = message;
  log_line(kCritical, "store {} is damaged ({}): moving it aside and salvaging it", store_path_,
           message);
  io_.stop();
}

// The state dir's record of how far this store's commits came (db/store_identity.h), rewritten
// when that changed: after a commit of new events, before their alerts can go out, and after
// new files (the live timer). A failure is said once; the next commit tries again.
void Daemon::keep_identity() {
  auto position = store_.position();
  if (!position || *position == identity_written_) return;
  if (identity_spare_ >= 0) ::close(identity_spare_);  // its slot is the write's
  auto written = db::write_identity(store_path_, *position, identity_folder_);
  identity_spare_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!written) {
    if (!identity_failing_) log_line(kWarning, "store identity: {}", written.error().message);
    identity_failing_ = true;
    return;
  }
  identity_failing_ = false;
  identity_written_ = *position;
}

void Daemon::handler_failed(const std::string& what) {
  ++metrics_.handler_failures;
  if (handler_failures_said_.size() < 16 && handler_failures_said_.insert(what).second) {
    log_line(kCritical,
             "a part of the loop failed ({}); the daemon goes on, but what that part was doing "
             "may be left undone until a restart: please report this line",
             what);
  }
}

// One critical journal line and one alert per recovery; `report` and `check-config` read the
// same facts from the store's meta.
void Daemon::announce_recovery(const db::StoreRecovery& recovery) {
  if (recovery.behind) {
    log_line(kCritical,
             "store {} is not the store this daemon last wrote: {}. It was recovered ({}; {}); "
             "the logs whose read position was lost are read again and their alerts say they "
             "may have gone out before.",
             store_path_, recovery.reason,
             recovery.damaged_path.empty() ? "kept in place" : "from " + recovery.damaged_path,
             recovery.summary());
  } else {
    log_line(kCritical,
             "store {} was damaged ({}); kept as {} and replaced by a fresh store: {}. Logs it "
             "no longer knew are read from their start; their alerts say they may have gone out "
             "before.",
             store_path_, recovery.reason, recovery.damaged_path, recovery.summary());
  }
  AlertContent alert;
  alert.store_recovered = true;
  alert.event_id = recovery.recovered_at;
  alert.job = "oomtriage store";
  alert.step = "-";
  alert.log_path = recovery.damaged_path;
  alert.message =
      recovery.behind
          ? fmt::format(
                "The store {} was not the store this daemon last wrote: {}. It was "
                "recovered ({}): {}. Logs whose read position was lost are read again.",
                store_path_, recovery.reason,
                recovery.damaged_path.empty() ? "kept in place" : "from " + recovery.damaged_path,
                recovery.summary())
          : fmt::format(
                "The store {} was damaged ({}). It was moved aside to {} and a fresh "
                "store took its place: {}. Logs whose read position was lost are read "
                "again from their start.",
                store_path_, recovery.reason, recovery.damaged_path, recovery.summary());
  alert.starts_at = utc_time(recovery.recovered_at);
  if (dispatcher_) dispatcher_->send_once(std::move(alert));
}

// Its verdicts go out through whichever dispatcher is current.
std::unique_ptr<UiHealer> Daemon::make_healer() {
  return std::make_unique<UiHealer>(
      io_, store_, config_.heal,
      [this](AlertContent alert) {
        if (dispatcher_) dispatcher_->send_once(std::move(alert));
      },
      clock_);
}

void Daemon::preflight_check(const Tracked& file) {
  const Job& job = file.job;
  if (!job.config || !job.config_sha256) return;
  preflight_.on_job({job.job_id, job.name, std::string(parsers::to_string(job.config->trainer)),
                     file.path(), *job.config_sha256, &*job.config});
}

// New events were stored: their alerts are due, and the fleet store wants them.
void Daemon::poke_dispatcher() {
  keep_identity();  // before any alert of what was just committed can go out
  if (dispatcher_) dispatcher_->poke();
  if (fleet_) fleet_->poke();
}

// `store: postgresql://...`: the outbox queues for it and a thread ships it. Without one the
// outbox is off (and emptied), so a node that never joins a fleet queues nothing.
bool Daemon::start_fleet_shipper() {
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
void Daemon::arm_watchdog() {
  watchdog_timer_->expires_after(watchdog_interval_);
  watchdog_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    notify_service_manager("WATCHDOG=1");
    arm_watchdog();
  });
}

std::string Daemon::render_metrics() {
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
void Daemon::write_textfile() {
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
  // What the state dir kept of the store it last wrote: a store that is not it (emptied, put
  // back from a backup, its WAL's tail lost) is a recovery, not a first start.
  auto kept = db::read_identity(store_path);
  if (!kept) log_line(kWarning, "{}; the store is taken as it is", kept.error().message);
  // A damaged store is moved aside and salvaged here rather than refused: refusing it was a
  // restart loop under systemd, and no OOM was stored until a person came.
  auto recovered = db::recover_if_damaged(store_path, unix_now());
  if (!recovered) {
    log_line(kError, "store {}: {}", store_path, recovered.error().message);
    return 2;
  }
  std::optional<db::StoreRecovery> recovery = std::move(*recovered);
  if (kept && *kept) {
    auto behind = db::recover_if_behind(store_path, *kept, recovery.has_value(), unix_now());
    if (!behind) {
      log_line(kError, "store {}: {}", store_path, behind.error().message);
      return 2;
    }
    if (*behind) recovery = std::move(*behind);
  }
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
      Daemon daemon(io, real_clock(), **store, store_path, std::move(config), verbose, card_size);
      daemon.set_recovery(std::move(recovery), recovered_at.size());
      if (!daemon.start()) return 1;
      run_guarded(io, [&daemon](const std::string& what) { daemon.handler_failed(what); });
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
