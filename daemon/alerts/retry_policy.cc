// daemon/alerts/retry_policy.cc
#include "daemon/alerts/retry_policy.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace oomtriage::daemon {
namespace {

std::chrono::milliseconds millis(double ms) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, ms)));
}

}  // namespace

int64_t horizon_attempts(const Receiver& receiver) {
  const double horizon_ms = static_cast<double>(receiver.retry_horizon_seconds) * 1000.0;
  double waited = 0;
  int64_t attempts = 1;
  for (double delay = receiver.retry_initial_ms; waited < horizon_ms && attempts < 1000000;
       ++attempts) {
    waited += delay;
    delay = std::min<double>(delay * 2, receiver.retry_max_ms);
  }
  return attempts;
}

DeliveryVerdict judge_response(const Result<HttpResponse>& answered, const Receiver& receiver,
                               int64_t attempts, int64_t age_seconds, double jitter) {
  const HttpResponse none;  // no answer: retried like a 5xx
  const HttpResponse& response = answered ? *answered : none;
  const int status = response.status;
  if (status >= 200 && status < 300) return {DeliveryVerdict::kDelivered, {}, "", ""};
  if (status >= 300 && status < 400) {
    const std::string why = unfollowed_redirect(response);
    return {DeliveryVerdict::kFailed, {}, why, why + "; kept as failed"};
  }
  if (status >= 400 && status < 500 && status != 429 && status != 408) {
    const std::string why = fmt::format("HTTP {}", status);
    return {DeliveryVerdict::kFailed,
            {},
            why,
            why + ": the receiver refused the alert; kept as failed"};
  }
  const std::string why = describe(answered);
  if (age_seconds > receiver.retry_horizon_seconds || attempts > horizon_attempts(receiver)) {
    return {DeliveryVerdict::kFailed,
            {},
            why,
            fmt::format("giving up after {} attempts: {}", attempts, why)};
  }
  const auto retry = [&](double delay_ms) {
    return DeliveryVerdict{DeliveryVerdict::kRetry, millis(delay_ms), why, why + ": retrying"};
  };
  if (status == 429) {
    if (response.retry_after_seconds) return retry(*response.retry_after_seconds * 1000.0);
    // Discord puts it in the body: {"retry_after": 1.5, ...}
    const auto body = nlohmann::json::parse(response.body, nullptr, false);
    if (body.is_object() && body.contains("retry_after") && body["retry_after"].is_number()) {
      return retry(body["retry_after"].get<double>() * 1000.0);
    }
  }
  const double doublings = static_cast<double>(std::max<int64_t>(attempts, 1) - 1);
  const double backoff =
      std::min<double>(receiver.retry_max_ms, receiver.retry_initial_ms * std::pow(2.0, doublings));
  return retry(backoff * jitter);
}

}  // namespace oomtriage::daemon
