// daemon/cli/report_command.cc: `jobs` and `report`: the store opened read-side, the job chosen,
// its rows made into the story every output draws (ReportView, daemon/render/report_view.h) and
// handed to the renderer the options ask for (daemon/render/: text, JSON, Markdown, HTML); the
// jobs table.
#include "daemon/cli/report_command.h"

#include "daemon/common/clock.h"

#include <unistd.h>

#include <fmt/color.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "daemon/alerts/alert_payload.h"
#include "daemon/cli/filter_words.h"
#include "daemon/cli/log_story.h"
#include "daemon/cli/log_reader.h"
#include "daemon/common/did_you_mean.h"
#include "daemon/common/human_units.h"
#include "daemon/render/html_report.h"
#include "daemon/render/job_names.h"
#include "daemon/render/json_output.h"
#include "daemon/render/json_report.h"
#include "daemon/render/markdown_report.h"
#include "daemon/render/text_output.h"
#include "daemon/render/text_report.h"
#include "daemon/render/live_text.h"
#include "db/fleet_store.h"
#include "db/loss_log.h"
#include "db/store.h"
#include "db/store_recovery.h"
#include "parsers/family_names.h"
#include "parsers/job_config.h"
#include "parsers/loss_curve.h"
#include "triage/config_patch.h"
#include "triage/history.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

template <class T>
ordered_json optional_json(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

// "22.1G": the jobs table's narrow columns.
std::string gib_text(uint64_t bytes) {
  return fmt::format("{:.1f}G", static_cast<double>(bytes) / (1ull << 30));
}

// Writes `content` to `path` ("-": standard output) whole or not at all.
Result<Ok> write_file(const std::string& path, const std::string& content) {
  if (path == "-") {
    fmt::print("{}", content);
    return Ok{};
  }
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      return make_error(ErrorCode::kIo,
                        fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) {
    std::filesystem::remove(temp, error);
    return make_error(ErrorCode::kIo, fmt::format("cannot write {}: {}", path, error.message()));
  }
  return Ok{};
}

// What the job is doing now, the warnings kept with it and its page: below the text report.
std::string live_text(const db::JobStory& story, const std::string& page_url) {
  std::string out;
  const db::LiveState& live = story.job.live;
  if (live.last_write > 0) {
    std::string now = "Now: " + story.job.status();
    if (live.step) {
      now += fmt::format(", step {}", *live.step);
      if (live.total_steps) now += fmt::format("/{}", *live.total_steps);
    }
    if (!live.phase.empty()) now += " (" + live.phase + ")";
    if (live.steps_per_second) now += ", " + rate_text(*live.steps_per_second);
    if (const auto eta = live.eta_seconds(); eta && story.job.status() == "running")
      now += ", ETA " + duration_words(*eta);
    if (live.loss) now += fmt::format(", loss {:.4g}", *live.loss);
    now += ", last write " + when(live.last_write);
    out += "\n" + now + "\n";
    if (!live.last_line.empty()) out += "  last line: " + live.last_line + "\n";
  }
  if (!story.warnings.empty()) {
    out += "\nWarnings:\n";
    for (const db::WarningRow& w : story.warnings) {
      out += fmt::format("  {} {}: {}{}\n", when(w.created_at), w.kind, w.summary,
                         w.resolved_at ? " (resolved " + when(*w.resolved_at) + ")" : "");
    }
  }
  if (!page_url.empty()) out += "\nPage: " + page_url + "\n";
  return out;
}

// The story in the format the options ask for.
int print_story(const db::JobStory& story, ReportView view, const ReportOptions& options) {
  switch (options.format) {
    case ReportFormat::kJson: fmt::print("{}", render_json_report(story, view)); return kExitOk;
    case ReportFormat::kMarkdown: fmt::print("{}", render_markdown_report(view)); return kExitOk;
    case ReportFormat::kHtml: {
      view.loss = loss_curve_of(view);
      const std::string html = render_html_report(view);
      Result<Ok> written = write_file(options.html_path, html);
      if (!written) {
        fmt::print(stderr, "oomtriage: {}\n", written.error().message);
        return kExitEnvironment;
      }
      if (options.html_path != "-") {
        fmt::print(stderr, "oomtriage: wrote {} ({} KiB){}\n", options.html_path,
                   (html.size() + 1023) / 1024,
                   view.loss.source.empty() ? "; no training loss found for the curve"
                                            : "; loss from " + view.loss.source);
      }
      return kExitOk;
    }
    case ReportFormat::kText:
      fmt::print("{}", render_text_report(view, color_enabled(options.color)));
      fmt::print("{}", live_text(story, options.page_url));
      return kExitOk;
  }
  return kExitOk;
}

// `report PATH`: the story the store keeps of `log` (PATH, or the log in the folder PATH), else
// the log read now as `scan` reads it (daemon/cli/log_story.h), with one line on stderr saying
// so. `store` is null when there is none, or it could not be opened (`unreadable`).
int report_path(db::JobReader* store, const std::optional<Error>& unreadable,
                const StoreTarget& target, const std::string& path, const JobLog& log,
                const ReportOptions& options) {
  const std::string absolute = std::filesystem::absolute(log.path).lexically_normal().string();
  std::optional<Error> failed = unreadable;
  // Only a node's store knows its logs by path: a fleet store's jobs ran on other nodes.
  if (auto* node = dynamic_cast<db::Store*>(store)) {
    auto known = node->job_story_of_log(absolute);
    if (!known) failed = known.error();
    if (known && *known) {
      db::JobStory& story = **known;
      auto shown = shown_names(*node, "", {story.job});
      ReportView view = build_view(story);
      view.name = shown && !shown->empty() ? shown->front() : story.job.name;
      view.report_command = "oomtriage report " + shell_quote(view.name);
      return print_story(story, std::move(view), options);
    }
  }
  const bool fleet = db::is_fleet_url(target.location);
  auto story = story_of_log(log.path, fleet ? "" : target.location);
  if (!story) {
    fmt::print(stderr, "oomtriage: {}\n", story.error().message);
    return exit_code_for(story.error());
  }
  const std::string why = failed   ? "the store cannot be read: " + failed->message
                          : !store ? "no store at " + target.location
                          : fleet  ? "the fleet store knows jobs by name, not by log"
                                   : "the store at " + target.location + " does not know this log";
  const std::string which = log.how_many > 1
                                ? fmt::format(
                                      ", the newest of {} logs in {}; `oomtriage scan {}` reads "
                                      "them all",
                                      log.how_many, path, shell_quote(path))
                                : "";
  fmt::print(stderr,
             "oomtriage: read {} directly ({}{}); `oomtriage daemon` keeps each job's history\n",
             log.path, why, which);
  ReportView view = build_view(*story);
  view.report_command = "oomtriage report " + shell_quote(path);
  return print_story(*story, std::move(view), options);
}

}  // namespace

std::optional<int64_t> parse_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 9 || digits + 1 != text.size()) return std::nullopt;
  const int64_t n = std::stoll(text.substr(0, digits));
  switch (text.back()) {
    case 's': return n;
    case 'm': return n * 60;
    case 'h': return n * 3600;
    case 'd': return n * 86400;
    case 'w': return n * 7 * 86400;
    default: return std::nullopt;
  }
}

Result<std::vector<std::string>> shown_names(db::JobReader& store, const std::string& host,
                                             const std::vector<db::JobSummary>& jobs) {
  // A shown name depends only on the jobs that share it: those are read, whatever filters
  // picked `jobs`, so that what is shown is what `report` takes.
  db::JobQuery same_names;
  same_names.host = host;
  for (const auto& job : jobs) same_names.names.push_back(job.name);
  OOMTRIAGE_ASSIGN_OR_RETURN(std::vector<db::JobSummary> namesakes, store.find_jobs(same_names));
  keep_newest(namesakes);
  const std::vector<std::string> shown = display_names(namesakes);
  std::vector<std::string> out;
  for (const auto& job : jobs) {
    std::string name = job.name;
    for (size_t i = 0; i < namesakes.size(); ++i) {
      if (namesakes[i].key == job.key) name = shown[i];
    }
    out.push_back(std::move(name));
  }
  return out;
}

Result<JobsPage> find_jobs_page(db::JobReader& store, const std::string& host,
                                const JobsFilter& filter, int64_t now) {
  db::JobQuery query;
  query.host = host;
  query.outcome = filter.outcome;
  query.phase = filter.phase;
  JobsPage page;
  const FilterWords words = store_words(filter.trainer, filter.family);
  page.notes = words.notes;
  if (!words.answerable) return page;
  query.trainer = words.trainer;
  query.family = words.family;
  query.text = filter.text;
  // A century at most: "999999999w" is every job, not a time before the calendar.
  constexpr int64_t kCentury = 100LL * 366 * 86400;
  if (filter.since_seconds) query.since = now - std::min(*filter.since_seconds, kCentury);
  query.oom_from = filter.oom_from;
  query.oom_until = filter.oom_until;
  // One more than asked says whether there is a next page.
  query.limit = filter.limit ? filter.limit + 1 : 0;
  query.offset = filter.offset;
  OOMTRIAGE_ASSIGN_OR_RETURN(page.jobs, store.find_jobs(query));
  if (filter.limit && page.jobs.size() > filter.limit) {
    page.more = true;
    page.jobs.resize(filter.limit);
  }
  // Pages are cut before a node's older copy of a job is dropped, so that they never overlap;
  // a page may then show fewer.
  keep_newest(page.jobs);
  if (page.jobs.empty()) return page;
  OOMTRIAGE_ASSIGN_OR_RETURN(page.names, shown_names(store, host, page.jobs));
  return page;
}

int run_jobs(const StoreTarget& target, const JobsFilter& filter, bool json, ColorMode color) {
  auto store = open_reader(target);
  if (!store) {
    fmt::print(stderr, "oomtriage: {}\n", store.error().message);
    return exit_code_for(store.error());
  }
  JobsPage page;
  if (*store) {
    auto found = find_jobs_page(**store, target.host, filter, unix_now());
    if (!found) {
      fmt::print(stderr, "oomtriage: {}\n", found.error().message);
      return kExitEnvironment;
    }
    page = std::move(*found);
  }
  for (const std::string& note : page.notes) fmt::print(stderr, "oomtriage: {}\n", note);
  std::vector<db::JobSummary>& jobs = page.jobs;
  const std::vector<std::string>& names = page.names;
  // The fleet store's jobs come from many nodes: each says which.
  const bool hosts = std::any_of(jobs.begin(), jobs.end(),
                                 [](const db::JobSummary& job) { return !job.host.empty(); });
  if (json) {
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const db::JobSummary& job = jobs[i];
      const LastIncident last = last_incident(job);
      const db::LiveState& live = job.live;
      ordered_json line = {
          {"name", job.name},
          {"display_name", names[i]},
          {"folder", job.home},
          {"trainer", job.trainer},
          {"outcome", job.outcome},
          {"status", job.status()},
          {"runs", job.runs},
          {"events", job.events},
          {"log_dir", job.log_dir},
          {"last_seen", when(job.last_seen)},
          {"phase", last.phase == "-" ? ordered_json(nullptr) : ordered_json(last.phase)},
          {"step", optional_json(live.step ? live.step : job.last_step)},
          {"total_steps", optional_json(live.total_steps)},
          {"percent", optional_json(percent_done(live.step, live.total_steps))},
          {"rate", optional_json(live.steps_per_second)},
          {"eta_seconds", optional_json(live.eta_seconds())},
          {"loss", optional_json(live.loss)},
          {"live_phase", live.phase.empty() ? ordered_json(nullptr) : ordered_json(live.phase)},
          {"last_write",
           live.last_write ? ordered_json(when(live.last_write)) : ordered_json(nullptr)},
          {"last_line",
           live.last_line.empty() ? ordered_json(nullptr) : ordered_json(live.last_line)},
          {"stalled_since",
           live.stalled_since ? ordered_json(when(*live.stalled_since)) : ordered_json(nullptr)},
          {"predicted_oom", job.predicted_oom},
          {"near_oom", job.near_oom},
          {"last_oom_step", optional_json(job.last_step)},
          {"top_fix", last.top_fix == "-" ? ordered_json(nullptr) : ordered_json(last.top_fix)},
          {"gpu_peak_bytes", optional_json(job.gpu_peak_bytes)},
          {"gpu_total_bytes", optional_json(job.gpu_total_bytes)},
          {"gpu_headroom_bytes", optional_json(headroom(job))},
          {"model_family", job.family.empty() ? ordered_json(nullptr) : ordered_json(job.family)},
          {"model_family_name", job.family.empty()
                                    ? ordered_json(nullptr)
                                    : ordered_json(parsers::family_display_name(job.family))}};
      if (!job.host.empty()) line["host"] = job.host;
      out.push_back(std::move(line));
    }
    fmt::print("{}\n", ordered_json{{"oomtriage", 1}, {"jobs", out}}.dump(2));
    return kExitOk;
  }
  if (jobs.empty()) {
    fmt::print("no jobs{} (store: {}{})\n", filter.any() ? " match" : " yet", target.location,
               target.host.empty() ? "" : ", host " + target.host);
    return kExitOk;
  }
  const bool c = color_enabled(color);
  const std::string host_header = hosts ? fmt::format("{:<16} ", "HOST") : "";
  fmt::print(
      "{}{:<32} {:<12} {:<14} {:<14} {:<12} {:>11} {:>9} {:>7} {:>8} {:<14} {:>6} {:<24} {:>4} "
      "{:>6} "
      "{:>11} {:>8}  {}\n",
      host_header, "JOB", "TRAINER", "STATUS", "WARNING", "FAMILY", "STEP", "RATE", "ETA", "LOSS",
      "LAST OOM", "AT", "TOP FIX", "RUNS", "EVENTS", "GPU PEAK", "HEADROOM", "LAST SEEN");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const db::JobSummary& job = jobs[i];
    const LastIncident last = last_incident(job);
    const std::string status = job.status();
    const std::string outcome =
        paint(c && (status.starts_with("crashed") || status == "stalled"),
              fmt::fg(status == "stalled" ? fmt::terminal_color::yellow : fmt::terminal_color::red),
              fmt::format("{:<14}", status));
    const db::LiveState& live = job.live;
    const std::string warning = job.near_oom        ? "near OOM"
                                : job.predicted_oom ? "predicted OOM"
                                                    : "-";
    const std::string step =
        live.step ? fmt::format("{}{}", *live.step,
                                live.total_steps ? "/" + std::to_string(*live.total_steps) : "")
                  : "-";
    const auto eta = live.eta_seconds();
    const std::string host = hosts ? fmt::format("{:<16} ", job.host) : "";
    const std::string peak = job.gpu_peak_bytes
                                 ? fmt::format("{}/{}", gib_text(*job.gpu_peak_bytes),
                                               gib_text(job.gpu_total_bytes.value_or(0)))
                                 : "-";
    const auto room = headroom(job);
    fmt::print(
        "{}{:<32} {:<12} {} {:<14} {:<12} {:>11} {:>9} {:>7} {:>8} {:<14} {:>6} {:<24} {:>4} {:>6} "
        "{:>11} {:>8}  {}\n",
        host, names[i], job.trainer, outcome, warning,
        job.family.empty() ? "-" : parsers::family_display_name(job.family), step,
        live.steps_per_second ? rate_text(*live.steps_per_second) : "-",
        eta && status == "running" ? duration_text(*eta) : "-",
        live.loss ? fmt::format("{:.4g}", *live.loss) : "-", last.phase, last.step, last.top_fix,
        job.runs, job.events, peak, room ? gib_text(*room) : "-",
        when(live.last_write ? live.last_write : job.last_seen));
  }
  return kExitOk;
}

int run_report(const StoreTarget& target, const std::string& name, const ReportOptions& options) {
  auto store = open_reader(target);
  std::error_code ec;
  if (!name.empty() && std::filesystem::exists(name, ec)) {
    // A log or a job's folder: answered with or without a store. A folder without a log may
    // still be a stored job's name.
    auto log = job_log_at(name);
    if (log) {
      return report_path(store ? store->get() : nullptr,
                         store ? std::nullopt : std::optional<Error>(store.error()), target, name,
                         *log, options);
    }
    if (!store || !*store) {
      fmt::print(stderr, "oomtriage: {}\n", log.error().message);
      return exit_code_for(log.error());
    }
  }
  if (!store) {
    fmt::print(stderr, "oomtriage: {}\n", store.error().message);
    return exit_code_for(store.error());
  }
  std::vector<db::JobSummary> jobs;
  if (*store) {
    // The jobs of that name first (an index lookup in a store of 100,000 jobs); a shown name with
    // its folder's end, a folder or a typo needs every job.
    db::JobQuery query;
    query.host = target.host;
    if (!name.empty()) query.names = {name};
    auto listed = (*store)->find_jobs(query);
    if (listed && listed->empty() && !name.empty()) {
      query.names.clear();
      listed = (*store)->find_jobs(query);
    }
    if (!listed) {
      fmt::print(stderr, "oomtriage: {}\n", listed.error().message);
      return kExitEnvironment;
    }
    jobs = std::move(*listed);
  }
  keep_newest(jobs);
  if (jobs.empty()) {
    // Nothing stored yet (the daemon never ran, or found nothing): what answers instead.
    const std::string where =
        *store ? "in " + target.location : "(no store at " + target.location + " yet)";
    const std::string hint =
        "; `oomtriage report LOG` reads a log or a job's folder directly, and `oomtriage daemon` "
        "keeps each job's history";
    if (name.empty()) {
      fmt::print(stderr, "oomtriage: no jobs yet {}{}\n", where, hint);
    } else {
      fmt::print(stderr, "oomtriage: no job named '{}' {}{}{}\n", name, where,
                 target.host.empty() ? "" : " on host " + target.host, hint);
    }
    return kExitBadInput;
  }
  const std::vector<std::string> names = display_names(jobs);
  const db::JobSummary* chosen = nullptr;
  if (name.empty()) {
    // No name: the newest job that crashed, else the newest job.
    for (const auto& job : jobs) {
      if (!chosen && job.outcome.starts_with("crashed")) chosen = &job;
    }
    if (!chosen) chosen = &jobs.front();
  } else {
    const JobMatch match = find_job(name, jobs, names);
    if (!match.candidates.empty()) {
      const bool hosts = std::any_of(jobs.begin(), jobs.end(),
                                     [](const db::JobSummary& job) { return !job.host.empty(); });
      fmt::print(stderr,
                 "oomtriage: '{}' names {} jobs: {}; say which, as shown or by its folder{}\n",
                 name, match.candidates.size(), fmt::join(match.candidates, ", "),
                 hosts ? ", with --host for another node's" : "");
      return kExitBadInput;
    }
    if (match.job == nullptr) {
      const std::vector<std::string> close = close_matches(name, names, 5, 3);
      fmt::print(stderr, "oomtriage: no job named '{}' in {}{}{}\n", name, target.location,
                 target.host.empty() ? "" : " on host " + target.host,
                 close.empty() ? "" : fmt::format("; did you mean: {}", fmt::join(close, ", ")));
      return kExitBadInput;
    }
    chosen = match.job;
  }
  // In a fleet store the name may be on several hosts: the chosen job's is meant.
  if (auto* fleet = dynamic_cast<db::FleetStore*>(store->get()); fleet && target.host.empty()) {
    fleet->set_host_filter(chosen->host);
  }
  auto found = (*store)->job_story(chosen->name, chosen->home);
  if (!found) {
    fmt::print(stderr, "oomtriage: {}\n", found.error().message);
    return exit_code_for(found.error());
  }
  std::optional<db::JobStory> story = std::move(*found);
  if (!story) {
    fmt::print(stderr, "oomtriage: job '{}' is gone from {}\n", name, target.location);
    return kExitEnvironment;
  }

  ReportView view = build_view(*story);
  view.name = names[static_cast<size_t>(chosen - jobs.data())];
  view.report_command = "oomtriage report " + shell_quote(view.name) +
                        (chosen->host.empty() ? "" : " --host " + shell_quote(chosen->host));
  ReportOptions with_page = options;
  with_page.page_url = job_page_url(target.web_url, chosen->name);
  return print_story(*story, std::move(view), with_page);
}

}  // namespace oomtriage::daemon
