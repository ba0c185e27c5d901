// daemon/render/text_report.cc: the job's story as `report` prints it on a terminal.
#include "daemon/render/text_report.h"

#include <fmt/color.h>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>

#include "daemon/common/human_units.h"
#include "daemon/render/text_output.h"
#include "parsers/family_names.h"

namespace oomtriage::daemon {

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

std::string render_text_report(const ReportView& view, bool c) {
  std::string out;
  const auto bold = [&](const std::string& s) { return paint(c, fmt::emphasis::bold, s); };
  out += fmt::format("{}  {}  {}  model {}\n", bold("job " + view.name), view.trainer, view.outcome,
                     parsers::family_label(view.model_family));
  out += fmt::format("folder {}\n", view.log_dir);
  if (!view.host.empty()) out += fmt::format("host {}\n", view.host);
  if (view.unread_log) {
    out += fmt::format(
        "note: {} was already there when the daemon first started and was read from its "
        "end; `oomtriage scan {}` reads it all\n",
        *view.unread_log, shell_quote(*view.unread_log));
  }
  out += fmt::format("\n{}\n", bold("runs"));
  for (const RunView& run : view.runs) {
    out += fmt::format("  run {}  {}  {}  {}\n", run.number, run.started_at, run.outcome,
                       run.log_path);
    if (!run.attempt.empty()) out += fmt::format("       {}\n", run.attempt);
    if (!run.carried_fixes.empty()) {
      out += fmt::format("       carried {} from the previous crash: {}\n",
                         fmt::join(run.carried_fixes, ", "), run.carried_result);
    }
  }
  if (!view.gpu_memory.empty()) {
    out += fmt::format("\n{}\n", bold("GPU memory (sampled)"));
    for (const GpuMemoryView& gpu : view.gpu_memory) {
      out += fmt::format("  run {}  GPU {}  {}\n", gpu.run_number, gpu.gpu, gpu_peak_text(gpu));
      for (const auto& [phase, peak] : gpu.phase_peaks) {
        out += fmt::format("       {:<24} peak {}\n", phase, format_bytes(peak));
      }
      if (gpu.others_peak_bytes > 0) {
        out += fmt::format("       other processes on GPU {} held up to {}\n", gpu.gpu,
                           format_bytes(gpu.others_peak_bytes));
      }
      for (const triage::GpuGap& gap : gpu.gaps) {
        out += fmt::format(
            "       gap: GPU {} did not answer NVML for {} s from {:%Y-%m-%dT%H:%M:%SZ}"
            " (not sampled)\n",
            gpu.gpu, gap.to - gap.from, fmt::gmtime(static_cast<time_t>(gap.from)));
      }
    }
  }
  out += fmt::format("\n{}\n", bold("config"));
  if (view.snapshots.empty()) out += "  no config file seen\n";
  for (const SnapshotView& s : view.snapshots) {
    out += fmt::format("  snapshot {}  sha256 {}  taken {}  {}\n", s.id, s.sha256.substr(0, 12),
                       s.seen_at, s.path);
    for (size_t at = 0, next; at < s.diff_from_previous.size(); at = next + 1) {
      next = s.diff_from_previous.find('\n', at);
      if (next == std::string::npos) next = s.diff_from_previous.size();
      out += fmt::format("    {}\n", s.diff_from_previous.substr(at, next - at));
    }
  }
  out += fmt::format("\n{}\n", bold(fmt::format("out-of-memory events ({})", view.events.size())));
  int index = 0;
  for (const auto& event : view.events) {
    ++index;
    const auto number = [&event](const char* key) -> std::optional<int64_t> {
      if (!event.contains(key) || !event[key].is_number_integer()) return std::nullopt;
      return event[key].get<int64_t>();
    };
    const std::string step = step_text(number("step"), number("total_steps"));
    out += fmt::format("  {}. {} in {}, {}{}  (run {}, line {}, {})\n", index,
                       event.value("kind", "?"), event.value("phase", "?"), step,
                       event.value("recovered", false) ? " (recovered)" : "",
                       view.run_number(number("run_id").value_or(0)), event["line"].dump(),
                       event.value("stored_at", "?"));
    const MemoryAtCrash m = memory_at_crash(event);
    if (m.capacity > 0) {
      out += fmt::format("     {} used {} + tried {} of {} ({} free)\n",
                         memory_bar(m.capacity, m.in_use, m.tried, 30), format_bytes(m.in_use),
                         format_bytes(m.tried), format_bytes(m.capacity),
                         m.free ? format_bytes(*m.free) : "?");
    }
    std::string message = event.value("message", "");
    if (message.size() > 150) message = message.substr(0, 150) + "…";
    out += fmt::format("     {}\n", message);
    // Why this phase and this step: the line that showed each.
    for (const auto& [key, what] :
         {std::pair{"phase_evidence", "phase"}, std::pair{"step_evidence", "step"}}) {
      if (!event.contains(key) || !event[key].is_object()) continue;
      const auto& evidence = event[key];
      out += fmt::format("     {} from {} at line {}: {}\n", what, evidence.value("source", "?"),
                         evidence.value("line", int64_t{0}), evidence.value("text", ""));
    }
  }
  if (!view.fixes.empty()) {
    out += fmt::format(
        "\n{}\n",
        bold(view.completed_since ? "fixes for the last incident, best first (the job completed "
                                    "in a later run)"
                                  : "fixes for the last incident, best first"));
    for (const auto& fix : view.fixes) {
      if (!fix.is_object()) continue;
      out += fmt::format("  {}. {} [{}]\n", fix.value("rank", 0), fix.value("title", ""),
                         fix.value("id", ""));
      if (fix.contains("target") && fix["target"].is_object() && fix.contains("changes") &&
          !fix["changes"].empty()) {
        const auto& target = fix["target"];
        out +=
            fmt::format("       in {}{}\n", target.value("kind", "?"),
                        target["path"].is_string() ? " " + target["path"].get<std::string>() : "");
      }
      if (fix.contains("changes") && fix["changes"].is_array()) {
        for (const auto& change : fix["changes"]) {
          out += fmt::format("       {}: {} -> {}\n", change.value("path", ""),
                             change["from"].dump(), change["to"].dump());
        }
      }
      if (fix.contains("why") && fix["why"].is_string()) {
        out += fmt::format("       why: {}\n", fix["why"].get<std::string>());
      }
      if (fix.contains("check") && fix["check"].is_string()) {
        out += fmt::format("       check: {}\n", fix["check"].get<std::string>());
      }
      out += fmt::format("       cost: {}\n", fix.value("cost", ""));
    }
  }
  return out;
}

}  // namespace oomtriage::daemon
