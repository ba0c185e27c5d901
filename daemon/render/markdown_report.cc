// daemon/render/markdown_report.cc: the job's story, short, in GitHub-flavoured Markdown.
#include "daemon/render/markdown_report.h"

#include <fmt/format.h>

#include "daemon/common/human_units.h"
#include "parsers/family_names.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

constexpr size_t kTopFixes = 3;
constexpr size_t kMaxQuote = 200;
constexpr size_t kMaxRuns = 10;

// Text that Markdown would otherwise read as emphasis, links, tables or HTML.
std::string md(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    // Not '_': names like crashed_oom are common, and no reader takes an inner '_' for emphasis.
    if (std::string_view("\\`*[]<>|").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A code span cannot hold its own delimiter.
std::string code(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '`') c = '\'';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "`" + out + "`";
}

}  // namespace

std::string render_markdown_report(const ReportView& r) {
  std::string out = fmt::format("## OOM report: {}\n\n", md(r.name));
  out += fmt::format("{} · model {} · **{}** · {}{}\n\n", md(r.trainer),
                     md(parsers::family_label(r.model_family)), md(r.outcome), code(r.log_dir),
                     r.host.empty() ? "" : " · host " + md(r.host));
  const ordered_json* last = nullptr;
  for (const auto& event : r.events) {
    if (!event.value("recovered", false)) last = &event;
  }
  if (last == nullptr) {
    out += "No out-of-memory crash was seen in this job.\n\n";
  } else {
    out +=
        fmt::format("**Run {} ran out of memory: {}.**",
                    r.run_number(integer_of(*last, "run_id").value_or(0)), md(event_title(*last)));
    if (r.completed_since) out += " A later run completed.";
    out += "\n";
    const MemoryAtCrash m = memory_at_crash(*last);
    if (m.capacity > 0) {
      std::string line = fmt::format("{}{} in use, tried {}",
                                     integer_of(*last, "gpu_index")
                                         ? fmt::format("GPU {}: ", *integer_of(*last, "gpu_index"))
                                         : "",
                                     format_bytes(m.in_use), format_bytes(m.tried));
      if (m.free) line += fmt::format(", {} free", format_bytes(*m.free));
      line += fmt::format(" of {}", format_bytes(m.capacity));
      if (m.free && m.tried > *m.free)
        line += fmt::format(" ({} short)", format_bytes(m.tried - *m.free));
      out += line + "\n";
    }
    out += fmt::format("> {}\n\n", md(cut(text_of(*last, "message"), kMaxQuote)));
    for (const auto& [key, what] :
         {std::pair{"phase_evidence", "phase"}, std::pair{"step_evidence", "step"}}) {
      const auto it = last->find(key);
      if (it == last->end() || !it->is_object()) continue;
      out += fmt::format("- {} from the {} at line {}: {}\n", what, md(text_of(*it, "source")),
                         text_of(*it, "line"), code(cut(text_of(*it, "text"), kMaxQuote)));
    }
    out += "\n";
  }

  for (const GpuMemoryView& gpu : r.gpu_memory) {
    std::string line =
        fmt::format("- run {}, GPU {}: {}", gpu.run_number, gpu.gpu, md(gpu_peak_text(gpu)));
    if (gpu.others_peak_bytes > 0) {
      line += fmt::format("; other processes held up to {}", format_bytes(gpu.others_peak_bytes));
    }
    out += line + "\n";
  }
  if (!r.gpu_memory.empty()) out += "\n";

  if (!r.runs.empty()) {
    out += "| Run | Started | Outcome | Crash | Carried fix |\n|---:|---|---|---|---|\n";
    const size_t first = r.runs.size() > kMaxRuns ? r.runs.size() - kMaxRuns : 0;
    for (size_t i = first; i < r.runs.size(); ++i) {
      const RunView& run = r.runs[i];
      std::string crash;
      for (const auto& event : r.events) {
        if (integer_of(event, "run_id") == run.id && !event.value("recovered", false)) {
          crash = event_title(event);
          break;
        }
      }
      std::string carried;
      for (const auto& id : run.carried_fixes) carried += (carried.empty() ? "" : ", ") + code(id);
      if (!carried.empty()) carried += " (" + md(run.carried_result) + ")";
      out += fmt::format("| {} | {} | {} | {} | {} |\n", run.number, run.started_at,
                         md(run.outcome), md(crash), carried);
    }
    out += "\n";
  }

  if (!r.fixes.empty()) {
    out += r.completed_since
               ? "**Fixes for the last incident** (the job completed in a later run)\n\n"
               : "**Fixes, best first**\n\n";
    size_t shown = 0;
    for (const auto& fix : r.fixes) {
      if (!fix.is_object() || shown == kTopFixes) break;
      ++shown;
      out += fmt::format("{}. **{}** ({}): {}\n", shown, md(text_of(fix, "title")),
                         code(text_of(fix, "id")), md(text_of(fix, "why")));
      const auto changes = fix.find("changes");
      if (changes != fix.end() && changes->is_array() && !changes->empty()) {
        out += "   ```diff\n";
        for (const auto& change : *changes) {
          const std::string path = text_of(change, "path");
          if (const auto from = change.find("from"); from != change.end() && !from->is_null()) {
            out += fmt::format("   - {}: {}\n", path, from->dump());
          }
          if (const auto to = change.find("to"); to != change.end() && !to->is_null()) {
            out += fmt::format("   + {}: {}\n", path, to->dump());
          }
        }
        out += "   ```\n";
      }
      out += fmt::format("   cost: {}\n", md(text_of(fix, "cost")));
    }
    if (r.fixes.size() > shown) {
      out += fmt::format("\n_{} more: {}_\n", r.fixes.size() - shown, code(r.report_command));
    }
  }
  return out;
}

}  // namespace oomtriage::daemon
