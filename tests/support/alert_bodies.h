// tests/support/alert_bodies.h: the alerts a loopback webhook receiver (http_test_server.h) got,
// read from the Alertmanager webhook v4 bodies the daemon posts: all their names in the order
// they came, or the alerts of one name.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/support/http_test_server.h"

namespace oomtriage::testing {

inline std::vector<nlohmann::json> received_alerts(const HttpTestServer& server) {
  std::vector<nlohmann::json> alerts;
  for (const auto& request : server.requests()) {
    const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
    if (!body.is_object() || !body.contains("alerts") || !body["alerts"].is_array()) continue;
    for (const auto& alert : body["alerts"]) alerts.push_back(alert);
  }
  return alerts;
}

inline std::vector<std::string> alertnames(const HttpTestServer& server) {
  std::vector<std::string> names;
  for (const auto& alert : received_alerts(server)) {
    names.push_back(alert["labels"].value("alertname", ""));
  }
  return names;
}

inline std::vector<nlohmann::json> alerts_named(const HttpTestServer& server,
                                                const std::string& alertname) {
  std::vector<nlohmann::json> found;
  for (const auto& alert : received_alerts(server)) {
    if (alert["labels"].value("alertname", "") == alertname) found.push_back(alert);
  }
  return found;
}

}  // namespace oomtriage::testing
