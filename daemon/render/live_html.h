// daemon/render/live_html.h
//
// The job page's "Now" section (issue 47): the job's status (a stalled run marked, with how long
// its log has been silent), its newest run's step, rate, ETA, loss, phase, last write and last
// line, and the warnings that stay with it. `oomtriage serve` sets it on the ReportView; a page
// written by `report --html` has none (a file does not stay current).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/render/report_view.h"
#include "db/store.h"

namespace oomtriage::daemon {

// The job as it is at `now` (unix seconds), for live_section().
void set_live(ReportView& view, const db::JobSummary& job, int64_t now);

// The section, or "" when the view has no live state or nothing in it to say.
std::string live_section(const ReportView& view);

// The badge class of a status: crashed, completed, running, stalled, other.
std::string status_class(std::string_view status);

// The rules the section and the marks need, and what lays the report out on a phone.
const char* live_style();

}  // namespace oomtriage::daemon
