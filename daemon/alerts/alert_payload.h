// daemon/alerts/alert_payload.h
//
// What an OOM alert says, and how each receiver wants it: Slack (text fallback + blocks, 3,000
// characters per section), Discord (content + embeds, allowed_mentions parse [] so a log line
// cannot ping anyone), Prometheus Alertmanager's webhook v4 JSON (so existing receivers consume
// it), and Alertmanager's own /api/v2/alerts. Log text is untrusted: it is escaped for each
// format and cut to each platform's limits. Pure: no I/O.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace oomtriage::daemon {

struct AlertFix {
  std::string id;
  std::string title;
  std::vector<std::string> changes;  // "config.process[0].train.batch_size: 4 -> 2"
  std::string cost;
};

struct AlertContent {
  int64_t event_id = 0;  // with `event_uuid` or `scope`, the idempotency key (webhook-id)
  // An OOM's own UUID, made when its event was stored: its webhook-id is evt_<uuid>, which no
  // other OOM ever has, whatever happens to the store (docs/alerts.md "Ids").
  std::string event_uuid;
  // For the alerts keyed by a store row's id (a pre-flight check, a run): the store's id (made
  // anew whenever the store is, db/store_recovery.h), so that a row id handed out again after a
  // store was restored or recovered never makes an id a receiver has seen.
  std::string scope;
  std::string job;
  std::string host;
  std::string trainer;
  std::string model_family;
  std::string kind;
  std::string phase;
  std::string step;     // "500 of 3000", "unknown"
  std::string figures;  // "tried 1.50 GiB; 812.00 MiB free of 23.55 GiB; GPU 0"
  std::string message;  // the log's own text (untrusted)
  std::string log_path;
  int64_t line = 0;
  bool recovered = false;
  int grouped = 1;  // recovered OOMs of a burst sent as one message
  // Above 0: the event was amended after its alert went out (more of its traceback arrived) and
  // its top fix changed; this alert updates that one (webhook-id evt_<id>_r<revision>).
  int64_t revision = 0;
  std::string starts_at;  // RFC 3339
  std::vector<AlertFix> fixes;
  // Not an OOM but the verdict of `oomtriage run --heal` on its job: "healed", "exhausted" or
  // "stopped"; event_id is then the run's id, and `message` says what was done.
  std::string heal;
  // Not an OOM but a prediction: the pre-flight's verdict that a job's config will not fit
  // (TrainingOOMPredicted, severity warning; daemon/alerts/predicted_alert.h). event_id is then
  // the pre-flight check's id; `step` says when it will first happen, `figures` the predicted
  // peak against the usable memory, `message` the whole verdict in words.
  struct Prediction {
    std::string peak;        // "14.20 GiB"
    std::string usable;      // "10.95 GiB of a 12.00 GiB card"
    std::string top_change;  // the first fix's title and changes, or the largest term
  };
  std::optional<Prediction> predicted;
  // With `predicted`: not the pre-flight's verdict but a running job's sampled GPU memory near
  // the card's limit (TrainingNearOOM, severity warning; daemon/alerts/near_oom_alert.h).
  // event_id is then the run's id and `revision` the warning's number within the run.
  bool near_oom = false;
  // Found again in a log read from its start after a store recovery lost its offset: this alert
  // may have gone out before the store was damaged (db/store_recovery.h).
  bool resent = false;
  // Not an OOM but the daemon's own store: it was damaged, moved aside and salvaged
  // (OomtriageStoreRecovered, severity critical). `message` says what was kept and what not;
  // `log_path` is where the damaged file now is; event_id the recovery's Unix time.
  bool store_recovered = false;
  // A storm (daemon/alerts/alert_dispatcher.h, group_wait_ms): the alerts that came due within
  // one window, sent as one message listing them; each keeps its own idempotency key inside it.
  std::vector<AlertContent> storm;
  // Not an OOM but a running job gone silent (TrainingStalled, severity warning), or, with
  // `resolved`, going on again. event_id is then the run's id.
  struct Stall {
    int64_t since = 0;       // unix seconds the log last grew: with the run, the alert's key
    std::string silent_for;  // "17 min"
    std::string last_line;   // the log's last line (untrusted)
    bool resolved = false;
  };
  std::optional<Stall> stalled;
  // The job's page (<web_url>/job/<name>) when the daemon's web_url is set: Alertmanager's
  // generatorURL, a link in Slack and Discord, the `url` annotation.
  std::string url;
  // `oomtriage alert test`: labelled test, severity info, an end time, a fresh id each time.
  bool test = false;
  std::string ends_at;  // RFC 3339; "" while firing
  std::string test_id;  // the test's idempotency key

  std::string title() const;       // "CUDA OOM in sampling: my_lora", "Update: CUDA OOM in ..."
  std::string webhook_id() const;  // the idempotency key (Standard Webhooks' webhook-id)
  std::string report_command() const { return "oomtriage report " + job; }
  // The OOMs a storm message stands for (a recovered burst counts its members).
  int storm_size() const;
};

// `text` with every invalid UTF-8 sequence replaced by U+FFFD (log text is untrusted).
std::string valid_utf8(std::string_view text);

// The job's page under `web_url` (the daemon's web_url key): "<web_url>/job/<name>", the name
// url-encoded; "" when web_url is.
std::string job_page_url(std::string_view web_url, std::string_view job);

// Builds the content from a stored event and its fixes (both JSON, as the store keeps them).
AlertContent alert_content(int64_t event_id, const std::string& job, const std::string& host,
                           const std::string& trainer, const std::string& family,
                           const std::string& log_path, const std::string& event_json,
                           const std::string& fixes_json, const std::string& starts_at);

// At most this many of a storm's alerts are listed by name (the dispatcher sends no more in one
// message); a platform's size limit may cut the list sooner, ending it with "and N more".
inline constexpr size_t kStormListed = 200;

nlohmann::json slack_payload(const AlertContent& alert);
nlohmann::json discord_payload(const AlertContent& alert);
nlohmann::json alertmanager_webhook_payload(const AlertContent& alert, const std::string& receiver);
nlohmann::json alertmanager_api_payload(const AlertContent& alert);

// Escapes for Slack mrkdwn (&, <, >) and Discord markdown (*_~`|># and @-mentions).
std::string escape_slack(std::string_view text);
std::string escape_discord(std::string_view text);
// Cuts to at most `limit` characters (UTF-8 code points), never inside a character.
std::string truncate_utf8(std::string_view text, size_t limit);

}  // namespace oomtriage::daemon
