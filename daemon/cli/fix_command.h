// daemon/cli/fix_command.h
//
// `oomtriage fix LOG [--config FILE] [--fix ID|--rank N] [--write OUT]`: analyses the log, ranks
// the fixes for its job, and prints a unified diff of the job config that applies one of them
// (default: the top-ranked one); --write writes the patched config and records the fix in the
// store, so that running it again on the same old log proposes nothing already applied.
#pragma once

#include <optional>
#include <string>

namespace oomtriage::daemon {

struct FixOptions {
  std::string log;
  std::optional<std::string> config;
  std::optional<std::string> fix_id;
  std::optional<int> rank;
  std::optional<std::string> write_to;
  std::string store;  // the state dir's store: what was applied after a crash is read and kept
};

// Returns the exit code: 0 patched (or nothing to fix), 1 bad input (no config file, an unknown
// or unproposed fix, a fix that is not a config change), 2 a file that cannot be read or written.
int run_fix(const FixOptions& options);

}  // namespace oomtriage::daemon
