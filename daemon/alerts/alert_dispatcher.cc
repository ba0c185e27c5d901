// daemon/alerts/alert_dispatcher.cc: outbox lanes, grouping, request building, the alert test.
#include "daemon/alerts/alert_dispatcher.h"

#include "daemon/alerts/retry_policy.h"
#include "daemon/alerts/webhook_signature.h"
#include "daemon/common/clock.h"
#include "daemon/common/journal_log.h"
#include "daemon/common/receiver_kinds.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;

}  // namespace

std::string response_excerpt(const std::string& body) {
  std::string text = truncate_utf8(body, 200);
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text.size() < body.size() ? text + "…" : text;
}

std::string this_host() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

namespace {

nlohmann::json payload_of(AlertPayload payload, const Receiver& receiver,
                          const AlertContent& alert) {
  switch (payload) {
    case AlertPayload::kSlack: return slack_payload(alert);
    case AlertPayload::kDiscord: return discord_payload(alert);
    case AlertPayload::kAlertmanagerApi: return alertmanager_api_payload(alert);
    case AlertPayload::kAlertmanagerWebhook: break;
  }
  return alertmanager_webhook_payload(alert, receiver.name);
}

}  // namespace

HttpRequest alert_request(const Receiver& receiver, const AlertContent& alert, int64_t now_unix) {
  HttpRequest request;
  request.url = receiver.url;
  request.timeout = std::chrono::milliseconds(receiver.timeout_ms);
  // A receiver made in code with a type no row has (tests) is sent the webhook JSON, unsigned.
  const ReceiverKind* kind = find_receiver_kind(receiver.type);
  const nlohmann::json body =
      payload_of(kind ? kind->payload : AlertPayload::kAlertmanagerWebhook, receiver, alert);
  if (kind && !kind->url_path.empty()) {
    std::string base = receiver.url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    if (base.find(kind->url_path) == std::string::npos)
      request.url = base + std::string(kind->url_path);
  }
  request.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (kind && kind->standard_webhook_headers) {
    const std::string id = alert.webhook_id();
    const std::string timestamp = std::to_string(now_unix);
    request.headers.emplace_back("webhook-id", id);
    request.headers.emplace_back("webhook-timestamp", timestamp);
    if (!receiver.hmac_secret.empty()) {
      request.headers.emplace_back(
          "webhook-signature",
          standard_webhook_signature(receiver.hmac_secret, id, timestamp, request.body));
    }
  }
  return request;
}

using Steady = std::chrono::steady_clock;

struct AlertDispatcher::Lane {
  Receiver receiver;
  std::unique_ptr<asio::ssl::context> tls;
  std::unique_ptr<LoopTimer> timer;
  bool in_flight = false;
  std::set<std::string> logged;  // each distinct failure is logged once
  std::mt19937 jitter{std::random_device{}()};
  // Per pending row, on the steady clock: when it may be sent (again), and since when it has
  // waited (its recovered burst's window, its retry horizon).
  std::map<int64_t, Steady::time_point> not_before;
  std::map<int64_t, Steady::time_point> waiting_since;
  std::optional<Steady::time_point> storm_opened;  // the first unsent alert of this window
  explicit Lane(std::unique_ptr<LoopTimer> t) : timer(std::move(t)) {}
};

AlertDispatcher::AlertDispatcher(asio::io_context& io, db::Store& store, const DaemonConfig& config,
                                 Metrics* metrics, std::function<int64_t()> wall_clock,
                                 LoopClock& clock)
    : io_(io),
      store_(store),
      host_(config.host.empty() ? this_host() : config.host),
      web_url_(config.web_url),
      group_seconds_(config.alert_group_seconds),
      metrics_(metrics),
      clock_(clock),
      wall_clock_(wall_clock ? std::move(wall_clock)
                             : std::function<int64_t()>([&clock] { return clock.unix_now(); })) {
  // Read once: a recovered store (which gets a new id) is run by a new daemon and dispatcher.
  if (auto id = store.store_id()) scope_ = *id;
  for (const Receiver& receiver : config.alerts) {
    auto lane = std::make_unique<Lane>(clock.timer(io));
    lane->receiver = receiver;
    lanes_.push_back(std::move(lane));
  }
}

AlertDispatcher::~AlertDispatcher() = default;

Result<Ok> AlertDispatcher::start() {
  for (auto& lane : lanes_) {
    auto tls = make_tls_context(lane->receiver.ca_file);
    if (!tls) {
      return make_error(tls.error().code,
                        fmt::format("alert {}: {}", lane->receiver.name, tls.error().message));
    }
    lane->tls = std::move(*tls);
  }
  return Ok{};
}

void AlertDispatcher::poke() {
  if (held_ || retired_) return;
  for (auto& lane : lanes_) {
    asio::post(io_, [this, l = lane.get()] { pump(*l); });
  }
}

void AlertDispatcher::arm_after(Lane& lane, Steady::duration delay) {
  lane.timer->expires_after(delay);
  lane.timer->async_wait([this, &lane](const boost::system::error_code& ec) {
    if (!ec) pump(lane);
  });
}

void AlertDispatcher::take_over(const AlertDispatcher& old) {
  for (auto& lane : lanes_) {
    for (const auto& before : old.lanes_) {
      if (before->receiver.name != lane->receiver.name) continue;
      // When each row may go comes from the store again (a row in flight may have been given
      // a new time since); how long it has waited and the open window carry over.
      lane->waiting_since = before->waiting_since;
      lane->storm_opened = before->storm_opened;
      lane->logged = before->logged;
    }
  }
}

void AlertDispatcher::release() {
  held_ = false;
  poke();
}

bool AlertDispatcher::in_flight() const {
  return once_in_flight_ > 0 || std::any_of(lanes_.begin(), lanes_.end(),
                                            [](const auto& lane) { return lane->in_flight; });
}

void AlertDispatcher::send_once(AlertContent alert) {
  if (retired_) return;
  if (alert.host.empty()) alert.host = host_;
  if (alert.scope.empty()) alert.scope = scope_;
  if (alert.url.empty() && !alert.job.empty() && !alert.store_recovered) {
    alert.url = job_page_url(web_url_, alert.job);
  }
  for (auto& lane : lanes_) {
    if (!lane->tls) continue;
    ++once_in_flight_;
    http_send(io_, *lane->tls, alert_request(lane->receiver, alert, wall_clock_()),
              [this, name = lane->receiver.name](const Result<HttpResponse>& response) {
                --once_in_flight_;
                if (!response || response->status < 200 || response->status >= 300) {
                  log_line(kWarning, "alert to {} failed: {}", name, describe(response));
                }
                check_drained();
              });
  }
}

void AlertDispatcher::retire(std::function<void()> drained) {
  retired_ = true;
  drained_ = std::move(drained);
  for (auto& lane : lanes_) lane->timer->cancel();
  check_drained();
}

void AlertDispatcher::check_drained() {
  if (!retired_ || !drained_ || in_flight()) return;
  asio::post(io_, std::move(drained_));
  drained_ = nullptr;
}

void AlertDispatcher::pump(Lane& lane) {
  if (lane.in_flight || held_ || retired_) return;
  const int64_t wall = wall_clock_();
  const Steady::time_point now = clock_.now();
  // Every pending row; when each is due is this lane's steady bookkeeping, not the stored time.
  auto pending = store_.due_alerts(lane.receiver.name, std::numeric_limits<int64_t>::max(), 200);
  if (!pending) {
    log_line(kError, "alert {}: store: {}", lane.receiver.name, pending.error().message);
    return;
  }
  // A stored time is read once, when the row is first seen, and never trusted further than
  // retry_max_ms either way: the wall clock it was written by may have been stepped since.
  // (Without overflow: a row edited by hand may hold any integer.)
  const auto clamp = [&lane](int64_t later, int64_t earlier) {
    const int64_t max_ms = lane.receiver.retry_max_ms;
    int64_t seconds = 0;
    if (__builtin_sub_overflow(later, earlier, &seconds) || seconds > max_ms / 1000 + 1)
      return std::chrono::milliseconds(later > earlier ? max_ms : 0);
    return std::chrono::milliseconds(std::clamp<int64_t>(seconds * 1000, 0, max_ms));
  };

  std::set<int64_t> ids;
  std::vector<db::OutboxItem> due;
  std::optional<Steady::time_point> wake;
  const auto wake_at = [&wake](Steady::time_point at) { wake = wake ? std::min(*wake, at) : at; };
  for (db::OutboxItem& item : *pending) {
    ids.insert(item.id);
    const auto since = lane.waiting_since.try_emplace(item.id, now - clamp(wall, item.created_at));
    const auto ready =
        lane.not_before.try_emplace(item.id, now + clamp(item.next_attempt_at, wall));
    (void)since;
    if (ready.first->second <= now) {
      due.push_back(std::move(item));
    } else {
      wake_at(ready.first->second);
    }
  }
  std::erase_if(lane.not_before, [&ids](const auto& kv) { return !ids.count(kv.first); });
  std::erase_if(lane.waiting_since, [&ids](const auto& kv) { return !ids.count(kv.first); });

  // The units ready to go, oldest first: each fatal OOM alone; a burst of recovered OOMs of one
  // job once its window passed (or a fatal OOM of that job follows it).
  std::vector<std::vector<db::OutboxItem>> units;
  std::set<std::string> grouped_jobs;
  for (size_t i = 0; i < due.size(); ++i) {
    const db::OutboxItem& item = due[i];
    if (grouped_jobs.count(item.job)) continue;
    if (!item.recovered) {
      units.push_back({item});
      continue;
    }
    grouped_jobs.insert(item.job);
    std::vector<db::OutboxItem> group;
    bool fatal_follows = false;
    for (size_t j = i; j < due.size(); ++j) {
      if (due[j].job != item.job) continue;
      if (!due[j].recovered) {
        fatal_follows = true;
        break;
      }
      group.push_back(due[j]);
    }
    const Steady::time_point ready_at =
        lane.waiting_since[item.id] + std::chrono::seconds(group_seconds_);
    if (fatal_follows || ready_at <= now) {
      units.push_back(std::move(group));
    } else {
      wake_at(ready_at);
    }
  }
  // (A fatal OOM behind a job's recovered burst goes in the next message, after the burst.)
  if (units.empty()) {
    lane.storm_opened.reset();
    if (wake) arm_after(lane, *wake - now);
    return;
  }
  const auto wait = std::chrono::milliseconds(lane.receiver.group_wait_ms);
  if (wait.count() == 0) {
    send(lane, {units.front()});
    return;
  }
  // Storm control: the window opens with the first unit ready and everything ready when it
  // closes goes as one message. Alerts already tried once do not wait for a window again.
  const bool retry = std::any_of(units.begin(), units.end(), [](const auto& unit) {
    return std::any_of(unit.begin(), unit.end(), [](const auto& i) { return i.attempts > 0; });
  });
  if (!retry) {
    if (!lane.storm_opened) lane.storm_opened = now;
    if (now < *lane.storm_opened + wait) {
      arm_after(lane, *lane.storm_opened + wait - now);
      return;
    }
  }
  lane.storm_opened.reset();
  send(lane, std::move(units));
}

void AlertDispatcher::send(Lane& lane, std::vector<std::vector<db::OutboxItem>> units) {
  const auto content_of = [this](const std::vector<db::OutboxItem>& unit) {
    const db::OutboxItem& last = unit.back();
    AlertContent alert = alert_content(unit.front().event_id, last.job, host_, last.trainer,
                                       last.model_family, last.log_path, last.event_json,
                                       last.fixes_json, utc_time(unit.front().created_at));
    alert.event_uuid = unit.front().event_uuid;
    alert.scope = scope_;
    alert.grouped = static_cast<int>(unit.size());
    if (unit.size() == 1) alert.revision = last.revision;
    alert.resent = last.resent;
    alert.url = job_page_url(web_url_, last.job);
    return alert;
  };
  AlertContent alert;
  if (units.size() == 1) {
    alert = content_of(units.front());
  } else {
    alert.host = host_;
    alert.starts_at = utc_time(units.front().front().created_at);
    for (const auto& unit : units) alert.storm.push_back(content_of(unit));
    if (metrics_) ++metrics_->alert_storms;
  }
  std::vector<db::OutboxItem> group;
  for (auto& unit : units) {
    for (auto& item : unit) group.push_back(std::move(item));
  }
  HttpRequest request = alert_request(lane.receiver, alert, wall_clock_());
  lane.in_flight = true;
  http_send(io_, *lane.tls, std::move(request),
            [this, &lane, group](const Result<HttpResponse>& response) {
              lane.in_flight = false;
              // Whatever path this takes, a retired dispatcher says when its last request is done.
              struct AfterResponse {
                AlertDispatcher* dispatcher;
                ~AfterResponse() { dispatcher->check_drained(); }
              } after{this};
              std::vector<int64_t> ids;
              int64_t attempts = 0;
              Steady::time_point since = clock_.now();
              for (const auto& item : group) {
                ids.push_back(item.id);
                attempts = std::max(attempts, item.attempts + 1);
                if (auto it = lane.waiting_since.find(item.id); it != lane.waiting_since.end())
                  since = std::min(since, it->second);
              }
              const int64_t now = wall_clock_();
              const int64_t waited =
                  std::chrono::duration_cast<std::chrono::seconds>(clock_.now() - since).count();
              const Receiver& r = lane.receiver;
              const auto log_once = [&](int priority, const std::string& what) {
                if (lane.logged.insert(what).second)
                  log_line(priority, "alert {} ({}): {}", r.name, redact_url(r.url), what);
              };
              const auto count = [&](const char* result) {
                if (metrics_) ++metrics_->alerts[{r.name, result}];
              };
              // A verdict the store did not keep: the row stays as it was and is sent again when
              // due (a receiver may see a repeat, with the same idempotency key); counted and
              // logged once.
              const auto keep = [&](const Result<Ok>& marked) {
                if (marked) return;
                if (metrics_) ++metrics_->store_errors["mark_alerts"];
                log_once(kWarning,
                         "the store did not keep the delivery result: " + marked.error().message);
              };
              const double jitter = std::uniform_real_distribution<double>(0.5, 1.5)(lane.jitter);
              DeliveryVerdict verdict = judge_response(response, r, attempts, waited, jitter);
              // What the receiver said, kept with the row (`oomtriage alerts --failed` shows it).
              const std::string said = response ? response->body : "";
              if (verdict.kind != DeliveryVerdict::kDelivered && !said.empty()) {
                verdict.reason += ": " + response_excerpt(said);
              }
              switch (verdict.kind) {
                case DeliveryVerdict::kDelivered:
                  count("delivered");
                  keep(store_.mark_alerts(ids, "delivered", attempts, now, ""));
                  break;
                case DeliveryVerdict::kFailed:
                  count("failed");
                  log_once(kError,
                           verdict.log + (said.empty() ? std::string()
                                                       : " (" + response_excerpt(said) + ")"));
                  keep(store_.mark_alerts(ids, "failed", attempts, now, verdict.reason));
                  break;
                case DeliveryVerdict::kRetry: {
                  count("retry");
                  log_once(kWarning, verdict.log);
                  // The lane waits on the steady clock; the store keeps the wall-clock second
                  // for people and a restart (clamped when read back).
                  for (int64_t id : ids) lane.not_before[id] = clock_.now() + verdict.delay;
                  const int64_t delay_s = (verdict.delay.count() + 999) / 1000;
                  keep(store_.mark_alerts(ids, "pending", attempts, now + delay_s, verdict.reason));
                  arm_after(lane, verdict.delay);
                  return;
                }
              }
              pump(lane);
            });
}

}  // namespace oomtriage::daemon

namespace oomtriage::daemon {

int run_alert_test(const DaemonConfig& config, const std::optional<std::string>& only) {
  asio::io_context io;
  AlertContent sample;
  sample.event_id = 0;
  sample.job = "oomtriage-test";
  sample.host = config.host.empty() ? this_host() : config.host;
  sample.trainer = "ai-toolkit";
  sample.model_family = "flux.1";
  sample.kind = "cuda";
  sample.phase = "sampling";
  sample.step = "500 of 3000";
  sample.figures = "tried 1.50 GiB; 812.00 MiB free of 23.55 GiB; GPU 0";
  sample.message = "CUDA out of memory. Tried to allocate 1.50 GiB. (a test alert from oomtriage)";
  sample.log_path = "/srv/ai-toolkit/output/oomtriage-test/log.txt";
  sample.line = 1234;
  sample.starts_at = utc_time(unix_now());
  sample.test = true;
  sample.ends_at = utc_time(unix_now() + 300);  // resolves itself in five minutes
  // A fresh id each time: a receiver that deduplicates by webhook-id must not drop the second.
  sample.test_id =
      fmt::format("test_{}_{}", unix_now(),
                  std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000);
  sample.fixes.push_back({"cheapen_previews",
                          "Make preview samples cheaper",
                          {"config.process[0].sample.sample_steps: 30 -> 20"},
                          "Lower-quality previews"});
  int failures = 0;
  int sent = 0;
  std::vector<std::unique_ptr<asio::ssl::context>> contexts;
  for (const Receiver& receiver : config.alerts) {
    if (only && receiver.name != *only) continue;
    auto tls = make_tls_context(receiver.ca_file);
    if (!tls) {
      fmt::print(stderr, "oomtriage: alert {}: {}\n", receiver.name, tls.error().message);
      ++failures;
      continue;
    }
    contexts.push_back(std::move(*tls));
    ++sent;
    http_send(io, *contexts.back(), alert_request(receiver, sample, unix_now()),
              [&failures, name = receiver.name,
               url = receiver.url](const Result<HttpResponse>& response) {
                if (response && response->status >= 200 && response->status < 300) {
                  fmt::print("alert {} ({}): delivered (HTTP {})\n", name, redact_url(url),
                             response->status);
                } else {
                  ++failures;
                  const bool said = response && !response->body.empty();
                  fmt::print("alert {} ({}): failed: {}{}\n", name, redact_url(url),
                             describe(response),
                             said ? ": " + response_excerpt(response->body) : "");
                }
              });
  }
  if (sent == 0 && failures == 0) {
    fmt::print(stderr, "oomtriage: {}\n",
               only ? "no receiver named " + *only : std::string("the config has no alerts"));
    return 1;
  }
  io.run();
  return failures == 0 ? 0 : 2;
}

}  // namespace oomtriage::daemon
