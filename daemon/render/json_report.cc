// daemon/render/json_report.cc: the job's story as `report --json` prints it.
#include "daemon/render/json_report.h"

#include "parsers/family_names.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

// The `oomtriage run` attempt that was run `run_id`, if it was one.
const db::HealAttempt* attempt_of(const db::JobStory& story, int64_t run_id) {
  for (const auto& attempt : story.attempts) {
    if (attempt.run_id == run_id) return &attempt;
  }
  return nullptr;
}

ordered_json report_json(const db::JobStory& story, const ReportView& view) {
  ordered_json runs = ordered_json::array();
  for (size_t i = 0; i < story.runs.size(); ++i) {
    const db::RunRow& r = story.runs[i];
    const RunView& run = view.runs[i];
    ordered_json attempt = nullptr;
    if (const db::HealAttempt* a = attempt_of(story, r.id)) {
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
         {"number", run.number},
         {"log_path", r.log_path},
         {"outcome", r.outcome},
         {"started_at", run.started_at},
         {"updated_at", run.updated_at},
         {"snapshot_id", r.snapshot_id ? ordered_json(*r.snapshot_id) : ordered_json(nullptr)},
         {"carried_fixes", run.carried_fixes},
         {"carried_result",
          run.carried_result.empty() ? ordered_json(nullptr) : ordered_json(run.carried_result)},
         {"attempt", attempt}});
  }
  ordered_json snapshots = ordered_json::array();
  for (size_t i = 0; i < story.snapshots.size(); ++i) {
    const db::SnapshotRow& s = story.snapshots[i];
    snapshots.push_back({{"id", s.id},
                         {"path", s.path},
                         {"sha256", s.sha256},
                         {"seen_at", view.snapshots[i].seen_at},
                         {"content", s.content}});
  }
  ordered_json job = {
      {"name", story.job.name},  {"display_name", view.name},         {"folder", story.job.home},
      {"trainer", view.trainer}, {"model_family", view.model_family}, {"outcome", view.outcome},
      {"log_dir", view.log_dir}};
  job["model_family_name"] = parsers::family_display_name(view.model_family);
  if (!view.host.empty()) job["host"] = view.host;
  ordered_json gpu_memory = ordered_json::array();
  for (const GpuMemoryView& gpu : view.gpu_memory) {
    ordered_json phases = ordered_json::object();
    for (const auto& [phase, peak] : gpu.phase_peaks) phases[phase] = peak;
    ordered_json points = ordered_json::array();
    for (const triage::GpuPoint& p : gpu.points) {
      const auto step = [](const std::optional<int64_t>& s) {
        return s ? ordered_json(*s) : ordered_json(nullptr);
      };
      points.push_back({{"at_from", p.at_from},
                        {"at_to", p.at_to},
                        {"step_from", step(p.step_from)},
                        {"step_to", step(p.step_to)},
                        {"phase", parsers::to_string(p.phase)},
                        {"peak_bytes", p.peak_bytes},
                        {"others_bytes", p.others_bytes}});
    }
    ordered_json gaps = ordered_json::array();
    for (const triage::GpuGap& gap : gpu.gaps) gaps.push_back({{"from", gap.from}, {"to", gap.to}});
    gpu_memory.push_back(
        {{"run_id", gpu.run_id},
         {"gpu", gpu.gpu},
         {"total_bytes", gpu.total_bytes},
         {"peak_bytes", gpu.peak_bytes},
         {"peak_phase", gpu.peak_phase},
         {"peak_step", gpu.peak_step ? ordered_json(*gpu.peak_step) : ordered_json(nullptr)},
         {"others_peak_bytes", gpu.others_peak_bytes},
         {"phase_peaks", std::move(phases)},
         {"points", std::move(points)},
         {"gaps", std::move(gaps)}});
  }
  return {{"oomtriage", 1},
          {"job", job},
          {"runs", runs},
          {"snapshots", snapshots},
          {"events", view.events},
          {"fixes", view.fixes},
          {"gpu_memory", gpu_memory}};
}

}  // namespace

std::string render_json_report(const db::JobStory& story, const ReportView& view) {
  return report_json(story, view).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

}  // namespace oomtriage::daemon
