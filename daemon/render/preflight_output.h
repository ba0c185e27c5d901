// daemon/render/preflight_output.h
//
// `oomtriage check`'s output (daemon/cli/check_command.h): the pre-flight (triage/preflight.h)
// as text (the verdict, every phase's peak with its terms, the usable memory, the assumptions,
// the fixes as `scan` prints them) or as one JSON object, and `--explain`'s spec and
// assumptions. Each a function from the pre-flight to a string or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "triage/memory_model.h"
#include "triage/memory_spec.h"
#include "triage/preflight.h"

namespace oomtriage::daemon {

// {"peak_bytes", "peak_phase", "usable_bytes", "fits", "phases": [{"phase", "peak_bytes",
// "terms": {...}}], "assumptions", "fixes"} plus "family", "verdict", "first_failing_phase"
// and "card_bytes".
// `commands` (issue 45, `check -- COMMAND`): each fix's whole command with that fix applied, in
// the fixes' order, empty for a fix that changes no flag (daemon/cli/command_fixes.h); the JSON
// carries it as the fix's "command" (argv), the text prints the top fix's, shell-quoted on one
// line. Empty for a config or a spec.
nlohmann::ordered_json preflight_to_json(
    const triage::Preflight& preflight, uint64_t card_bytes,
    const std::vector<std::vector<std::string>>& commands = {});

std::string render_preflight_text(const triage::Preflight& preflight, uint64_t card_bytes,
                                  bool color,
                                  const std::vector<std::vector<std::string>>& commands = {});

// `--explain`: {"spec": the spec read, "family": the architecture row the model uses,
// "assumptions": [...]}.
nlohmann::ordered_json explain_to_json(const triage::MemorySpec& spec,
                                       const triage::MemoryEstimate& estimate);

// The same in words: the spec as JSON, then what was assumed.
std::string render_explain_text(const triage::MemorySpec& spec,
                                const triage::MemoryEstimate& estimate);

}  // namespace oomtriage::daemon
