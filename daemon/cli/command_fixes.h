// daemon/cli/command_fixes.h
//
// `check -- COMMAND`'s fixes as edits of that command (issue 45): a fix's flags are changed in
// the trainer's arguments as `run --heal` changes them (triage/heal_plan.h
// apply_argument_changes()), the launcher's words before the script stay as they are, and a flag
// the command leaves out reads as added, not as a change of the trainer's default.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "triage/fix.h"

namespace oomtriage::daemon {

// Marks each flag a fix sets that `command` leaves out as added (its `from` null).
void as_edits_of(const std::vector<std::string>& command, std::vector<triage::Fix>& fixes);

// `command` with the fix's flags changed; nullopt when the fix changes no flag (it edits a file).
std::optional<std::vector<std::string>> with_fix(const std::vector<std::string>& command,
                                                 const triage::Fix& fix);

// Each fix's command (empty for a fix that changes no flag), in the fixes' order.
std::vector<std::vector<std::string>> fixed_commands(const std::vector<std::string>& command,
                                                     const std::vector<triage::Fix>& fixes);

}  // namespace oomtriage::daemon
