// daemon/common/human_units.h: a byte count and a training step as people read them, the same in
// scan, report, check, the alerts and the daemon's journal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace oomtriage::daemon {

// "1.50 GiB", "812.00 MiB", "0 bytes": the allocator's own notation (parsers/sizes.h reads it).
std::string format_bytes(uint64_t bytes);

// "step 500/3000", "step 500", "step unknown".
std::string step_text(std::optional<int64_t> step, std::optional<int64_t> total_steps);

// A span of time as people read it: "45 s", "17 min", "2 h 05 min", "3 d 4 h".
std::string duration_text(int64_t seconds);

// A training bar's rate as tqdm prints it: "1.40 s/it" below one step a second, else "2.31 it/s".
std::string rate_text(double steps_per_second);

}  // namespace oomtriage::daemon
