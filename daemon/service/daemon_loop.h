// daemon/service/daemon_loop.h
//
// The daemon's loop as one class, defined in parts: daemon.cc (run_daemon(), the start, the GPU
// timeline's runs, the store's damage and recovery, the fleet shipper, the service manager and
// metrics), daemon_reads.cc (inotify's changes, reads, commits, the settle, checkpoint, rescan
// and store-retry timers) and daemon_reload.cc (signals, SIGHUP reloads, the alert dispatcher's
// swap). Nothing outside those files uses it; run_daemon() (daemon.h) is the entry point.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/common/clock.h"
#include "daemon/common/daemon_config.h"
#include "daemon/common/metrics.h"
#include "daemon/common/read_buffer.h"
#include "daemon/net/metrics_server.h"
#include "daemon/service/directory_watcher.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/fleet_shipper.h"
#include "daemon/service/followed_logs.h"
#include "daemon/service/gpu_monitor.h"
#include "daemon/service/job_registry.h"
#include "daemon/service/log_discovery.h"
#include "daemon/service/preflight_alerts.h"
#include "daemon/service/read_scheduler.h"
#include "daemon/service/slurm_source.h"
#include "daemon/service/ui_healer.h"
#include "daemon/service/wal_checkpointer.h"
#include "db/store.h"
#include "db/store_recovery.h"

namespace oomtriage::daemon {

class Daemon final : public LogHost {
 public:
  // Every wait, timer and timestamp of the loop comes from `clock` (real_clock() but in tests).
  Daemon(boost::asio::io_context& io, LoopClock& clock, db::Store& store, std::string store_path,
         DaemonConfig config, bool verbose, CardSizeProvider card_size);
  ~Daemon() override;

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

  bool start();
  // A handler of the loop threw (daemon/common/guarded_run.h): said once per message, counted,
  // and the loop goes on.
  void handler_failed(const std::string& what);
  // A request to a receiver is under way (a test on virtual time waits for its answer).
  bool alerts_in_flight() const;

 private:
  // daemon.cc
  void start_gpu_monitor();
  std::vector<SampledRun> sampled_runs();
  void store_damaged(const std::string& message);
  void announce_recovery(const db::StoreRecovery& recovery);
  std::unique_ptr<UiHealer> make_healer();
  void preflight_check(const Tracked& file);
  void poke_dispatcher();
  void keep_identity();
  bool start_fleet_shipper();
  void arm_watchdog();
  std::string render_metrics();
  void write_textfile();

  // daemon_reads.cc
  std::optional<WatchRule> rule_of(const std::string& path) const override;
  void wait_inotify();
  void on_changes(const std::vector<FsChange>& changes);
  uint64_t read(Tracked& file) override;
  bool commit(Tracked& file, std::vector<parsers::OomEvent> events, bool can_rewind) override;
  void store_refused(const Error& error) override;
  db::Progress progress_of(Tracked& file, std::vector<parsers::OomEvent> events);
  void committed(Tracked& file, const db::Progress& progress);
  void run_changed(Tracked& file, parsers::Outcome outcome);
  void mark_first_scan_done();
  void rewind(Tracked& file);
  void arm_store_retry();
  void arm_checkpoint();
  void arm_rescan();
  void arm_settle();

  // daemon_live.cc
  void arm_live();
  void write_live();
  void stall(Tracked& file, int64_t since, db::LiveState& live);
  void unstall(Tracked& file);

  // daemon_reload.cc
  void wait_signals();
  void request_reload();
  void schedule_reload(std::chrono::steady_clock::time_point due, bool retry);
  void reload_config(bool retry);
  void replace_dispatcher(const DaemonConfig& fresh);

  boost::asio::io_context& io_;
  LoopClock& clock_;
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
  boost::asio::posix::stream_descriptor inotify_;
  std::unique_ptr<LoopTimer> rescan_timer_ = clock_.timer(io_);
  std::unique_ptr<LoopTimer> settle_timer_ = clock_.timer(io_);
  std::unique_ptr<LoopTimer> checkpoint_timer_ = clock_.timer(io_);
  bool checkpoint_armed_ = false;
  std::unique_ptr<LoopTimer> live_timer_ = clock_.timer(io_);
  bool live_armed_ = false;
  boost::asio::signal_set signals_;
  std::unique_ptr<LoopTimer> reload_timer_ = clock_.timer(io_);
  bool reload_pending_ = false;
  std::chrono::steady_clock::time_point last_reload_{};
  GpuMonitor gpu_;
  std::unique_ptr<WalCheckpointer> wal_checkpointer_;
  std::unique_ptr<FleetShipper> fleet_;  // `store: postgresql://...`
  std::unique_ptr<AlertDispatcher> dispatcher_;
  std::vector<std::unique_ptr<AlertDispatcher>> retired_dispatchers_;  // draining after SIGHUP
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<UiHealer> healer_;  // the `heal:` section, when present
  std::unique_ptr<LoopTimer> watchdog_timer_ = clock_.timer(io_);
  std::chrono::microseconds watchdog_interval_{0};
  int textfile_error_logged_ = 0;
  std::optional<db::StoreRecovery> recovery_;  // this start follows one
  db::StorePosition identity_written_;         // what the state dir's identity says now
  bool identity_failing_ = false;
  std::set<std::string> handler_failures_said_;
  // The store's folder and a spare descriptor, held from the start: the identity is written
  // with the spare's slot even when busy logs have taken every other descriptor.
  int identity_folder_ = -1;
  int identity_spare_ = -1;
  std::optional<std::string> damage_;       // the loop stopped for a recovery
  bool first_scan_marker_pending_ = false;  // its write failed: tried again at the next commit
  std::unique_ptr<LoopTimer> store_retry_timer_ = clock_.timer(io_);
  bool store_retry_armed_ = false;
  bool rescan_on_retry_ = false;  // a log could not be registered: scan again on the retry
  LogDiscovery discovery_{config_, logs_, slurm_, *this};
  SlurmSource slurm_{io_, logs_, *this, [this] { discovery_.scan_all(); }, verbose_};  // last:
  // its squeue thread stops before the rest goes
};

}  // namespace oomtriage::daemon
