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

// A span of time in words, as an alert or the journal says it: "45 s", "17 min", "2 h 05 min",
// "3 d 4 h" (`top` has its own, narrower: daemon/render/top_view.h).
std::string duration_words(int64_t seconds);

}  // namespace oomtriage::daemon
