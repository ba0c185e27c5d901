// daemon/service/daemon_reload.cc: the daemon's signals (Daemon, daemon_loop.h). SIGTERM and
// SIGINT drain every log and stop the loop; SIGHUP reloads the config, coalesced and spaced, and
// swaps the alert dispatcher without sending a row twice.
#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>

#include "daemon/common/journal_log.h"
#include "daemon/service/daemon_loop.h"
#include "daemon/service/service_manager.h"

namespace oomtriage::daemon {
namespace {

// --- reloads (SIGHUP), coalesced ---------------------------------------------------------
// A storm of SIGHUPs (a config-management loop gone wrong) must not hold the loop that stores
// and alerts: a signal while a reload is pending adds nothing (the pending one reads the file
// as it is when it runs), and reloads run at most every kReloadSpacing. A file that does not
// parse is read once more after kReloadRetry (it may be half-written) before the old config
// is kept.
constexpr std::chrono::milliseconds kReloadSpacing{1000};
constexpr std::chrono::milliseconds kReloadRetry{300};

}  // namespace

void Daemon::wait_signals() {
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

void Daemon::request_reload() {
  if (reload_pending_) {
    ++metrics_.reloads_coalesced;
    return;
  }
  const auto due = std::max(clock_.now(), last_reload_ + kReloadSpacing);
  schedule_reload(due, /*retry=*/false);
}

void Daemon::schedule_reload(std::chrono::steady_clock::time_point due, bool retry) {
  reload_pending_ = true;
  reload_timer_->expires_at(due);
  reload_timer_->async_wait([this, retry](const boost::system::error_code& ec) {
    if (ec) return;
    reload_pending_ = false;
    last_reload_ = clock_.now();
    ++metrics_.reloads;
    notify_service_manager("RELOADING=1");
    reload_config(retry);
    notify_service_manager(fmt::format("READY=1\nSTATUS=watching {} log(s)", logs_.size()));
  });
}

void Daemon::reload_config(bool retry) {
  if (config_.source == "inline") {
    log_line(kNotice, "SIGHUP: the inline config has nothing to reload");
    return;
  }
  auto fresh = load_daemon_config(config_.source);
  if (!fresh && !retry) {
    schedule_reload(clock_.now() + kReloadRetry, /*retry=*/true);
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
void Daemon::replace_dispatcher(const DaemonConfig& fresh) {
  auto dispatcher =
      std::make_unique<AlertDispatcher>(io_, store_, fresh, &metrics_, nullptr, clock_);
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

}  // namespace oomtriage::daemon
