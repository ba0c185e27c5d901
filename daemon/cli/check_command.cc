// daemon/cli/check_command.cc: reads what `check` was given into a spec, runs the pre-flight
// check and prints it as text or JSON.
#include "daemon/cli/check_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "daemon/common/exit_codes.h"
#include "daemon/render/text_output.h"
#include "parsers/sizes.h"
#include "triage/preflight.h"

namespace oomtriage::daemon {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("{}: cannot be read", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "24GiB", "24 GB", "24": a card's memory. Cards sold as "24 GB" hold 24 GiB, so GB reads as
// GiB here.
Result<uint64_t> card_bytes(const std::string& gpu) {
  if (gpu.find_first_not_of("0123456789.") == std::string::npos && !gpu.empty()) {
    return static_cast<uint64_t>(std::stod(gpu) * kGiB);
  }
  if (const auto bytes = parsers::parse_size(gpu); bytes && *bytes > 0) return *bytes;
  return make_error(ErrorCode::kBadInput,
                    fmt::format("--gpu {}: not a memory size (24GiB, 24, or auto)", gpu));
}

Result<triage::MemorySpec> spec_from_file(const std::string& path) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const std::string text, read_file(path));
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}: not a JSON document", path));
  }
  // A row of the measured-jobs file carries its spec under "spec".
  const nlohmann::json& object = doc.is_object() && doc.contains("spec") ? doc["spec"] : doc;
  return triage::parse_memory_spec(object, path);
}

nlohmann::ordered_json to_json(const triage::Preflight& p) {
  nlohmann::ordered_json phases = nlohmann::ordered_json::array();
  for (const triage::PhaseEstimate& phase : p.estimate.phases) {
    nlohmann::ordered_json terms = nlohmann::ordered_json::object();
    for (const triage::MemoryTerm& term : phase.terms) terms[term.name] = term.bytes;
    phases.push_back({{"phase", parsers::to_string(phase.phase)},
                      {"peak_bytes", phase.peak_bytes},
                      {"terms", terms}});
  }
  const triage::PhaseEstimate& peak = p.estimate.peak();
  nlohmann::ordered_json out;
  out["family"] = p.estimate.family;
  out["peak_bytes"] = peak.peak_bytes;
  out["peak_phase"] = parsers::to_string(peak.phase);
  out["usable_bytes"] = p.usable_bytes;
  out["fits"] = p.verdict.fit != triage::Fit::kWillNotFit;
  out["verdict"] = triage::to_string(p.verdict.fit);
  out["first_failing_phase"] =
      p.verdict.fit == triage::Fit::kWillNotFit
          ? nlohmann::ordered_json(parsers::to_string(p.verdict.first_failing))
          : nlohmann::ordered_json(nullptr);
  out["phases"] = phases;
  out["assumptions"] = p.estimate.assumptions;
  out["fixes"] = nlohmann::ordered_json::array();
  return out;
}

std::string to_text(const triage::Preflight& p) {
  const triage::PhaseEstimate& peak = p.estimate.peak();
  std::string out;
  switch (p.verdict.fit) {
    case triage::Fit::kFits:
      out += fmt::format("fits: peak {} ({}) of {} usable\n", format_bytes(peak.peak_bytes),
                         parsers::to_string(peak.phase), format_bytes(p.usable_bytes));
      break;
    case triage::Fit::kTight:
      out += fmt::format("tight: peak {} ({}) is within 10% of {} usable\n",
                         format_bytes(peak.peak_bytes), parsers::to_string(peak.phase),
                         format_bytes(p.usable_bytes));
      break;
    case triage::Fit::kWillNotFit: {
      const triage::PhaseEstimate* first = p.estimate.phase(p.verdict.first_failing);
      out += fmt::format("will not fit: {} needs {} of {} usable\n",
                         parsers::to_string(p.verdict.first_failing),
                         format_bytes(first ? first->peak_bytes : 0), format_bytes(p.usable_bytes));
      break;
    }
  }
  out += fmt::format("model: {}\n", p.estimate.family);
  for (const triage::PhaseEstimate& phase : p.estimate.phases) {
    out += fmt::format("  {:<24}{:>12}{}\n", parsers::to_string(phase.phase),
                       format_bytes(phase.peak_bytes),
                       phase.peak_bytes > p.usable_bytes ? "  over" : "");
    for (const triage::MemoryTerm& term : phase.terms) {
      out += fmt::format("    {:<22}{:>12}\n", term.name, format_bytes(term.bytes));
    }
  }
  for (const parsers::Phase phase : p.verdict.caching_over) {
    out += fmt::format(
        "warning: {} needs {} as modelled, more than the card: the trainer must run it on the "
        "CPU, with the encoder quantized, or in a pass of its own\n",
        parsers::to_string(phase), format_bytes(p.estimate.phase(phase)->peak_bytes));
  }
  if (!p.estimate.assumptions.empty()) {
    out += "assumed:\n";
    for (const std::string& a : p.estimate.assumptions) out += fmt::format("  - {}\n", a);
  }
  return out;
}

}  // namespace

int run_check(const CheckOptions& options) {
  if (!options.spec) {
    fmt::print(stderr, "oomtriage: check needs --spec FILE.json\n");
    return kExitBadInput;
  }
  auto spec = spec_from_file(*options.spec);
  if (!spec) {
    fmt::print(stderr, "oomtriage: {}\n", spec.error().message);
    return exit_code_for(spec.error());
  }
  if (options.explain) {
    fmt::print("{}\n", triage::to_json(*spec).dump(2));
    return kExitOk;
  }
  auto card = card_bytes(options.gpu == "auto" ? "24GiB" : options.gpu);
  if (!card) {
    fmt::print(stderr, "oomtriage: {}\n", card.error().message);
    return exit_code_for(card.error());
  }
  const triage::Preflight result = triage::preflight_spec(*spec, triage::usable_bytes(*card));
  if (options.json) {
    fmt::print("{}\n", to_json(result).dump(2));
  } else {
    fmt::print("{}", to_text(result));
  }
  return result.verdict.fit == triage::Fit::kWillNotFit ? kExitFatalOom : kExitOk;
}

}  // namespace oomtriage::daemon
