// daemon/cli/run_command.h
//
// `oomtriage run [--heal] [--max-attempts N] [--job NAME] [--trainer NAME] [--config FILE]
// [--log FILE] -- COMMAND [ARG...]`: runs a trainer as a child (child_process.h), passes its
// output through and analyses it live; each attempt is a run of the job in the store. With
// --heal, after an out-of-memory crash it applies the next resume-safe fix in the trainer's own
// channel (a patched copy of its config beside the original, or its arguments), adds the
// trainer's resume option and starts it again, until the job completes, the budget is spent, a
// crash is not an OOM, no lever is left, or a restart does not resume at the step of its last
// save (it is then stopped before it overwrites its saves).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/daemon_config.h"
#include "daemon/service/preflight_alerts.h"
#include "daemon/render/text_output.h"
#include "parsers/event.h"

namespace oomtriage::daemon {

struct RunOptions {
  std::vector<std::string> command;
  bool heal = false;
  int max_attempts = 3;
  std::optional<std::string> job;
  parsers::Trainer trainer = parsers::Trainer::kUnknown;
  std::optional<std::string> config;
  std::optional<std::string> log;    // default: <state dir>/runs/<job>-<time>.log
  std::string store;                 // the daemon's store
  std::chrono::seconds backoff{10};  // before the second attempt, doubled each time, at most 5 min
  std::chrono::seconds grace{30};    // SIGTERM -> SIGKILL
  ColorMode color = ColorMode::kAuto;
  // Where alerts go: the daemon config's receivers (and host), or --webhook's.
  DaemonConfig alerts;
  // The card the pre-flight judges the config against (daemon/cli/run_preflight.h): `--gpu
  // SIZE`, "auto" or "" (then the daemon config's gpu_memory:, else `card_size`).
  std::string gpu;
  CardSizeProvider card_size = unknown_card_size();
};

// Returns 0 when the job completed (healed or not), else the child's exit code (1 for a
// failure of oomtriage itself before the child ran).
int run_supervised(const RunOptions& options);

}  // namespace oomtriage::daemon
