// daemon/cli/run_alerts.h
//
// The alerts of `oomtriage run`. The OOM events it stores go out through the store's outbox as
// the daemon's do: an AlertDispatcher on a thread of its own, with its own store connection
// (delivery at least once, each alert's webhook-id its event id). The verdict of a healing run
// (healed, exhausted, stopped) goes out once to every receiver, directly. At the end it waits a
// few seconds for the outbox; what is still pending is left to a daemon sharing the store.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/alerts/alert_payload.h"
#include "daemon/common/daemon_config.h"
#include "db/store.h"

namespace oomtriage::daemon {

class AlertDispatcher;

class RunAlerts {
 public:
  // Sends nothing when `config.alerts` is empty.
  RunAlerts(DaemonConfig config, const std::string& store_path);
  ~RunAlerts();
  RunAlerts(const RunAlerts&) = delete;
  RunAlerts& operator=(const RunAlerts&) = delete;

  // The receivers' names, for the outbox rows of new events.
  std::vector<std::string> receivers() const;
  // New outbox rows are in the store.
  void poke();
  // The heal verdict, once to each receiver.
  void send_verdict(AlertContent verdict);

 private:
  void wait_for_outbox();

  DaemonConfig config_;
  boost::asio::io_context io_;
  std::unique_ptr<db::Store> store_;  // used on the alert thread only
  std::unique_ptr<AlertDispatcher> dispatcher_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
};

}  // namespace oomtriage::daemon
