// daemon/cli/run_preflight.h
//
// `oomtriage run`'s pre-flight: before the first attempt, the job config it settled is judged
// against the GPU (`--gpu SIZE`, else the daemon config's `gpu_memory:`, else the card-size
// provider) the way the daemon judges a job it first sees (daemon/service/preflight_alerts.h).
// A job predicted not to fit gets one warning line on stderr every time, and the
// TrainingOOMPredicted alert through run's alert path once per job, config and card. It never
// blocks the launch: whatever cannot be read or judged is passed over in silence.
#pragma once

#include <optional>
#include <string>

#include "daemon/cli/run_alerts.h"
#include "daemon/cli/run_command.h"

namespace oomtriage::daemon {

void warn_before_launch(const RunOptions& options, const std::optional<std::string>& config_path,
                        const std::string& job, const std::string& log_path, RunAlerts& alerts);

}  // namespace oomtriage::daemon
