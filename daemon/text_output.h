// daemon/text_output.h
//
// The human form of a scan: one block per log, colour when stdout is a terminal.
#pragma once

#include <string>

#include "daemon/json_output.h"

namespace oomtriage::daemon {

// "1.50 GiB", "812.00 MiB", "0 bytes": the allocator's own notation.
std::string format_bytes(uint64_t bytes);

std::string render_scan_text(const ScannedLog& log, bool color);

}  // namespace oomtriage::daemon
