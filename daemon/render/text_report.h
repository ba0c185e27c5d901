// daemon/render/text_report.h
//
// `oomtriage report JOB`: the job's story as text for a terminal (bold headings when `color`):
// the job, its runs with the fixes each carried and its heal attempt, the config snapshots with
// their diffs, every OOM event with a bar of the GPU memory at the crash and the lines that
// showed its phase and step, and the last incident's fixes.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/render/report_view.h"

namespace oomtriage::daemon {

std::string render_text_report(const ReportView& report, bool color);

// "[#########=====......]": used, requested and free memory as a fixed-width bar.
std::string memory_bar(uint64_t capacity, uint64_t used, uint64_t tried, int width);

}  // namespace oomtriage::daemon
