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
#include <vector>

#include "daemon/cli/store_views.h"
#include "daemon/render/text_output.h"

namespace oomtriage::daemon {

// `jobs --since 24h --outcome crashed_oom --phase sampling --limit 20`: each "" for any.
struct JobsFilter {
  std::optional<int64_t> since_seconds;
  std::string outcome;  // the newest run's
  std::string phase;    // the newest event's
  std::string trainer;
  std::string family;  // the newest event's model family
  std::string text;    // in the name
  size_t limit = 0;    // 0 for all
  size_t offset = 0;
  // An OOM stored in these times (db::JobQuery::oom_from, oom_until): /fleet's days.
  std::optional<int64_t> oom_from, oom_until;
  bool any() const {
    return since_seconds || !outcome.empty() || !phase.empty() || !trainer.empty() ||
           !family.empty() || !text.empty() || oom_from || oom_until;
  }
};

// The names people see and type for `jobs` (all of `host`, "" for any).
Result<std::vector<std::string>> shown_names(db::JobReader& store, const std::string& host,
                                             const std::vector<db::JobSummary>& jobs);

// The page of jobs `filter` picks, newest first, with the names people see and type for them
// (daemon/render/job_names.h: a name two jobs share gets its folder's end). Its family and
// trainer may be named any way the tables know ("flux1-dev", "FLUX", "aitk").
struct JobsPage {
  std::vector<db::JobSummary> jobs;
  std::vector<std::string> names;
  bool more = false;  // the filter's limit cut the list: a next page exists
  // What the reader should know of the filter's family and trainer words (daemon/cli/
  // filter_words.h): a word no table knows (then no job is listed) or a family filed as another.
  std::vector<std::string> notes;
};
Result<JobsPage> find_jobs_page(db::JobReader& store, const std::string& host,
                                const JobsFilter& filter, int64_t now);

// "90s", "30m", "24h", "7d", "2w" as seconds; nullopt when it reads as none of them.
std::optional<int64_t> parse_duration(const std::string& text);

int run_jobs(const StoreTarget& store, const JobsFilter& filter, bool json, ColorMode color);

enum class ReportFormat { kText, kJson, kMarkdown, kHtml };
struct ReportOptions {
  ReportFormat format = ReportFormat::kText;
  std::string html_path;  // for kHtml; "-" for standard output
  ColorMode color = ColorMode::kAuto;
  std::string page_url;  // the job's page under the daemon's web_url, printed by the text report
};
// An empty `job`: the newest job that crashed (else the newest job).
int run_report(const StoreTarget& store, const std::string& job, const ReportOptions& options);

}  // namespace oomtriage::daemon
