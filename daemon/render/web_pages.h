// daemon/render/web_pages.h
//
// The pages `oomtriage serve` draws besides a job's report (which is render_html_report's, the
// same page `report --html` writes): the jobs list with its filters and pager, the fleet
// overview with its charts, and the error page. Self-contained like the report: inline CSS and
// SVG, no script, every stored string escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"

namespace oomtriage::daemon {

// The list's filters as the URL carries them ("" for any).
struct JobsPageFilter {
  std::string host, outcome, phase, trainer, family, since, text;
  // An OOM on these UTC days, inclusive ("2026-12-04"; ?from=&to=): /fleet's bars and legends
  // lead here. Phase and family then pick that day's OOM rather than the newest.
  std::string from, to;
  bool refresh = true;  // ?refresh=0 turns the page's refresh off
  size_t page = 1;      // from 1
};

// How often a list or job page with a job under way reloads itself (an HTTP Refresh header).
inline constexpr int kRefreshSeconds = 10;

struct JobRow {
  std::string key;   // /job/<key>
  std::string name;  // as shown (daemon/render/job_names.h)
  // phase and step are the newest OOM's; last_seen is the log's last write when the daemon knows
  // it ("2026-12-05 03:31:20", UTC).
  std::string host, trainer, outcome, phase, step, top_fix, last_seen;
  int64_t runs = 0;
  std::string gpu;     // "22.1/24.0 GiB" or ""
  std::string family;  // the newest OOM's family by its display name ("FLUX.1"), or ""
  // The newest run as it is (daemon/render/live_text.h): "-" where unknown.
  std::string status;  // JobSummary::status(): "stalled" for a silent running run
  std::string progress = "-", rate = "-", eta = "-", loss = "-";
  std::string silent_for;          // a stalled run's silence ("16m 40s"), else ""
  std::vector<std::string> marks;  // "predicted OOM", "near OOM"
  bool runs_now = false;           // running or stalled
};

// A job's row as the list shows it at `now` (unix seconds).
JobRow make_job_row(const db::JobSummary& job, const std::string& shown_name, int64_t now);

struct JobsPageView {
  JobsPageFilter filter;
  std::vector<JobRow> rows;
  bool fleet = false;  // show the host column and filter
  bool more = false;   // a next page exists
  std::string store;   // what is read, for the footer
  std::string made_at;
  // What the filter's words came to (daemon/cli/filter_words.h): an unknown family or trainer,
  // with the closest names, or a family the store files as another.
  std::vector<std::string> notes;
};

struct FleetPageView {
  db::FleetOverview overview;
  int64_t now = 0;
  int days = 30;
  std::vector<std::string> day_labels;  // oldest first, one per day of the window
  bool fleet = false;
  std::string store;
  std::string made_at;
  int64_t quiet_after_seconds = 3600;  // a node silent longer than this is marked
};

// A URL query value or path segment encoded: RFC 3986's unreserved characters kept, every other
// byte %XX.
std::string url_encode(std::string_view text);

// The query string a filter (and page) makes: "?outcome=crashed_oom&page=2", "" for none.
std::string jobs_query(const JobsPageFilter& filter, size_t page);

// Whether the list reloads itself: a job in it is under way and ?refresh=0 was not asked.
bool list_refreshes(const JobsPageView& view);

std::string render_jobs_page(const JobsPageView& view);
// /job/<name> when several jobs have the name: each with its host, folder, last sighting and
// status, linked to its page. `shown` are their names as the list shows them.
std::string render_job_choice_page(const std::string& asked,
                                   const std::vector<db::JobSummary>& jobs,
                                   const std::vector<std::string>& shown, bool fleet,
                                   const std::string& store, const std::string& made_at);
std::string render_fleet_page(const FleetPageView& view);
std::string render_error_page(int status, const std::string& title, const std::string& detail);

}  // namespace oomtriage::daemon
