// daemon/cli/store_views.h
//
// What `jobs`, `report` and `serve` share: the store opened read-only (a node's SQLite file or
// the fleet store), and a job's stored rows made into the ReportView every renderer draws
// (daemon/render/report_view.h), so that the terminal, the files and the web pages tell one
// story.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/render/report_view.h"
#include "db/store.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

// Which store to read: a SQLite file (a node's own) or a postgresql:// URL (the fleet store),
// and for the fleet store the one host to show ("" for all).
struct StoreTarget {
  std::string location;
  std::string host;
  std::string web_url;  // the daemon config's web_url: `report` prints the job's page
};

// Every mode only reads: nothing is migrated or written.
enum class ReadMode {
  kOneCommand,       // `jobs`, `report`: nothing made beside the store (db::ReadOnly::kOneCommand)
  kReadOnly,         // `serve`: a fleet role that can write is refused
  kReadOnlyAnyRole,  // `serve --allow-writer-role`: read-only transactions, whatever the role
};

// A missing SQLite store is "no jobs yet" (a null reader), not an error.
Result<std::unique_ptr<db::JobReader>> open_reader(const StoreTarget& target,
                                                   ReadMode mode = ReadMode::kOneCommand);

// RFC 3339, UTC.
std::string when(int64_t unix_seconds);

// The newest event's phase, step and top fix ("-" where there is none), for lists of jobs.
struct LastIncident {
  std::string phase = "-";
  std::string step = "-";
  std::string top_fix = "-";
};
LastIncident last_incident(const db::JobSummary& job);

// What the newest sampled run left free on its card at its peak.
std::optional<uint64_t> headroom(const db::JobSummary& job);

ReportView build_view(const db::JobStory& story);

// The training loss for the curve: AI Toolkit's loss_log.db beside the log when it has rows, else
// what the runs' logs show in their bars. None for a fleet store's job (it ran elsewhere).
LossCurve loss_curve_of(const ReportView& view);

}  // namespace oomtriage::daemon
