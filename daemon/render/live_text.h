// daemon/render/live_text.h
//
// The words every list of jobs shows for a run in progress (issue 47): the web list and job page
// (web_pages.cc, html_report.cc), the text `jobs` and `oomtriage top`. Pure: values in, text out,
// no clock, so each face says "1.40 s/it" or "ETA 2h 05m" the same way. A field that is not known
// is "-".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"

namespace oomtriage::daemon {

// The training bar's rate as people read tqdm: "1.40 s/it" below one step a second, else
// "2.3 it/s"; "-" without a rate (or a rate of 0 or less).
std::string rate_text(std::optional<double> steps_per_second);

// A duration left or passed, two units at most: "45s", "12m 30s", "3h 05m", "2d 04h"; "-" for
// nullopt or a negative number.
std::string duration_text(std::optional<int64_t> seconds);

// How far the bar is: floor(100 * step / total), 100 only once step reaches total; nullopt
// without a step or a total above 0.
std::optional<int> percent_done(std::optional<int64_t> step, std::optional<int64_t> total_steps);

// "1200/3000 (40%)"; "1200" without a total; "-" without a step.
std::string progress_text(std::optional<int64_t> step, std::optional<int64_t> total_steps);

// The newest loss with four significant digits ("0.0412", "1.234"); "-" without one.
std::string loss_text(std::optional<double> loss);

// The time left while the job runs (LiveState::eta_seconds()): duration_text of it for a job
// whose status() is "running"; "-" for any other status (a stalled or ended run has none).
std::string eta_text(const db::JobSummary& job);

// The warnings that stay with the job, in this order: "predicted OOM", "near OOM".
std::vector<std::string> warning_marks(const db::JobSummary& job);

// When the job last showed life: its log's last write when the daemon knows it, else when the
// job was last seen (unix seconds).
int64_t last_write_or_seen(const db::JobSummary& job);

// True while the job's newest run is under way: status() "running" or "stalled". The lists
// refresh themselves while one is.
bool runs_now(const db::JobSummary& job);

// A fix as people read it, with its stable id beside: "Turn preview sampling off
// (disable_sampling)", from the fix table's name (triage/fix_table.h); the id alone for an id
// the table does not know; "-" for "" or "-".
std::string fix_label(std::string_view fix_id);
// The fix table's name of `fix_id`, or "" when the table does not know it.
std::string fix_name(std::string_view fix_id);

}  // namespace oomtriage::daemon
