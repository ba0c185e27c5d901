// daemon/render/preflight_output.cc: the pre-flight's text and JSON. The fixes are drawn by the
// same code as scan's (render_fixes_text(), triage::encode_fix()), so a fix reads the same before a
// job starts as after it crashed.
#include "daemon/render/preflight_output.h"

#include <fmt/color.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "daemon/common/human_units.h"
#include "daemon/render/report_view.h"
#include "daemon/render/text_output.h"
#include "parsers/family_names.h"
#include "triage/fix_codec.h"
#include "triage/fleet_correction.h"

namespace oomtriage::daemon {
namespace {

nlohmann::ordered_json phase_to_json(const triage::PhaseEstimate& phase) {
  nlohmann::ordered_json terms = nlohmann::ordered_json::object();
  for (const triage::MemoryTerm& term : phase.terms) terms[term.name] = term.bytes;
  return {{"phase", parsers::to_string(phase.phase)},
          {"peak_bytes", phase.peak_bytes},
          {"terms", terms}};
}

// ", if the text encoders are cached and gradient checkpointing is on (not stated)": the
// assumptions the verdict turns on, or "".
std::string deciding_text(const triage::Confidence& confidence) {
  const std::vector<std::string>& d = confidence.deciding;
  if (d.empty()) return "";
  std::string joined;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0) joined += i + 1 == d.size() ? " and " : ", ";
    joined += d[i];
  }
  return fmt::format(", if {} (not stated)", joined);
}

std::string verdict_line(const triage::Preflight& p, bool color) {
  const triage::PhaseEstimate& peak = p.estimate.peak();
  const std::string deciding = deciding_text(p.confidence);
  switch (p.verdict.fit) {
    case triage::Fit::kFits:
      return fmt::format("{}: peak {} ({}) of {} usable{}\n",
                         paint(color, fmt::fg(fmt::terminal_color::green), "fits"),
                         format_bytes(peak.peak_bytes), parsers::to_string(peak.phase),
                         format_bytes(p.usable_bytes), deciding);
    case triage::Fit::kTight:
      return fmt::format("{}: peak {} ({}) is within 10% of {} usable{}\n",
                         paint(color, fmt::fg(fmt::terminal_color::yellow), "tight"),
                         format_bytes(peak.peak_bytes), parsers::to_string(peak.phase),
                         format_bytes(p.usable_bytes), deciding);
    case triage::Fit::kUnknown:
      if (!p.confidence.model_known) {
        return fmt::format(
            "{}: {}, so no verdict: name it with --model (a family of docs/memory-model.md: "
            "flux1-dev, sdxl, qwen-image, wan21-t2v-14b, ...) or describe the job with --spec "
            "FILE.json; the phases below price a FLUX-sized stand-in\n",
            paint(color, fmt::fg(fmt::terminal_color::yellow) | fmt::emphasis::bold, "unknown"),
            p.estimate.model_unknown);
      }
      return fmt::format(
          "{}: {} could not be read (below), so no verdict; the phases shown take the default "
          "in its place\n",
          paint(color, fmt::fg(fmt::terminal_color::yellow) | fmt::emphasis::bold, "unknown"),
          fmt::join(p.verdict.unread, ", "));
    case triage::Fit::kWillNotFit: break;
  }
  const triage::PhaseEstimate* first = p.estimate.phase(p.verdict.first_failing);
  return fmt::format(
      "{}: {} needs {} of {} usable (peak {} in {}){}\n",
      paint(color, fmt::fg(fmt::terminal_color::red) | fmt::emphasis::bold, "will not fit"),
      parsers::to_string(p.verdict.first_failing), format_bytes(first ? first->peak_bytes : 0),
      format_bytes(p.usable_bytes), format_bytes(peak.peak_bytes), parsers::to_string(peak.phase),
      deciding);
}

std::string assumptions_text(const std::vector<std::string>& assumptions) {
  if (assumptions.empty()) return "";
  std::string out = "assumed:\n";
  for (const std::string& a : assumptions) out += fmt::format("  - {}\n", a);
  return out;
}

}  // namespace

nlohmann::ordered_json preflight_to_json(const triage::Preflight& p, uint64_t card_bytes,
                                         const std::vector<std::vector<std::string>>& commands) {
  nlohmann::ordered_json phases = nlohmann::ordered_json::array();
  for (const triage::PhaseEstimate& phase : p.estimate.phases)
    phases.push_back(phase_to_json(phase));
  nlohmann::ordered_json fixes = nlohmann::ordered_json::array();
  for (size_t i = 0; i < p.fixes.size(); ++i) {
    nlohmann::ordered_json fix = triage::encode_fix(p.fixes[i]);
    if (i < commands.size() && !commands[i].empty()) fix["command"] = commands[i];
    fixes.push_back(std::move(fix));
  }
  const triage::PhaseEstimate& peak = p.estimate.peak();
  const bool unknown = p.verdict.fit == triage::Fit::kUnknown;
  const bool fits = p.verdict.fit != triage::Fit::kWillNotFit;
  nlohmann::ordered_json out;
  out["family"] = p.estimate.family;
  // One name for each family (issue 45): the ids `jobs --json` and `report --json` use.
  const parsers::FamilyName* family = parsers::find_family(p.estimate.family);
  out["family_id"] = family ? nlohmann::ordered_json(family->id) : nlohmann::ordered_json(nullptr);
  out["family_name"] =
      family ? nlohmann::ordered_json(family->display) : nlohmann::ordered_json(nullptr);
  out["processes"] = p.estimate.processes;  // the phases are one GPU's
  if (!p.estimate.per_gpu.empty()) out["per_gpu"] = p.estimate.per_gpu;
  out["peak_bytes"] = peak.peak_bytes;
  out["peak_phase"] = parsers::to_string(peak.phase);
  out["card_bytes"] = card_bytes;
  out["usable_bytes"] = p.usable_bytes;
  out["fits"] = unknown ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(fits);
  out["verdict"] = triage::to_string(p.verdict.fit);
  if (unknown) out["unread"] = p.verdict.unread;
  out["confidence"] = {{"model_known", p.confidence.model_known},
                       {"model_unknown", p.estimate.model_unknown.empty()
                                             ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(p.estimate.model_unknown)},
                       {"fields_read", p.confidence.fields_read},
                       {"defaults_assumed", p.confidence.defaults_assumed},
                       {"deciding", p.confidence.deciding}};
  out["first_failing_phase"] =
      fits ? nlohmann::ordered_json(nullptr)
           : nlohmann::ordered_json(parsers::to_string(p.verdict.first_failing));
  out["phases"] = std::move(phases);
  nlohmann::ordered_json caching_over = nlohmann::ordered_json::array();
  for (const parsers::Phase phase : p.verdict.caching_over) {
    caching_over.push_back(parsers::to_string(phase));
  }
  out["caching_over"] = std::move(caching_over);
  out["correction"] = {{"factor", p.estimate.correction.factor},
                       {"runs", p.estimate.correction.runs},
                       {"scope", p.estimate.correction.scope}};
  out["assumptions"] = p.estimate.assumptions;
  out["fixes"] = std::move(fixes);
  return out;
}

std::string render_preflight_text(const triage::Preflight& p, uint64_t card_bytes, bool color,
                                  const std::vector<std::vector<std::string>>& commands) {
  std::string out = verdict_line(p, color);
  out += fmt::format("model: {}\n", parsers::architecture_label(p.estimate.family));
  if (!p.estimate.per_gpu.empty()) out += fmt::format("{}\n", p.estimate.per_gpu);
  if (p.estimate.correction.runs > 0) {
    out += fmt::format("{}\n", triage::describe(p.estimate.correction));
  }
  for (const triage::PhaseEstimate& phase : p.estimate.phases) {
    const bool over = phase.peak_bytes > p.usable_bytes;
    out += fmt::format("  {:<24}{:>12}{}\n", parsers::to_string(phase.phase),
                       format_bytes(phase.peak_bytes),
                       over ? paint(color, fmt::fg(fmt::terminal_color::red), "  over") : "");
    for (const triage::MemoryTerm& term : phase.terms) {
      out += fmt::format("    {:<22}{:>12}\n", term.name, format_bytes(term.bytes));
    }
  }
  out += fmt::format("usable: {} of a {} card (less the CUDA context and the allocator's slack)\n",
                     format_bytes(p.usable_bytes), format_bytes(card_bytes));
  for (const parsers::Phase phase : p.verdict.caching_over) {
    out += fmt::format(
        "warning: {} needs {} as modelled, more than the card: the trainer must run it on the "
        "CPU, with the encoder quantized, or in a pass of its own\n",
        parsers::to_string(phase), format_bytes(p.estimate.phase(phase)->peak_bytes));
  }
  out += assumptions_text(p.estimate.assumptions);
  out += render_fixes_text(p.fixes, color);
  if (!p.fixes.empty() && !commands.empty() && !commands.front().empty()) {
    std::string line;
    for (const std::string& word : commands.front()) {
      line += (line.empty() ? "" : " ") + shell_quote(word);
    }
    out += fmt::format("  the command with fix 1 applied:\n    {}\n", line);
  }
  return out;
}

nlohmann::ordered_json explain_to_json(const triage::MemorySpec& spec,
                                       const triage::MemoryEstimate& estimate) {
  nlohmann::ordered_json out;
  out["spec"] = triage::to_json(spec);
  out["family"] = estimate.family;
  out["assumptions"] = estimate.assumptions;
  return out;
}

std::string render_explain_text(const triage::MemorySpec& spec,
                                const triage::MemoryEstimate& estimate) {
  return fmt::format(
      "{}\nmodel: {}\n{}",
      triage::to_json(spec).dump(2, ' ', false, nlohmann::json::error_handler_t::replace),
      estimate.family, assumptions_text(estimate.assumptions));
}

}  // namespace oomtriage::daemon
