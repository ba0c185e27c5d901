// daemon/cli/report_command.cc: the store's rows back into words and JSON.
#include "daemon/cli/report_command.h"

#include "daemon/common/clock.h"

#include <unistd.h>

#include <fmt/color.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "daemon/cli/log_reader.h"
#include "daemon/render/did_you_mean.h"
#include "daemon/render/text_output.h"
#include "db/fleet_store.h"
#include "db/store.h"
#include "parsers/job_config.h"
#include "daemon/render/json_output.h"
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
  return std::unique_ptr<db::JobReader>(std::move(*store));
}

int exit_code_of(const Error& error) {
  return error.code == ErrorCode::kBadInput ? kExitBadInput : kExitEnvironment;
}

std::string family_of(const db::SnapshotRow& snapshot) {
  const auto format = snapshot.path.ends_with(".json") ? parsers::ConfigFormat::kJson
                                                       : parsers::ConfigFormat::kYaml;
  auto load = parsers::parse_job_config(snapshot.content, format, snapshot.path);
  return load.config ? std::string(parsers::to_string(load.config->family)) : "unknown";
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

}  // namespace

std::string memory_bar(uint64_t capacity, uint64_t used, uint64_t tried, int width) {
  if (capacity == 0 || width <= 0) return "";
  const auto cells = [&](uint64_t bytes) {
    return static_cast<int>(std::min<uint64_t>(width, (bytes * width + capacity / 2) / capacity));
  };
  const int used_cells = cells(std::min(used, capacity));
  const int tried_cells = std::min(width - used_cells, std::max(tried > 0 ? 1 : 0, cells(tried)));
  const int free_cells = width - used_cells - tried_cells;
  return "[" + std::string(used_cells, '#') + std::string(tried_cells, '!') +
         std::string(free_cells, '.') + "]";
}

std::optional<int64_t> parse_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 9 || digits + 1 != text.size()) return std::nullopt;
  const int64_t n = std::stoll(text.substr(0, digits));
  switch (text.back()) {
    case 's':
      return n;
    case 'm':
      return n * 60;
    case 'h':
      return n * 3600;
    case 'd':
      return n * 86400;
    case 'w':
      return n * 7 * 86400;
    default:
      return std::nullopt;
  }
}

int run_jobs(const StoreTarget& target, const JobsFilter& filter, bool json, ColorMode color) {
  auto store = open_reader(target);
  if (!store) {
    fmt::print(stderr, "oomtriage: {}\n", store.error().message);
    return exit_code_of(store.error());
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
  const int64_t now = unix_now();
  std::erase_if(jobs, [&](const db::JobSummary& job) {
    return (filter.since_seconds && job.last_seen < now - *filter.since_seconds) ||
           (!filter.outcome.empty() && job.outcome != filter.outcome);
  });
  if (filter.limit > 0 && jobs.size() > filter.limit) jobs.resize(filter.limit);
  // The fleet store's jobs come from many nodes: each says which.
  const bool hosts = std::any_of(jobs.begin(), jobs.end(),
                                 [](const db::JobSummary& job) { return !job.host.empty(); });
  if (json) {
    ordered_json out = ordered_json::array();
    for (const auto& job : jobs) {
      const LastIncident last = last_incident(job);
      ordered_json line = {
          {"name", job.name},
          {"trainer", job.trainer},
          {"outcome", job.outcome},
          {"runs", job.runs},
          {"events", job.events},
          {"log_dir", job.log_dir},
          {"last_seen", when(job.last_seen)},
          {"phase", last.phase == "-" ? ordered_json(nullptr) : ordered_json(last.phase)},
          {"step", last.step == "-" ? ordered_json(nullptr) : ordered_json(std::stoll(last.step))},
          {"top_fix", last.top_fix == "-" ? ordered_json(nullptr) : ordered_json(last.top_fix)}};
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
  fmt::print("{}{:<32} {:<12} {:<14} {:<14} {:>6} {:<24} {:>4} {:>6}  {}\n", host_header, "JOB",
             "TRAINER", "OUTCOME", "PHASE", "STEP", "TOP FIX", "RUNS", "EVENTS", "LAST SEEN");
  for (const auto& job : jobs) {
    const LastIncident last = last_incident(job);
    const std::string outcome =
        paint(c && job.outcome.starts_with("crashed"), fmt::fg(fmt::terminal_color::red),
              fmt::format("{:<14}", job.outcome));
    const std::string host = hosts ? fmt::format("{:<16} ", job.host) : "";
    fmt::print("{}{:<32} {:<12} {} {:<14} {:>6} {:<24} {:>4} {:>6}  {}\n", host, job.name,
               job.trainer, outcome, last.phase, last.step, last.top_fix, job.runs, job.events,
               when(job.last_seen));
  }
  return kExitOk;
}

int run_report(const StoreTarget& target, const std::string& name, bool json, ColorMode color) {
  auto store = open_reader(target);
  if (!store) {
    fmt::print(stderr, "oomtriage: {}\n", store.error().message);
    return exit_code_of(store.error());
  }
  std::optional<db::JobStory> story;
  std::vector<std::string> names;
  std::string job_name = name;
  if (*store && job_name.empty()) {
    // No name: the newest job that crashed, else the newest job.
    auto jobs = (*store)->list_jobs();
    if (!jobs) {
      fmt::print(stderr, "oomtriage: {}\n", jobs.error().message);
      return kExitEnvironment;
    }
    const db::JobSummary* newest = nullptr;
    for (const auto& job : *jobs) {
      if (!newest && job.outcome.starts_with("crashed")) newest = &job;
    }
    if (!newest && !jobs->empty()) newest = &jobs->front();
    if (newest) {
      job_name = newest->name;
      // In a fleet store the name may be on several hosts: this one is meant.
      if (auto* fleet = dynamic_cast<db::FleetStore*>(store->get()); fleet && target.host.empty()) {
        fleet->set_host_filter(newest->host);
      }
    }
  }
  if (job_name.empty()) {
    fmt::print(stderr, "oomtriage: no jobs yet in {}\n", target.location);
    return kExitBadInput;
  }
  if (*store) {
    auto found = (*store)->job_story(job_name);
    if (!found) {
      fmt::print(stderr, "oomtriage: {}\n", found.error().message);
      return exit_code_of(found.error());
    }
    story = std::move(*found);
    if (auto jobs = (*store)->list_jobs()) {
      for (const auto& job : *jobs) names.push_back(job.name);
    }
  }
  if (!story) {
    const std::vector<std::string> close = close_matches(job_name, names, 5, 3);
    fmt::print(stderr, "oomtriage: no job named '{}' in {}{}{}\n", job_name, target.location,
               target.host.empty() ? "" : " on host " + target.host,
               close.empty() ? "" : fmt::format("; did you mean: {}", fmt::join(close, ", ")));
    return kExitBadInput;
  }

  ordered_json events = ordered_json::array();
  for (const auto& e : story->events) {
    ordered_json event = ordered_json::parse(e.event_json, nullptr, false);
    if (event.is_discarded()) continue;
    event["run_id"] = e.run_id;
    event["snapshot_id"] = e.snapshot_id ? ordered_json(*e.snapshot_id) : ordered_json(nullptr);
    event["stored_at"] = when(e.created_at);
    events.push_back(event);
  }
  ordered_json fixes = story->events.empty()
                           ? ordered_json::array()
                           : ordered_json::parse(story->events.back().fixes_json, nullptr, false);
  const std::string family =
      story->snapshots.empty() ? "unknown" : family_of(story->snapshots.back());

  if (json) {
    ordered_json runs = ordered_json::array();
    for (const auto& r : story->runs) {
      const Carried carried = carried_by(*story, runs.size());
      ordered_json attempt = nullptr;
      if (const db::HealAttempt* a = attempt_of(*story, r.id)) {
        attempt = {
            {"attempt", a->attempt},
            {"max_attempts", a->max_attempts},
            {"fix_id", a->fix_id.empty() ? ordered_json(nullptr) : ordered_json(a->fix_id)},
            {"change", a->change},
            {"argv", ordered_json::parse(a->argv_json, nullptr, false)},
            {"resumed_step",
             a->resumed_step ? ordered_json(*a->resumed_step) : ordered_json(nullptr)},
            {"outcome", a->outcome},
            {"verdict", a->verdict.empty() ? ordered_json(nullptr) : ordered_json(a->verdict)}};
      }
      runs.push_back(
          {{"id", r.id},
           {"log_path", r.log_path},
           {"outcome", r.outcome},
           {"started_at", when(r.started_at)},
           {"updated_at", when(r.updated_at)},
           {"snapshot_id", r.snapshot_id ? ordered_json(*r.snapshot_id) : ordered_json(nullptr)},
           {"carried_fixes", carried.ids},
           {"carried_result",
            carried.verdict.empty() ? ordered_json(nullptr) : ordered_json(carried.verdict)},
           {"attempt", attempt}});
    }
    ordered_json snapshots = ordered_json::array();
    for (const auto& s : story->snapshots) {
      snapshots.push_back({{"id", s.id},
                           {"path", s.path},
                           {"sha256", s.sha256},
                           {"seen_at", when(s.seen_at)},
                           {"content", s.content}});
    }
    ordered_json job = {{"name", story->job.name},
                        {"trainer", story->job.trainer},
                        {"model_family", family},
                        {"outcome", story->job.outcome},
                        {"log_dir", story->job.log_dir}};
    if (!story->job.host.empty()) job["host"] = story->job.host;
    const ordered_json out = {
        {"oomtriage", 1},   {"job", job},
        {"runs", runs},     {"snapshots", snapshots},
        {"events", events}, {"fixes", fixes.is_discarded() ? ordered_json::array() : fixes}};
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return kExitOk;
  }

  const bool c = color_enabled(color);
  const auto bold = [&](const std::string& s) { return paint(c, fmt::emphasis::bold, s); };
  fmt::print("{}  {}  {}  model {}\n", bold("job " + story->job.name), story->job.trainer,
             story->job.outcome, family);
  fmt::print("folder {}\n", story->job.log_dir);
  if (!story->job.host.empty()) fmt::print("host {}\n", story->job.host);
  fmt::print("\n");
  fmt::print("{}\n", bold("runs"));
  for (size_t i = 0; i < story->runs.size(); ++i) {
    const auto& r = story->runs[i];
    fmt::print("  #{}  {}  {}  {}\n", r.id, when(r.started_at), r.outcome, r.log_path);
    if (const db::HealAttempt* a = attempt_of(*story, r.id)) {
      std::string line = fmt::format("attempt {}/{}", a->attempt, a->max_attempts);
      if (!a->change.empty()) line += ": " + a->change;
      if (a->attempt > 1 && a->resumed_step) {
        line += fmt::format(", resumed at step {}", *a->resumed_step);
      }
      line += ", " + a->outcome;
      if (!a->verdict.empty()) line += " (" + a->verdict + ")";
      fmt::print("       {}\n", line);
    }
    const Carried carried = carried_by(*story, i);
    if (!carried.ids.empty()) {
      fmt::print("       carried {} from the previous crash: {}\n", fmt::join(carried.ids, ", "),
                 carried.verdict);
    }
  }
  fmt::print("\n{}\n", bold("config"));
  if (story->snapshots.empty()) fmt::print("  no config file seen\n");
  for (size_t i = 0; i < story->snapshots.size(); ++i) {
    const auto& s = story->snapshots[i];
    fmt::print("  snapshot {}  sha256 {}  taken {}  {}\n", s.id, s.sha256.substr(0, 12),
               when(s.seen_at), s.path);
    if (i > 0) {
      const std::string diff =
          triage::unified_diff(story->snapshots[i - 1].content, s.content, "previous", "this");
      for (size_t at = 0, next; at < diff.size(); at = next + 1) {
        next = diff.find('\n', at);
        if (next == std::string::npos) next = diff.size();
        fmt::print("    {}\n", diff.substr(at, next - at));
      }
    }
  }
  fmt::print("\n{}\n", bold(fmt::format("out-of-memory events ({})", story->events.size())));
  int index = 0;
  for (const auto& event : events) {
    ++index;
    const auto get = [&](const char* key) -> uint64_t {
      return event.contains(key) && event[key].is_number() ? event[key].get<uint64_t>() : 0;
    };
    const auto number = [&event](const char* key) -> std::optional<int64_t> {
      if (!event.contains(key) || !event[key].is_number_integer()) return std::nullopt;
      return event[key].get<int64_t>();
    };
    const std::string step = step_text(number("step"), number("total_steps"));
    fmt::print("  {}. {} in {}, {}{}  (run #{}, line {})\n", index,
               event["kind"].get<std::string>(), event["phase"].get<std::string>(), step,
               event["recovered"].get<bool>() ? " (recovered)" : "", event["run_id"].dump(),
               event["line"].dump());
    const uint64_t capacity = get("total_capacity_bytes");
    if (capacity > 0) {
      uint64_t used = get("this_process_in_use_bytes");
      if (used == 0 || used > capacity)
        used = get("allocated_by_pytorch_bytes") + get("reserved_unallocated_bytes");
      const uint64_t tried = get("tried_to_allocate_bytes");
      fmt::print("     {} used {} + tried {} of {} ({} free)\n",
                 memory_bar(capacity, used, tried, 30), format_bytes(used), format_bytes(tried),
                 format_bytes(capacity),
                 event["free_bytes"].is_null() ? "?" : format_bytes(get("free_bytes")));
    }
    std::string message = event["message"].get<std::string>();
    if (message.size() > 150) message = message.substr(0, 150) + "…";
    fmt::print("     {}\n", message);
    // Why this phase and this step: the line that showed each.
    for (const auto& [key, what] :
         {std::pair{"phase_evidence", "phase"}, std::pair{"step_evidence", "step"}}) {
      if (!event.contains(key) || !event[key].is_object()) continue;
      const auto& evidence = event[key];
      fmt::print("     {} from {} at line {}: {}\n", what, evidence.value("source", "?"),
                 evidence.value("line", int64_t{0}), evidence.value("text", ""));
    }
  }
  if (!fixes.is_discarded() && !fixes.empty()) {
    // A job that went on to complete (healed, or fixed by hand) no longer needs them: said, so
    // that the fix which worked is not read as still to do.
    const bool completed_since = !story->runs.empty() && story->runs.back().outcome == "completed";
    fmt::print("\n{}\n", bold(completed_since ? "fixes for the last incident, best first (the job "
                                                "completed in a later run)"
                                              : "fixes for the last incident, best first"));
    for (const auto& fix : fixes) {
      fmt::print("  {}. {} [{}]\n", fix["rank"].dump(), fix["title"].get<std::string>(),
                 fix["id"].get<std::string>());
      if (fix.contains("target") && fix["target"].is_object() && !fix["changes"].empty()) {
        const auto& target = fix["target"];
        fmt::print("       in {}{}\n", target.value("kind", "?"),
                   target["path"].is_string() ? " " + target["path"].get<std::string>() : "");
      }
      for (const auto& change : fix["changes"]) {
        fmt::print("       {}: {} -> {}\n", change["path"].get<std::string>(),
                   change["from"].dump(), change["to"].dump());
      }
      if (fix.contains("check") && fix["check"].is_string()) {
        fmt::print("       check: {}\n", fix["check"].get<std::string>());
      }
      fmt::print("       cost: {}\n", fix["cost"].get<std::string>());
    }
  }
  return kExitOk;
}

}  // namespace oomtriage::daemon
