// triage/preflight.cc: the estimate, the verdict and the fixes of a pre-flight check. The fixes
// come from the same ranking as a crash's (triage/triage_job.h): the memory pressure of the first
// phase over the usable memory, as the model predicts it (triage/memory_pressure.h
// pressure_of_prediction()).
#include "triage/preflight.h"

#include <fmt/format.h>

#include <algorithm>

#include "triage/architectures.h"
#include "triage/memory_pressure.h"
#include "triage/spec_from_config.h"
#include "triage/triage_job.h"

namespace oomtriage::triage {
namespace {

// An unstated field, the value the model assumes for it put another common way, and the
// assumption in words. Each is a default that trainers or users commonly change, in either
// direction: the verdict should say when it rests on one.
struct Alternative {
  std::string_view field;
  std::string_view assumed;  // "the text encoders are cached"
  void (*other)(MemorySpec&);
};

const Alternative kAlternatives[] = {
    {"text_encoder_cached", "the text encoders are cached",
     [](MemorySpec& s) { s.text_encoder_cached = false; }},
    {"gradient_checkpointing", "gradient checkpointing is on",
     [](MemorySpec& s) { s.gradient_checkpointing = false; }},
    {"training_type", "it trains a LoRA", [](MemorySpec& s) { s.training_type = "full"; }},
    {"dtype", "it trains in bf16", [](MemorySpec& s) { s.dtype = "fp32"; }},
    {"quantization", "the weights are not quantized",
     [](MemorySpec& s) { s.quantization = "fp8"; }},
    {"sampling", "it previews at the training size",
     [](MemorySpec& s) { s.sampling = SamplingSpec{.enabled = false}; }},
};

bool runs_out(Fit fit) { return fit == Fit::kWillNotFit; }

// A fix that edits the job's config file or, for a job read from its command line, its flags
// (issue 45); the environment and an operator's actions are not a pre-flight's to propose.
bool edits_the_job(const Fix& fix) {
  return fix.changes_config() ||
         std::any_of(fix.changes.begin(), fix.changes.end(), [](const ConfigChange& change) {
           return change.kind == parsers::TargetKind::kArgs;
         });
}

Confidence confidence_of(const MemorySpec& spec, const MemoryEstimate& estimate,
                         const FitVerdict& verdict, uint64_t usable,
                         const MemoryCorrection& correction) {
  Confidence c;
  c.model_known = estimate.model_unknown.empty();
  const bool video = architecture_for(spec.model_family, nullptr).frames_per_token > 0;
  const bool adapter = !spec.training_type || *spec.training_type == "lora" ||
                       *spec.training_type == "lokr" || *spec.training_type == "loha";
  const nlohmann::ordered_json fields = to_json(spec);
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    const std::string& field = it.key();
    const nlohmann::ordered_json& value = it.value();
    // The model's name is model_known; frames and a rank mean nothing to an image model or a
    // full fine-tune.
    if (field == "model_family" || (field == "frames" && !video) ||
        (field == "lora_rank" && !adapter)) {
      continue;
    }
    (value.is_null() ? c.defaults_assumed : c.fields_read).push_back(field);
  }
  if (verdict.fit == Fit::kUnknown) return c;
  const auto unstated = [&](std::string_view field) {
    return std::find(c.defaults_assumed.begin(), c.defaults_assumed.end(), field) !=
           c.defaults_assumed.end();
  };
  for (const Alternative& alternative : kAlternatives) {
    if (!unstated(alternative.field)) continue;
    MemorySpec other = spec;
    alternative.other(other);
    const FitVerdict flipped = judge(estimate_memory(other, correction), usable);
    if (runs_out(flipped.fit) != runs_out(verdict.fit)) {
      c.deciding.emplace_back(alternative.assumed);
    }
  }
  return c;
}

}  // namespace

Preflight preflight_spec(const MemorySpec& spec, uint64_t usable_bytes,
                         const MemoryCorrection& correction) {
  Preflight out;
  out.spec = spec;
  out.estimate = estimate_memory(spec, correction);
  out.usable_bytes = usable_bytes;
  out.verdict = judge(out.estimate, usable_bytes);
  out.confidence = confidence_of(spec, out.estimate, out.verdict, usable_bytes, correction);
  return out;
}

Preflight preflight_config(const parsers::JobConfig& config, uint64_t usable_bytes,
                           const MemoryCorrection& correction) {
  Preflight out = preflight_spec(spec_from_config(config), usable_bytes, correction);
  // A value the job sets but that could not be read would be replaced by its default: a batch
  // of 10^12 judged as a batch of 1 "fits". Every knob but the two that do not move the peak
  // decides the verdict.
  for (size_t k = 0; k < parsers::kKnobCount; ++k) {
    const auto knob = static_cast<parsers::Knob>(k);
    if (!config.unread.test(k) || knob == parsers::Knob::kNumWorkers ||
        knob == parsers::Knob::kGradientAccumulation) {
      continue;
    }
    out.verdict.unread.emplace_back(parsers::to_string(knob));
  }
  if (!out.verdict.unread.empty()) {
    out.verdict.fit = Fit::kUnknown;
    out.verdict.first_failing = parsers::Phase::kUnknown;
    out.confidence.deciding.clear();
    return out;
  }
  if (out.verdict.fit == Fit::kUnknown) return out;  // the model is not known
  if (out.verdict.fit == Fit::kFits) return out;
  // Priced without the fleet's factor, as a crash's fixes are; the card is scaled instead.
  const MemoryEstimate plain = estimate_memory(out.spec);
  const PhaseEstimate* at =
      out.verdict.fit == Fit::kWillNotFit ? plain.phase(out.verdict.first_failing) : &plain.peak();
  if (at == nullptr) return out;
  const double factor = correction.factor > 0 ? correction.factor : 1.0;
  const MemoryPressure pressure = pressure_of_prediction(config, *at, usable_bytes, factor);
  const JobView job{&config, "", nullptr};
  const uint64_t now = out.estimate.peak().peak_bytes;
  for (Fix& fix : triage_pressure(pressure, config.trainer, {}, job, {})) {
    if (!fix.predicted_peak_bytes || !edits_the_job(fix)) continue;
    const uint64_t peak = static_cast<uint64_t>(*fix.predicted_peak_bytes * factor);
    if (peak >= now) continue;  // not a lever for this job's memory
    fix.predicted_peak_bytes = peak;
    fix.estimate = fmt::format(
        "estimated by the memory model (docs/memory-model.md): the run's peak {:.2f} -> {:.2f} "
        "GiB with this fix; {} of {:.2f} GiB usable",
        now / double(1ull << 30), peak / double(1ull << 30),
        fix.fits == true ? "every phase fits" : "still over", usable_bytes / double(1ull << 30));
    out.fixes.push_back(std::move(fix));
  }
  // Those that make every phase fit first, each group in the ranking's order (cost).
  std::stable_partition(out.fixes.begin(), out.fixes.end(),
                        [](const Fix& fix) { return fix.fits == true; });
  for (size_t i = 0; i < out.fixes.size(); ++i) out.fixes[i].rank = static_cast<int>(i) + 1;
  return out;
}

}  // namespace oomtriage::triage
