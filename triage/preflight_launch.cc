// triage/preflight_launch.cc: the pre-flight of an image trainer's job that a launcher spreads
// over GPUs (issue 45, command lines): the verdict is one GPU's, as the memory model prices it
// with the launch applied (triage/parallel_memory.h), and the fixes are the job's own, as
// preflight_config() ranks them for one process, each moved by what the launch adds to one GPU
// (DDP's gradient buckets) or takes from it (sharding, offloading) for the job the fix leaves.
#include "triage/preflight.h"

#include <fmt/format.h>

#include <algorithm>

#include "parsers/trainer_dialect.h"
#include "triage/config_edits.h"
#include "triage/memory_pressure.h"
#include "triage/spec_from_config.h"
#include "triage/spec_from_llm.h"

namespace oomtriage::triage {
namespace {

using nlohmann::json;

std::string without_dashes(const std::string& key) {
  return key.rfind("--", 0) == 0 ? key.substr(2) : key;
}

// The neutral path ("train.batch_size", "datasets[0].resolution") of a change the pre-flight
// wrote in the trainer's syntax (triage/native_changes.h): the slot it was read from, else the
// dialect row that writes it; "" when neither says.
std::string neutral_path_of(const ConfigChange& change, const parsers::JobConfig& config) {
  if (config.trainer == parsers::Trainer::kAiToolkit) {
    const std::string prefix = config.process_path.empty() ? "" : config.process_path + ".";
    return change.path.rfind(prefix, 0) == 0 ? change.path.substr(prefix.size()) : "";
  }
  const std::string key = without_dashes(change.path);
  for (const auto& [neutral, slot] : config.slots) {
    if (without_dashes(slot.key) == key && slot.table == change.table) return neutral;
  }
  const std::string dotted = change.table.empty() ? key : change.table + "." + key;
  for (const parsers::DialectRow* row : parsers::dialect_of(config.trainer)) {
    if (row->native != key && row->native != dotted) continue;
    std::string neutral(row->neutral);
    if (const size_t open = neutral.find("[]"); open != std::string::npos) {
      neutral.replace(open, 2, "[0]");
    }
    return neutral;
  }
  return "";
}

// The config a fix leaves, read back from its changes in the trainer's syntax; nullopt when a
// change cannot be read back (the fix is then priced with the launch's share at today's settings).
std::optional<parsers::JobConfig> fixed_config(const parsers::JobConfig& config, const Fix& fix) {
  std::vector<ConfigChange> neutral;
  for (const ConfigChange& change : fix.changes) {
    if (change.kind == parsers::TargetKind::kEnv || change.kind == parsers::TargetKind::kOps) {
      continue;
    }
    const std::string path = neutral_path_of(change, config);
    if (path.empty()) return std::nullopt;
    json value = change.to;
    if (config.trainer != parsers::Trainer::kAiToolkit) {
      const parsers::DialectRow* row = parsers::row_for(config.trainer, path);
      if (row == nullptr) return std::nullopt;
      // A key taken away reads as its codec says (sample_prompts gone: no sampling); a switch
      // taken off the command line is off.
      auto decoded = parsers::decode(row->codec, value);
      if (!decoded && value.is_null()) decoded = parsers::decode(row->codec, json(false));
      if (!decoded) return std::nullopt;
      value = *decoded;
    }
    ConfigChange read_back;
    read_back.path = path;
    read_back.to = value;
    read_back.neutral = true;
    neutral.push_back(std::move(read_back));
  }
  return with_changes(config, neutral);
}

// What the launch adds to one GPU's peak (DDP's gradient buckets) or takes from it (sharding,
// offloading) for the job `config` describes.
double launch_share(const parsers::JobConfig& config, const parsers::DistributedSetup& launch) {
  const MemorySpec one = spec_from_config(config);
  MemorySpec spread = one;
  apply_distributed(spread, launch);
  return static_cast<double>(estimate_memory(spread).peak().peak_bytes) -
         static_cast<double>(estimate_memory(one).peak().peak_bytes);
}

}  // namespace

Preflight preflight_config(const parsers::JobConfig& config,
                           const parsers::DistributedSetup& launch, uint64_t usable_bytes,
                           const MemoryCorrection& correction) {
  const MemorySpec one = spec_from_config(config);
  MemorySpec spread = one;
  apply_distributed(spread, launch);
  // One process, no sharding: the launch changes nothing, so neither may the answer.
  if (to_json(spread) == to_json(one)) return preflight_config(config, usable_bytes, correction);

  const double factor = correction.factor > 0 ? correction.factor : 1.0;
  const double added = launch_share(config, launch) * factor;
  // The one-process job judged against what the launch leaves it, so that it is ranked fixes
  // exactly when the job on each GPU needs them.
  const double left = std::max(0.0, static_cast<double>(usable_bytes) - added);
  const Preflight one_gpu = preflight_config(config, static_cast<uint64_t>(left), correction);

  Preflight out = preflight_spec(spread, usable_bytes, correction);
  if (!one_gpu.verdict.unread.empty()) {  // a value that could not be read decides, as for one
    out.verdict.unread = one_gpu.verdict.unread;
    out.verdict.fit = Fit::kUnknown;
    out.verdict.first_failing = parsers::Phase::kUnknown;
    out.confidence.deciding.clear();
    return out;
  }
  if (out.verdict.fit == Fit::kUnknown || out.verdict.fit == Fit::kFits) return out;
  const uint64_t now = out.estimate.peak().peak_bytes;
  const double room = static_cast<double>(usable_bytes) * kFitMargin;
  for (Fix fix : one_gpu.fixes) {
    if (!fix.predicted_peak_bytes) continue;
    const std::optional<parsers::JobConfig> fixed = fixed_config(config, fix);
    const double share = fixed ? launch_share(*fixed, launch) * factor : added;
    const double peak = std::max(0.0, static_cast<double>(*fix.predicted_peak_bytes) + share);
    if (peak >= static_cast<double>(now)) continue;
    fix.predicted_peak_bytes = static_cast<uint64_t>(peak);
    fix.fits = peak <= room;
    fix.estimate = fmt::format(
        "estimated by the memory model (docs/memory-model.md), per GPU ({} processes): the "
        "run's peak {:.2f} -> {:.2f} GiB with this fix; {} of {:.2f} GiB usable",
        out.estimate.processes, now / double(1ull << 30), peak / double(1ull << 30),
        *fix.fits ? "every phase fits" : "still over", usable_bytes / double(1ull << 30));
    out.fixes.push_back(std::move(fix));
  }
  std::stable_partition(out.fixes.begin(), out.fixes.end(),
                        [](const Fix& fix) { return fix.fits == true; });
  for (size_t i = 0; i < out.fixes.size(); ++i) out.fixes[i].rank = static_cast<int>(i) + 1;
  return out;
}

}  // namespace oomtriage::triage
