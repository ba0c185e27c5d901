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

}  // namespace oomtriage::daemon
