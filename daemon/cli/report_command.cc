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
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "daemon/cli/log_reader.h"
#include "daemon/render/did_you_mean.h"
#include "daemon/render/html_report.h"
#include "daemon/render/job_names.h"
#include "daemon/render/json_output.h"
#include "daemon/render/json_report.h"
#include "daemon/render/markdown_report.h"
#include "daemon/render/text_output.h"
#include "daemon/render/text_report.h"
#include "db/fleet_store.h"
#include "db/loss_log.h"
#include "db/store.h"
#include "db/store_recovery.h"
#include "parsers/job_config.h"
#include "parsers/loss_curve.h"
#include "triage/config_patch.h"
#include "triage/history.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

// RFC 3339, UTC.
std::string when(int64_t unix_seconds) { return utc_time(unix_seconds, "%Y-%m-%dT%H:%M:%SZ"); }

// The newest event's phase, step and top fix, for the jobs table.
struct LastIncident {
  std::string phase = "-";
  std::string step = "-";
  std::string top_fix = "-";
};

// What the newest sampled run left free on its card at its peak.
std::optional<uint64_t> headroom(const db::JobSummary& job) {
  if (!job.gpu_peak_bytes || !job.gpu_total_bytes) return std::nullopt;
  return *job.gpu_total_bytes > *job.gpu_peak_bytes ? *job.gpu_total_bytes - *job.gpu_peak_bytes
                                                    : 0;
}

ordered_json optional_json(const std::optional<uint64_t>& bytes) {
  return bytes ? ordered_json(*bytes) : ordered_json(nullptr);
}

// "22.1G": the jobs table's narrow columns.
std::string gib_text(uint64_t bytes) {
  return fmt::format("{:.1f}G", static_cast<double>(bytes) / (1ull << 30));
}

LastIncident last_incident(const db::JobSummary& job) {
  LastIncident out;
  const auto event = nlohmann::json::parse(job.last_event_json, nullptr, false);
  if (event.is_object()) {
    out.phase = event.value("phase", "-");
    if (event.contains("step") && event["step"].is_number_integer()) {
      out.step = std::to_string(event["step"].get<int64_t>());
    }
  }
  const auto fixes = nlohmann::json::parse(job.last_fixes_json, nullptr, false);
  if (fixes.is_array() && !fixes.empty() && fixes[0].is_object()) {
    out.top_fix = fixes[0].value("id", "-");
  }
  return out;
}

// Opens the store read-side; a missing SQLite store is "no jobs yet" (a null reader), not an
// error.
Result<std::unique_ptr<db::JobReader>> open_reader(const StoreTarget& target) {
  if (db::is_fleet_url(target.location)) {
    auto fleet = db::FleetStore::open(target.location);
    if (!fleet) return fleet.error();
    (*fleet)->set_host_filter(target.host);
    return std::unique_ptr<db::JobReader>(std::move(*fleet));
  }
  if (!target.host.empty()) {
    return make_error(ErrorCode::kBadInput,
                      "--host picks a node in a fleet store (--store postgresql://...); " +
                          target.location + " holds this node's jobs only");
  }
  if (!std::filesystem::exists(target.location)) return std::unique_ptr<db::JobReader>();
  auto store = db::Store::open(target.location);
  if (!store) {
    return make_error(store.error().code,
                      fmt::format("store {}: {}", target.location, store.error().message));
  }
  if (const auto note = db::recovery_note(**store))
    fmt::print(stderr, "oomtriage: note: {}\n", *note);
  return std::unique_ptr<db::JobReader>(std::move(*store));
}

std::string family_of(const db::SnapshotRow& snapshot) {
  const auto format = snapshot.path.ends_with(".json") ? parsers::ConfigFormat::kJson
                                                       : parsers::ConfigFormat::kYaml;
  auto load = parsers::parse_job_config(snapshot.content, format, snapshot.path);
  return load ? std::string(parsers::to_string(load->family)) : "unknown";
}

// What a run carried from the previous run's crash, and how it went.
struct Carried {
  std::vector<std::string> ids;
  std::string verdict;  // "worked", "did not work: crashed again in sampling", ...
};

Carried carried_by(const db::JobStory& story, size_t run_index) {
  Carried out;
  if (run_index == 0) return out;
  const db::RunRow& run = story.runs[run_index];
  // The previous crash: the newest fatal event of an earlier run.
  const db::StoredEvent* previous = nullptr;
  const db::StoredEvent* own = nullptr;
  for (const auto& event : story.events) {
    const auto json = nlohmann::json::parse(event.event_json, nullptr, false);
    if (!json.is_object() || json.value("recovered", false)) continue;
    if (event.run_id < run.id) previous = &event;
    if (event.run_id == run.id && own == nullptr) own = &event;
  }
  // The config the run ran with: its first crash's snapshot, else the one taken at its start.
  std::optional<int64_t> snapshot_id = own && own->snapshot_id ? own->snapshot_id : run.snapshot_id;
  const db::SnapshotRow* snapshot = nullptr;
  for (const auto& s : story.snapshots) {
    if (snapshot_id && s.id == *snapshot_id) snapshot = &s;
  }
  if (previous == nullptr || snapshot == nullptr) return out;
  const std::string ext = std::filesystem::path(snapshot->path).extension().string();
  const parsers::TargetKind kind = ext == ".json"   ? parsers::TargetKind::kJson
                                   : ext == ".toml" ? parsers::TargetKind::kToml
                                                    : parsers::TargetKind::kYaml;
  out.ids = triage::carried_fixes(fixes_from_json(previous->fixes_json),
                                  {{kind, snapshot->path, snapshot->content}});
  if (out.ids.empty()) return out;
  const std::string before =
      nlohmann::json::parse(previous->event_json, nullptr, false).value("phase", "");
  if (run.outcome == "completed") {
    out.verdict = "worked: the run completed";
  } else if (own != nullptr) {
    const std::string phase =
        nlohmann::json::parse(own->event_json, nullptr, false).value("phase", "");
    out.verdict = phase == before ? "did not work: crashed again in " + phase
                                  : "crashed again, in " + phase + " this time";
  } else {
    out.verdict = "no crash so far (" + run.outcome + ")";
  }
  return out;
}

// The `oomtriage run` attempt that was run `run_id`, if it was one.
const db::HealAttempt* attempt_of(const db::JobStory& story, int64_t run_id) {
  for (const auto& attempt : story.attempts) {
    if (attempt.run_id == run_id) return &attempt;
  }
  return nullptr;
}

// "attempt 2/3: train.batch_size 2 -> 1, resumed at step 500, crashed_oom (verdict)".
std::string attempt_text(const db::HealAttempt& a) {
  std::string line = fmt::format("attempt {}/{}", a.attempt, a.max_attempts);
  if (!a.change.empty()) line += ": " + a.change;
  if (a.attempt > 1 && a.resumed_step) line += fmt::format(", resumed at step {}", *a.resumed_step);
  line += ", " + a.outcome;
  if (!a.verdict.empty()) line += " (" + a.verdict + ")";
  return line;
}

ReportView build_view(const db::JobStory& story) {
  ReportView view;
  view.name = story.job.name;
  view.job_name = story.job.name;
  view.trainer = story.job.trainer;
  view.model_family = story.snapshots.empty() ? "unknown" : family_of(story.snapshots.back());
  view.outcome = story.job.outcome;
  view.log_dir = story.job.log_dir;
  view.host = story.job.host;
  view.made_at = when(unix_now());
  for (size_t i = 0; i < story.runs.size(); ++i) {
    const db::RunRow& r = story.runs[i];
    RunView run;
    run.number = static_cast<int>(i + 1);
    run.id = r.id;
    run.log_path = r.log_path;
    run.outcome = r.outcome;
    run.started_at = when(r.started_at);
    run.updated_at = when(r.updated_at);
    Carried carried = carried_by(story, i);
    run.carried_fixes = std::move(carried.ids);
    run.carried_result = std::move(carried.verdict);
    if (const db::HealAttempt* a = attempt_of(story, r.id)) run.attempt = attempt_text(*a);
    view.runs.push_back(std::move(run));
  }
  for (size_t i = 0; i < story.snapshots.size(); ++i) {
    const db::SnapshotRow& s = story.snapshots[i];
    view.snapshots.push_back({s.id, s.path, s.sha256, when(s.seen_at),
                              i == 0 ? ""
                                     : triage::unified_diff(story.snapshots[i - 1].content,
                                                            s.content, "previous", "this")});
  }
  for (const auto& e : story.events) {
    ordered_json event = ordered_json::parse(e.event_json, nullptr, false);
    if (event.is_discarded()) continue;
    event["run_id"] = e.run_id;
    event["snapshot_id"] = e.snapshot_id ? ordered_json(*e.snapshot_id) : ordered_json(nullptr);
    event["stored_at"] = when(e.created_at);
    view.events.push_back(std::move(event));
  }
  if (!story.events.empty()) {
    ordered_json fixes = ordered_json::parse(story.events.back().fixes_json, nullptr, false);
    if (fixes.is_array()) view.fixes = std::move(fixes);
  }
  // A job that went on to complete (healed, or fixed by hand) no longer needs them: said, so that
  // the fix which worked is not read as still to do.
  view.completed_since = !story.runs.empty() && story.runs.back().outcome == "completed";
  view.unread_log = story.unread_log;
  for (const db::GpuMemoryRow& row : story.gpu_memory) {
    GpuMemoryView gpu;
    gpu.run_number = view.run_number(row.run_id);
    gpu.run_id = row.run_id;
    gpu.gpu = row.gpu;
    gpu.total_bytes = row.total_bytes;
    gpu.peak_bytes = row.peak_bytes;
    gpu.peak_phase = row.peak_phase;
    gpu.peak_step = row.peak_step;
    gpu.others_peak_bytes = row.others_peak_bytes;
    // A timeline that does not read (a store edited by hand) leaves the peak without the curve.
    if (auto timeline = triage::GpuTimeline::from_json(row.timeline_json)) {
      gpu.points = timeline->points();
      for (const triage::GpuPoint& point : gpu.points) {
        const std::string phase(parsers::to_string(point.phase));
        auto it = std::find_if(gpu.phase_peaks.begin(), gpu.phase_peaks.end(),
                               [&](const auto& entry) { return entry.first == phase; });
        if (it == gpu.phase_peaks.end()) {
          gpu.phase_peaks.emplace_back(phase, point.peak_bytes);
        } else {
          it->second = std::max(it->second, point.peak_bytes);
        }
      }
    }
    view.gpu_memory.push_back(std::move(gpu));
  }
  return view;
}

// The training loss for the curve: AI Toolkit's loss_log.db beside the log when it has rows, else
// what the runs' logs show in their bars.
LossCurve loss_curve_of(const ReportView& view) {
  LossCurve curve;
  // A fleet store's job ran on another node: the files at its paths here are not its.
  if (!view.host.empty()) return curve;
  std::error_code ec;
  const std::string loss_db = (std::filesystem::path(view.log_dir) / "loss_log.db").string();
  if (!view.log_dir.empty() && std::filesystem::exists(loss_db, ec)) {
    auto points = db::read_aitk_loss_log(loss_db);
    if (points && !points->empty()) return {std::move(*points), "loss_log.db"};
    if (!points)
      fmt::print(stderr, "oomtriage: {}; the loss comes from the log\n", points.error().message);
  }
  const parsers::Trainer trainer =
      parsers::trainer_from_string(view.trainer).value_or(parsers::Trainer::kUnknown);
  parsers::LossCurveReader reader(view.job_name, trainer);
  std::set<std::string> read;
  for (const RunView& run : view.runs) {
    if (!read.insert(run.log_path).second || !std::filesystem::exists(run.log_path, ec)) continue;
    // A log that cannot be read leaves the curve without it; the page says where the loss came
    // from.
    (void)read_log_content(run.log_path, [&](std::string_view chunk) { reader.feed(chunk); });
    reader.finish();
  }
  curve.points = reader.points();
  if (!curve.points.empty()) curve.source = "the log's progress bar";
  return curve;
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

int run_jobs(const StoreTarget& target, const JobsFilter& filter, bool json, ColorMode color) {
  auto store = open_reader(target);
  if (!store) {
    fmt::print(stderr, "oomtriage: {}\n", store.error().message);
    return exit_code_for(store.error());
  }
  std::vector<db::JobSummary> jobs;
  if (*store) {
    auto listed = (*store)->list_jobs();
    if (!listed) {
      fmt::print(stderr, "oomtriage: {}\n", listed.error().message);
      return kExitEnvironment;
    }
    jobs = std::move(*listed);
  }
  keep_newest(jobs);
  // Names over every job, so that what is shown is what `report` takes whatever the filters.
  const std::vector<std::string> all_names = display_names(jobs);
  const int64_t now = unix_now();
  std::vector<std::string> names;
  std::vector<db::JobSummary> kept;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const db::JobSummary& job = jobs[i];
    if ((filter.since_seconds && job.last_seen < now - *filter.since_seconds) ||
        (!filter.outcome.empty() && job.outcome != filter.outcome)) {
      continue;
    }
    if (filter.limit > 0 && kept.size() == filter.limit) break;
    kept.push_back(job);
    names.push_back(all_names[i]);
  }
  jobs = std::move(kept);
  // The fleet store's jobs come from many nodes: each says which.
  const bool hosts = std::any_of(jobs.begin(), jobs.end(),
                                 [](const db::JobSummary& job) { return !job.host.empty(); });
  if (json) {
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const db::JobSummary& job = jobs[i];
      const LastIncident last = last_incident(job);
      ordered_json line = {
          {"name", job.name},
          {"display_name", names[i]},
          {"folder", job.home},
          {"trainer", job.trainer},
          {"outcome", job.outcome},
          {"runs", job.runs},
          {"events", job.events},
          {"log_dir", job.log_dir},
          {"last_seen", when(job.last_seen)},
          {"phase", last.phase == "-" ? ordered_json(nullptr) : ordered_json(last.phase)},
          {"step", last.step == "-" ? ordered_json(nullptr) : ordered_json(std::stoll(last.step))},
          {"top_fix", last.top_fix == "-" ? ordered_json(nullptr) : ordered_json(last.top_fix)},
          {"gpu_peak_bytes", optional_json(job.gpu_peak_bytes)},
          {"gpu_total_bytes", optional_json(job.gpu_total_bytes)},
          {"gpu_headroom_bytes", optional_json(headroom(job))}};
      if (!job.host.empty()) line["host"] = job.host;
      out.push_back(std::move(line));
    }
    fmt::print("{}\n", ordered_json{{"oomtriage", 1}, {"jobs", out}}.dump(2));
    return kExitOk;
  }
  if (jobs.empty()) {
    fmt::print("no jobs{} (store: {}{})\n",
               filter.since_seconds || !filter.outcome.empty() ? " match" : " yet", target.location,
               target.host.empty() ? "" : ", host " + target.host);
    return kExitOk;
  }
  const bool c = color_enabled(color);
  const std::string host_header = hosts ? fmt::format("{:<16} ", "HOST") : "";
  fmt::print("{}{:<32} {:<12} {:<14} {:<14} {:>6} {:<24} {:>4} {:>6} {:>11} {:>8}  {}\n",
             host_header, "JOB", "TRAINER", "OUTCOME", "PHASE", "STEP", "TOP FIX", "RUNS", "EVENTS",
             "GPU PEAK", "HEADROOM", "LAST SEEN");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const db::JobSummary& job = jobs[i];
    const LastIncident last = last_incident(job);
    const std::string outcome =
        paint(c && job.outcome.starts_with("crashed"), fmt::fg(fmt::terminal_color::red),
              fmt::format("{:<14}", job.outcome));
    const std::string host = hosts ? fmt::format("{:<16} ", job.host) : "";
    const std::string peak = job.gpu_peak_bytes
                                 ? fmt::format("{}/{}", gib_text(*job.gpu_peak_bytes),
                                               gib_text(job.gpu_total_bytes.value_or(0)))
                                 : "-";
    const auto room = headroom(job);
    fmt::print("{}{:<32} {:<12} {} {:<14} {:>6} {:<24} {:>4} {:>6} {:>11} {:>8}  {}\n", host,
               names[i], job.trainer, outcome, last.phase, last.step, last.top_fix, job.runs,
               job.events, peak, room ? gib_text(*room) : "-", when(job.last_seen));
  }
  return kExitOk;
}

int run_report(const StoreTarget& target, const std::string& name, const ReportOptions& options) {
  auto store = open_reader(target);
  if (!store) {
    fmt::print(stderr, "oomtriage: {}\n", store.error().message);
    return exit_code_for(store.error());
  }
  std::vector<db::JobSummary> jobs;
  if (*store) {
    auto listed = (*store)->list_jobs();
    if (!listed) {
      fmt::print(stderr, "oomtriage: {}\n", listed.error().message);
      return kExitEnvironment;
    }
    jobs = std::move(*listed);
  }
  keep_newest(jobs);
  if (jobs.empty()) {
    if (name.empty()) {
      fmt::print(stderr, "oomtriage: no jobs yet in {}\n", target.location);
    } else {
      fmt::print(stderr, "oomtriage: no job named '{}' in {}{}\n", name, target.location,
                 target.host.empty() ? "" : " on host " + target.host);
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
  switch (options.format) {
    case ReportFormat::kJson: fmt::print("{}", render_json_report(*story, view)); return kExitOk;
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
      return kExitOk;
  }
  return kExitOk;
}

}  // namespace oomtriage::daemon
