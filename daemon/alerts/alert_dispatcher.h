// daemon/alerts/alert_dispatcher.h
//
// Delivers the alert outbox. One lane per receiver, one request in flight per lane, oldest first,
// so a slow or dead receiver never delays another or the tailing. 2xx: delivered (never sent
// again); 429: retried after Retry-After; 5xx, timeouts and network errors: retried with
// exponential backoff and jitter up to the receiver's horizon; other 4xx: failed, logged once.
// A crash between sending and marking sends again with the same webhook-id (the event id), so
// delivery is at-least-once and receivers can deduplicate.
//
// Waiting is on the steady clock: a row's next attempt is kept in memory as a steady time; the
// wall-clock time stored with it is for people and restarts, and is clamped on load to at most
// retry_max_ms away, so a clock stepped back an hour or forward two days delays no retry and
// fails no alert early. The horizon counts attempts (as many as the backoff fits in it) and
// steady time. Storm control: with group_wait_ms, the alerts that come due within the window
// of the first go out as one message listing them (alert_payload.h AlertContent::storm).
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/alerts/alert_payload.h"
#include "daemon/common/clock.h"
#include "daemon/common/daemon_config.h"
#include "daemon/net/http_client.h"
#include "daemon/common/metrics.h"
#include "db/store.h"

namespace oomtriage::daemon {

// The HTTP request a receiver gets for one alert (or one burst of recovered ones).
HttpRequest alert_request(const Receiver& receiver, const AlertContent& alert, int64_t now_unix);

class AlertDispatcher {
 public:
  // Waits, windows and backoffs are on `clock`; `wall_clock` gives Unix seconds (injected by
  // tests that step it apart from the steady clock; `clock`'s when null).
  AlertDispatcher(boost::asio::io_context& io, db::Store& store, const DaemonConfig& config,
                  Metrics* metrics = nullptr, std::function<int64_t()> wall_clock = nullptr,
                  LoopClock& clock = real_clock());
  ~AlertDispatcher();
  // Builds each receiver's TLS trust store; an error names the receiver whose one cannot be
  // read. Sends nothing until poke().
  Result<Ok> start();
  // New outbox rows may be due: look now (not while held).
  void poke();
  // A dispatcher replacing one that still has requests in flight (SIGHUP) is held, so that it
  // cannot send those rows a second time; release() lets it go.
  void hold() { held_ = true; }
  void release();
  // Goes on where `old` (the dispatcher it replaces at a reload) was for each receiver of the
  // same name: the storm window already open, how long each row has waited, what was logged.
  // Without it a reload every second would open a new 2 s window every second, and no alert
  // would ever leave.
  void take_over(const AlertDispatcher& old);
  // Stops sending; `drained` is posted once no request is in flight (at once when none is). The
  // owner may destroy the dispatcher from `drained`, never before: a response still in flight
  // refers to it.
  void retire(std::function<void()> drained);
  bool in_flight() const;
  // One alert that is not an outbox row (the verdict of a healing), once to every receiver, not
  // retried: a failure is logged. retire() waits for it like for the outbox's requests.
  void send_once(AlertContent alert);

 private:
  struct Lane;
  void pump(Lane& lane);
  void arm_after(Lane& lane, std::chrono::steady_clock::duration delay);
  // Sends one alert unit (an OOM, or a recovered burst of one job), or several as a storm.
  void send(Lane& lane, std::vector<std::vector<db::OutboxItem>> units);

  boost::asio::io_context& io_;
  db::Store& store_;
  std::string host_;
  std::string web_url_;
  std::string scope_;  // the store's id: the scope of alert ids made of its row ids
  int group_seconds_;
  Metrics* metrics_;
  LoopClock& clock_;
  std::function<int64_t()> wall_clock_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  bool held_ = false;
  bool retired_ = false;
  int once_in_flight_ = 0;
  std::function<void()> drained_;
  void check_drained();
};

// `oomtriage alert test`: a sample alert to every receiver (or one), synchronously.
// A receiver's answer as a failure shows it: its first 200 characters on one line.
std::string response_excerpt(const std::string& body);

// This machine's host name: alerts and the fleet store name the node by it unless `host:` does.
std::string this_host();

int run_alert_test(const DaemonConfig& config, const std::optional<std::string>& receiver);

}  // namespace oomtriage::daemon
