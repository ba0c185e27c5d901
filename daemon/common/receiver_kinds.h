// daemon/common/receiver_kinds.h
//
// The receiver kinds an alert can go to, one row each: the `type:` a daemon config names, the
// storm window a receiver of that kind gets unless it says otherwise, whether its URL is a
// secret, the payload it is sent and the headers that go with it. The config reader
// (daemon/common/daemon_config.cc) accepts exactly these types and the dispatcher
// (alert_request() in daemon/alerts/alert_dispatcher.h) builds each request from its row, so a
// new kind is a row here plus its payload function (daemon/alerts/alert_payload.h).
#pragma once

#include <string_view>
#include <vector>

namespace oomtriage::daemon {

// The body a receiver is sent; each is a function of daemon/alerts/alert_payload.h.
enum class AlertPayload {
  kSlack,                // slack_payload()
  kDiscord,              // discord_payload()
  kAlertmanagerWebhook,  // alertmanager_webhook_payload()
  kAlertmanagerApi,      // alertmanager_api_payload()
};

struct ReceiverKind {
  std::string_view type;  // `type:` in the daemon config
  // Alerts that come due within this window of the first go out as one message, unless the
  // receiver sets group_wait_ms: a person reads Slack, Discord and webhooks; Alertmanager
  // groups by itself.
  int group_wait_ms;
  // The URL carries the receiver's token (Slack, Discord): only from url_file or url_env.
  bool url_is_secret;
  AlertPayload payload;
  // Appended to the configured URL unless it already holds it (Alertmanager's API route).
  std::string_view url_path;
  // Standard Webhooks headers: webhook-id, webhook-timestamp, and webhook-signature when the
  // receiver has an HMAC secret (daemon/alerts/webhook_signature.h).
  bool standard_webhook_headers;
};

const std::vector<ReceiverKind>& receiver_kinds();

// The row of `type`; null for a type no row has.
const ReceiverKind* find_receiver_kind(std::string_view type);

}  // namespace oomtriage::daemon
