// daemon/common/clock.h: wall-clock time for the store, alerts and reports (seconds since the
// epoch, UTC text). The only place the daemon reads the system clock for timestamps.
#pragma once

#include <cstdint>
#include <string>

namespace oomtriage::daemon {

int64_t unix_now();
// strftime in UTC: "%Y-%m-%dT%H:%M:%SZ" (RFC 3339, alerts) or "%Y-%m-%d %H:%M:%SZ" (reports).
std::string utc_time(int64_t unix_seconds, const char* format = "%Y-%m-%dT%H:%M:%SZ");

}  // namespace oomtriage::daemon
