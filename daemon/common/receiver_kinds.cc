// daemon/common/receiver_kinds.cc: the rows (docs/alerts.md describes each kind).
#include "daemon/common/receiver_kinds.h"

#include <algorithm>

namespace oomtriage::daemon {

const std::vector<ReceiverKind>& receiver_kinds() {
  // clang-format off
  static const std::vector<ReceiverKind> kKinds = {
      // type           storm  secret  payload                                url path         headers
      {"slack",         2000,  true,   AlertPayload::kSlack,                  "",              false},
      {"discord",       2000,  true,   AlertPayload::kDiscord,                "",              false},
      {"webhook",       2000,  false,  AlertPayload::kAlertmanagerWebhook,    "",              true},
      {"alertmanager",  0,     false,  AlertPayload::kAlertmanagerApi,        "/api/v2/alerts", false},
  };
  // clang-format on
  return kKinds;
}

const ReceiverKind* find_receiver_kind(std::string_view type) {
  const auto& kinds = receiver_kinds();
  const auto at = std::find_if(kinds.begin(), kinds.end(),
                               [&](const ReceiverKind& kind) { return kind.type == type; });
  return at == kinds.end() ? nullptr : &*at;
}

}  // namespace oomtriage::daemon
