// daemon/cli/scan_command.h
//
// `oomtriage scan LOG... [--config FILE] [--trainer NAME] [--json]`: reads each log through the
// streaming analyzer (the same one the daemon uses), finds its job, prints text or JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/render/text_output.h"
#include "parsers/event.h"

namespace oomtriage::daemon {

struct ScanOptions {
  std::vector<std::string> logs;
  std::optional<std::string> config;
  parsers::Trainer trainer = parsers::Trainer::kUnknown;
  bool json = false;
  bool fail_on_oom = false;  // exit kExitFatalOom when a log shows a fatal OOM
  ColorMode color = ColorMode::kAuto;
  std::string store;  // read (never created): a job's history changes the order of its fixes
};

// Returns the process exit code: 0 analysed, 1 bad input (a directory, a bad --config), 2 an
// unreadable file, 3 (with fail_on_oom) a fatal OOM found. Every log is attempted; bad input and
// unreadable files win over 3. LOG "-" is standard input.
int run_scan(const ScanOptions& options);

}  // namespace oomtriage::daemon
