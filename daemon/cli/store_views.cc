// daemon/cli/store_views.cc: a store opened read-side, and a job's rows made into the views
// every face draws (`jobs`, `report`, `serve`).
#include "daemon/cli/store_views.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

#include "daemon/cli/log_reader.h"
#include "daemon/common/clock.h"
#include "daemon/service/job_locator.h"
#include "db/fleet_store.h"
#include "db/loss_log.h"
#include "db/store.h"
#include "db/store_recovery.h"
#include "parsers/event_codec.h"
#include "parsers/job_config.h"
#include "parsers/loss_curve.h"
#include "triage/config_patch.h"
#include "triage/fix_codec.h"
#include "triage/history.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

std::string family_of(const db::SnapshotRow& snapshot) {
  const auto read =
      read_config_text(snapshot.path, snapshot.content, parsers::Trainer::kUnknown, std::nullopt);
  return read ? std::string(parsers::to_string(read->config.family)) : "unknown";
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
  parsers::Phase previous_phase = parsers::Phase::kUnknown;
  parsers::Phase own_phase = parsers::Phase::kUnknown;
  for (const auto& event : story.events) {
    const auto decoded = parsers::decode_event(event.event_json);
    if (!decoded || decoded->recovered) continue;
    if (event.run_id < run.id) {
      previous = &event;
      previous_phase = decoded->phase;
    }
    if (event.run_id == run.id && own == nullptr) {
      own = &event;
      own_phase = decoded->phase;
    }
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
  const auto fixes = triage::decode_fixes(previous->fixes_json);
  if (!fixes) return out;
  out.ids = triage::carried_fixes(*fixes, {{kind, snapshot->path, snapshot->content}});
  if (out.ids.empty()) return out;
  if (run.outcome == "completed") {
    out.verdict = "worked: the run completed";
  } else if (own != nullptr) {
    const std::string phase(parsers::to_string(own_phase));
    out.verdict = own_phase == previous_phase ? "did not work: crashed again in " + phase
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

}  // namespace

std::string when(int64_t unix_seconds) { return utc_time(unix_seconds, "%Y-%m-%dT%H:%M:%SZ"); }

std::optional<uint64_t> headroom(const db::JobSummary& job) {
  if (!job.gpu_peak_bytes || !job.gpu_total_bytes) return std::nullopt;
  return *job.gpu_total_bytes > *job.gpu_peak_bytes ? *job.gpu_total_bytes - *job.gpu_peak_bytes
                                                    : 0;
}

LastIncident last_incident(const db::JobSummary& job) {
  LastIncident out;
  if (!job.last_phase.empty()) out.phase = job.last_phase;
  if (job.last_step) out.step = std::to_string(*job.last_step);
  if (!job.top_fix.empty()) out.top_fix = job.top_fix;
  return out;
}

Result<std::unique_ptr<db::JobReader>> open_reader(const StoreTarget& target, ReadMode mode) {
  if (db::is_fleet_url(target.location)) {
    // A command run by hand reads in read-only transactions whatever its role; only a server
    // insists on a role that cannot write.
    auto fleet = db::FleetStore::open_read_only(target.location, mode != ReadMode::kReadOnly);
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
  auto store = db::Store::open_read_only(target.location, mode == ReadMode::kOneCommand
                                                              ? db::ReadOnly::kOneCommand
                                                              : db::ReadOnly::kFollowWriter);
  if (!store) return store.error();  // it names the file
  if (const auto note = db::recovery_note(**store))
    fmt::print(stderr, "oomtriage: note: {}\n", *note);
  return std::unique_ptr<db::JobReader>(std::move(*store));
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
    // A row that does not decode (a store edited by hand) is left out of the story.
    const auto decoded = parsers::decode_event(e.event_json);
    if (!decoded) continue;
    ordered_json event = parsers::encode_event(*decoded);
    event["run_id"] = e.run_id;
    event["snapshot_id"] = e.snapshot_id ? ordered_json(*e.snapshot_id) : ordered_json(nullptr);
    event["stored_at"] = when(e.created_at);
    view.events.push_back(std::move(event));
  }
  if (!story.events.empty()) {
    if (const auto fixes = triage::decode_fixes(story.events.back().fixes_json)) {
      view.fixes = ordered_json::array();
      for (const triage::Fix& fix : *fixes) view.fixes.push_back(triage::encode_fix(fix));
    }
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
      gpu.gaps = timeline->gaps();
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

}  // namespace oomtriage::daemon
