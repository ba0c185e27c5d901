// daemon/render/json_report.h
//
// `oomtriage report JOB --json`: the job's story as one JSON document, with its final newline:
// the job, its runs (each with the fixes it carried and its heal attempt), its config snapshots
// whole, its events in the scan shape (docs/design.md) plus run_id, snapshot_id and stored_at,
// and the last incident's fixes. `view` is the story as daemon/cli/report_command.cc built it
// from `story`'s rows (its runs and snapshots in the same order); the heal attempts, the
// snapshots' contents and the job's folder are read from `story`.
#pragma once

#include <string>

#include "daemon/render/report_view.h"
#include "db/store.h"

namespace oomtriage::daemon {

std::string render_json_report(const db::JobStory& story, const ReportView& view);

}  // namespace oomtriage::daemon
