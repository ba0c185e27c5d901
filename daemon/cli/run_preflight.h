// daemon/cli/run_preflight.h
//
// `oomtriage run`'s pre-flight: before the first attempt, the job is read as `check` reads it
// (daemon/cli/check_input.h: `--config FILE` through the job registry, else the command line:
// the config its trainer's flag names, else its arguments) and judged against the GPU (`--gpu
// SIZE`, else the daemon config's `gpu_memory:`, else the card-size provider) the way the daemon
// judges a job it first sees (daemon/service/preflight_alerts.h). A job predicted not to fit
// gets one warning line on stderr every time, and the TrainingOOMPredicted alert through run's
// alert path once per job, config and card. It never blocks the launch: a config that cannot be
// read or a family the model does not know gets one line saying so (file and reason), and the
// job runs.
#pragma once

#include <optional>
#include <string>

#include "daemon/cli/run_alerts.h"
#include "daemon/cli/run_command.h"

namespace oomtriage::daemon {

void warn_before_launch(const RunOptions& options, const std::optional<std::string>& config_path,
                        const std::string& job, const std::string& log_path, RunAlerts& alerts);

}  // namespace oomtriage::daemon
