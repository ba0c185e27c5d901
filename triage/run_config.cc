// triage/run_config.cc: the settings that decide a run's peak, taken from the config the run
// printed where today's file says otherwise.
#include "triage/run_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

namespace oomtriage::triage {
namespace {

std::string text(bool value) { return value ? "true" : "false"; }
std::string text(int value) { return std::to_string(value); }
std::string text(const std::string& value) { return "\"" + value + "\""; }
std::string text(const std::vector<int>& value) {
  return fmt::format("[{}]", fmt::join(value, ", "));
}
std::string text(const std::optional<int>& value) {
  return value ? std::to_string(*value) : "unset";
}

// Takes the run's value of one setting when the run showed it and it differs from today's; a
// setting without a `name` follows another and is not said apart.
template <class T>
void take(T& now, const T& run, bool run_shows, const std::string& name,
          std::vector<std::string>& changed) {
  if (!run_shows || now == run) return;
  if (!name.empty()) changed.push_back(fmt::format("{} {} -> {}", name, text(run), text(now)));
  now = run;
}

}  // namespace

RunConfig as_the_run_had_it(const parsers::JobConfig& now, const parsers::JobConfig& printed) {
  using parsers::Knob;
  RunConfig out{now, {}};
  parsers::JobConfig& c = out.config;
  std::vector<std::string>& changed = out.changed;
  take(c.gradient_checkpointing, printed.gradient_checkpointing,
       printed.knows(Knob::kGradientCheckpointing), "train.gradient_checkpointing", changed);
  take(c.batch_size, printed.batch_size, printed.knows(Knob::kBatchSize), "train.batch_size",
       changed);
  take(c.gradient_accumulation, printed.gradient_accumulation,
       printed.knows(Knob::kGradientAccumulation), "train.gradient_accumulation", changed);
  take(c.dtype, printed.dtype, printed.knows(Knob::kDtype), "train.dtype", changed);
  take(c.quantize, printed.quantize, printed.knows(Knob::kQuantize), "model.quantize", changed);
  take(c.qtype, printed.qtype, printed.knows(Knob::kQuantize) && printed.quantize, "model.qtype",
       changed);
  take(c.low_vram, printed.low_vram, printed.knows(Knob::kLowVram), "model.low_vram", changed);
  take(c.disable_sampling, printed.disable_sampling, printed.knows(Knob::kSampling),
       "train.disable_sampling", changed);
  const bool previews = printed.knows(Knob::kPreviewSize);
  take(c.sample.width, printed.sample.width, previews, "sample.width", changed);
  take(c.sample.height, printed.sample.height, previews, "sample.height", changed);
  take(c.sample.max_width, printed.sample.max_width, previews, "", changed);
  take(c.sample.max_height, printed.sample.max_height, previews, "", changed);
  take(c.sample.steps, printed.sample.steps, previews, "sample.sample_steps", changed);
  if (printed.knows(Knob::kResolution) && printed.datasets.size() == c.datasets.size()) {
    for (size_t i = 0; i < c.datasets.size(); ++i) {
      take(c.datasets[i].resolutions, printed.datasets[i].resolutions, true,
           fmt::format("datasets[{}].resolution", i), changed);
      take(c.datasets[i].batch_size, printed.datasets[i].batch_size, true,
           fmt::format("datasets[{}].batch_size", i), changed);
    }
  }
  return out;
}

}  // namespace oomtriage::triage
