// daemon/render/text_output.h
//
// The human form of a scan: one block per log, colour when stdout is a terminal.
#pragma once

#include <fmt/color.h>

#include <string>
#include <string_view>
#include <vector>

#include "daemon/render/json_output.h"

namespace oomtriage::daemon {

// --color auto|always|never: auto colours a terminal only, and never when NO_COLOR is set.
enum class ColorMode { kAuto, kAlways, kNever };
bool color_enabled(ColorMode mode);
// `text` in `style` when colour is on; as it is otherwise.
std::string paint(bool color, fmt::text_style style, std::string_view text);

std::string render_scan_text(const ScannedLog& log, bool color);

// "  fixes, best first:" and each fix with its changes, why, cost and predicted peak, as scan
// prints them under an incident and check under its verdict; "" when there are none.
std::string render_fixes_text(const std::vector<triage::Fix>& fixes, bool color);

// A command-line change as a person types it: "  --train_batch_size 2 -> 1",
// "+ --gradient_checkpointing", "+ --gradient_accumulation_steps 2", "- --validation_prompt".
std::string argument_line(const triage::ConfigChange& change);

}  // namespace oomtriage::daemon
