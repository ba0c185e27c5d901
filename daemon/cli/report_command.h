// daemon/cli/report_command.h
//
// `oomtriage jobs [--json]` and `oomtriage report JOB [--json]`: read the store (while the daemon
// writes it) and tell each job's story: runs and outcomes, config snapshots and what changed
// between them, every OOM event with a bar of the GPU memory at the crash, and the ranked fixes.
#pragma once

#include <string>

#include "daemon/render/text_output.h"

namespace oomtriage::daemon {

int run_jobs(const std::string& store_path, bool json, ColorMode color);
int run_report(const std::string& store_path, const std::string& job, bool json, ColorMode color);

// "[#########=====......]": used, requested and free memory as a fixed-width bar.
std::string memory_bar(uint64_t capacity, uint64_t used, uint64_t tried, int width);

}  // namespace oomtriage::daemon
