// daemon/alerts/retry_policy.h
//
// What a receiver's answer means for an alert, as a pure function (no clock, no randomness: the
// caller passes the alert's age and a jitter factor), so every branch is tested directly.
// 2xx: delivered. A redirect still unanswered (307/308 are followed by the HTTP client): failed,
// with its Location. Other 4xx but 408 and 429: failed (the receiver refused it; sending it again
// changes nothing). 429: retried after Retry-After, or Discord's `retry_after` in the body. 408,
// 5xx, timeouts and network errors: retried after initial * 2^(attempts-1) capped at the maximum,
// times the jitter, until the alert has been retried for the receiver's horizon (steady time, as
// the caller measures it) or for as many attempts as the backoff fits in it; then failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "daemon/common/daemon_config.h"
#include "daemon/net/http_client.h"

namespace oomtriage::daemon {

struct DeliveryVerdict {
  enum Kind { kDelivered, kFailed, kRetry } kind = kFailed;
  std::chrono::milliseconds delay{0};  // kRetry: when to send again
  std::string reason;                  // stored with the alert: "HTTP 503", the network error
  std::string log;                     // what the operator reads, once per distinct text
};

// How many attempts a receiver's backoff fits in its horizon: with the defaults (1 s doubling to
// 5 min, 24 h) 296. The count is stored with the alert, so it holds across restarts, where the
// caller's steady clock starts again.
int64_t horizon_attempts(const Receiver& receiver);

// `attempts` counts this one; `age_seconds` is how long the alert has waited by the steady clock
// (never the wall clock, which may be stepped); `jitter` is a factor in [0.5, 1.5] drawn by the
// caller.
DeliveryVerdict judge_response(const Result<HttpResponse>& answered, const Receiver& receiver,
                               int64_t attempts, int64_t age_seconds, double jitter);

}  // namespace oomtriage::daemon
