// daemon/cli/report_command.h
//
// `oomtriage jobs [--json]` and `oomtriage report [JOB] [--json|--markdown|--html FILE]`: read the
// store (while the daemon writes it; a node's own, or the fleet store all nodes ship into) and tell
// each job's story: runs and outcomes, config snapshots and what changed between them, every OOM
// event with a bar of the GPU memory at the crash, and the ranked fixes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/render/text_output.h"

namespace oomtriage::daemon {

// Which store to read: a SQLite file (a node's own) or a postgresql:// URL (the fleet store),
// and for the fleet store the one host to show ("" for all).
struct StoreTarget {
  std::string location;
  std::string host;
};

// `jobs --since 24h --outcome crashed_oom --limit 20`.
struct JobsFilter {
  std::optional<int64_t> since_seconds;
  std::string outcome;  // "" for any
  size_t limit = 0;     // 0 for all
};

// "90s", "30m", "24h", "7d", "2w" as seconds; nullopt when it reads as none of them.
std::optional<int64_t> parse_duration(const std::string& text);

int run_jobs(const StoreTarget& store, const JobsFilter& filter, bool json, ColorMode color);

enum class ReportFormat { kText, kJson, kMarkdown, kHtml };
struct ReportOptions {
  ReportFormat format = ReportFormat::kText;
  std::string html_path;  // for kHtml; "-" for standard output
  ColorMode color = ColorMode::kAuto;
};
// An empty `job`: the newest job that crashed (else the newest job).
int run_report(const StoreTarget& store, const std::string& job, const ReportOptions& options);

}  // namespace oomtriage::daemon
