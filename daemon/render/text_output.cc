// daemon/render/text_output.cc: the readable scan block. Untrusted log text is shown without escape
// sequences, so a crafted log cannot drive the user's terminal.
#include "daemon/render/text_output.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/color.h>
#include <fmt/format.h>

#include "daemon/common/human_units.h"
#include "triage/fix_codec.h"

namespace oomtriage::daemon {
namespace {

// Drops control bytes (ESC, BEL, ...) and cuts long messages for the terminal.
std::string printable(std::string_view text, size_t limit) {
  std::string out;
  for (char c : text) {
    if (out.size() >= limit) {
      out += "…";
      break;
    }
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte == 0x7f ? ' ' : c);
  }
  return out;
}

std::string figures_text(const parsers::MemoryFigures& f) {
  std::vector<std::string> parts;
  if (f.tried_to_allocate_bytes)
    parts.push_back("tried " + format_bytes(*f.tried_to_allocate_bytes));
  if (f.free_bytes && f.total_capacity_bytes) {
    parts.push_back(fmt::format("{} free of {}", format_bytes(*f.free_bytes),
                                format_bytes(*f.total_capacity_bytes)));
  } else if (f.total_capacity_bytes) {
    parts.push_back("capacity " + format_bytes(*f.total_capacity_bytes));
  } else if (f.free_bytes) {
    parts.push_back(format_bytes(*f.free_bytes) + " free");
  }
  if (f.allocated_by_pytorch_bytes) {
    parts.push_back(format_bytes(*f.allocated_by_pytorch_bytes) + " allocated by PyTorch");
  }
  if (f.reserved_unallocated_bytes) {
    parts.push_back(format_bytes(*f.reserved_unallocated_bytes) + " reserved but unallocated");
  }
  uint64_t others = 0;
  for (const auto& p : f.other_processes) others += p.bytes;
  if (!f.other_processes.empty()) {
    parts.push_back(fmt::format("{} held by {} other process{}", format_bytes(others),
                                f.other_processes.size(),
                                f.other_processes.size() == 1 ? "" : "es"));
  }
  if (f.gpu_index) parts.push_back(fmt::format("GPU {}", *f.gpu_index));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

bool color_enabled(ColorMode mode) {
  if (mode != ColorMode::kAuto) return mode == ColorMode::kAlways;
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) && (no_color == nullptr || *no_color == '\0');
}

std::string paint(bool color, fmt::text_style style, std::string_view text) {
  return color ? fmt::format(style, "{}", text) : std::string(text);
}

std::string render_scan_text(const ScannedLog& log, bool color) {
  using parsers::Outcome;
  const auto& a = log.analysis;
  std::string out;
  const fmt::text_style outcome_style =
      a.outcome == Outcome::kCrashedOom || a.outcome == Outcome::kCrashedOther
          ? fmt::fg(fmt::terminal_color::red) | fmt::emphasis::bold
          : fmt::fg(fmt::terminal_color::green);
  out += fmt::format("{}  {}  {}", paint(color, fmt::emphasis::bold, printable(log.path, 400)),
                     parsers::to_string(a.trainer),
                     paint(color, outcome_style, parsers::to_string(a.outcome)));
  if (log.job) out += fmt::format("  job {}", printable(log.job->name, 200));
  out += "\n";
  if (a.events.empty()) {
    out += "  no out-of-memory incident found\n";
  }
  const std::string where = log.path == "-" ? "<stdin>" : printable(log.path, 300);
  int index = 0;
  for (const auto& event : a.events) {
    ++index;
    const std::string title = fmt::format(
        "OOM {}: {} in {}, {}{}{}", index, parsers::to_string(event.kind),
        parsers::to_string(event.phase), step_text(event.step, event.total_steps),
        event.recovered ? " (recovered)" : "",
        event.revision > 0
            ? fmt::format(" (amended, revision {}: replaces the one above)", event.revision)
            : "");
    const fmt::text_style style =
        event.recovered ? fmt::fg(fmt::terminal_color::yellow) : fmt::fg(fmt::terminal_color::red);
    // path:line, as compilers print it: terminals and editors jump there.
    out += fmt::format("  {}  {}:{}\n", paint(color, style, title), where, event.line);
    if (const std::string figures = figures_text(event.figures); !figures.empty()) {
      out += fmt::format("    {}\n", figures);
    }
    std::string message = event.exception && event.message.rfind(*event.exception, 0) != 0
                              ? *event.exception + ": "
                              : std::string();
    message += event.message;
    out += fmt::format("    {}\n", paint(color, fmt::fg(fmt::terminal_color::bright_black),
                                         printable(message, 160)));
    for (const auto& [evidence, what] :
         {std::pair{&event.phase_evidence, "phase"}, std::pair{&event.step_evidence, "step"}}) {
      if (!*evidence) continue;
      out += fmt::format("    {} from {} at {}:{}: {}\n", what,
                         parsers::to_string((*evidence)->source), where, (*evidence)->line,
                         printable((*evidence)->text, 120));
    }
  }
  out += render_fixes_text(log.fixes, color);
  return out;
}

std::string render_fixes_text(const std::vector<triage::Fix>& fixes, bool color) {
  std::string out;
  if (!fixes.empty()) out += "  fixes, best first:\n";
  for (const auto& fix : fixes) {
    out += fmt::format("  {}. {} [{}]\n", fix.rank, paint(color, fmt::emphasis::bold, fix.title),
                       fix.id);
    const parsers::ConfigTarget target = fix.target();
    if (!fix.changes.empty()) {
      const bool file = target.kind == parsers::TargetKind::kYaml ||
                        target.kind == parsers::TargetKind::kJson ||
                        target.kind == parsers::TargetKind::kToml;
      if (target.kind == parsers::TargetKind::kArgs) {
        out += target.path.empty() ? std::string("       on the trainer's command line\n")
                                   : fmt::format("       on the command line {} shows\n",
                                                 printable(target.path, 200));
      } else {
        out += fmt::format("       in {}{}\n", parsers::to_string(target.kind),
                           !target.path.empty() ? " " + printable(target.path, 200)
                           : file               ? " (the job's config; the log only printed it)"
                                                : "");
      }
    }
    for (const auto& change : fix.changes) {
      if (change.kind == parsers::TargetKind::kArgs) {
        out += fmt::format("       {}\n", printable(argument_line(change), 300));
        continue;
      }
      const std::string where = change.table.empty() ? "" : "[" + change.table + "] ";
      const std::string file = change.kind != target.kind || change.file != target.path
                                   ? fmt::format(" (in {})", printable(change.file, 200))
                                   : "";
      out += fmt::format("       {}{}: {} -> {}{}\n", where, printable(change.path, 200),
                         printable(triage::value_text(change.from), 120),
                         printable(triage::value_text(change.to), 120), file);
    }
    if (!fix.check.empty()) out += fmt::format("       check: {}\n", printable(fix.check, 400));
    out += fmt::format("       why: {}\n", printable(fix.why, 400));
    out += fmt::format("       cost: {}\n", printable(fix.cost, 300));
    // Whether it fits is known only when the card's usable memory is (the crash's figures or
    // the job's GPU); without it the peak stands alone.
    if (fix.predicted_peak_bytes && fix.fits) {
      out += fmt::format("       peak: ~{} ({})\n", format_bytes(*fix.predicted_peak_bytes),
                         *fix.fits ? "fits" : "not enough alone");
    } else if (fix.predicted_peak_bytes) {
      out += fmt::format("       peak: ~{}\n", format_bytes(*fix.predicted_peak_bytes));
    }
  }
  return out;
}

std::string argument_line(const triage::ConfigChange& change) {
  const nlohmann::json& from = change.from;
  const nlohmann::json& to = change.to;
  const auto shown = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : triage::value_text(v);
  };
  if (to.is_null() || to == false) return "- " + change.path;
  if (to == true) return from == true ? "  " + change.path : "+ " + change.path;
  if (from.is_null()) return fmt::format("+ {} {}", change.path, shown(to));
  return fmt::format("  {} {} -> {}", change.path, shown(from), shown(to));
}

}  // namespace oomtriage::daemon
