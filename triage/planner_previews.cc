// triage/planner_previews.cc: the fixes for an OOM while sampling previews or evaluating:
// cheaper previews (size, steps, frames, batch: how often lowers no peak), skipping AI Toolkit's
// baseline sample, sampling off; and, where the config does not show the preview settings, what to
// check in each trainer's own sampling settings (its row of parsers/trainer_table.h).
#include "triage/planner.h"

#include <algorithm>
#include <cmath>

#include "parsers/trainer_table.h"

namespace oomtriage::triage::detail {

std::string Planner::preview_check() const {
  const std::string_view check = parsers::trainer_row(c_.trainer).preview_check;
  if (!check.empty()) return std::string(check);
  return "lower the preview or validation resolution, steps and count in the trainer's "
         "sampling settings";
}

void Planner::plan_previews(int priority) {
  if (knows(Knob::kSampling) && c_.disable_sampling) return;
  const auto& s = c_.sample;
  if (!knows(Knob::kPreviewSize)) {
    Fix fix = make("cheapen_previews", "Make preview samples cheaper",
                   fmt::format("{}; a cheaper pass fixes it, not gradient checkpointing or the "
                               "batch size",
                               e_.predicted ? "The memory model predicts previews or evaluation "
                                              "run out of memory"
                                            : "The OOM happened while generating previews or "
                                              "evaluating" +
                                                  step_words()),
                   "Lower-quality previews", 0.6);
    fix.check = preview_check();
    add(priority, std::move(fix), unmodelled());
    return;
  }
  Fix fix =
      make("cheapen_previews", "Make preview samples cheaper",
           fmt::format("{}; previews run beside the training state, so a cheaper preview "
                       "fixes it, not the batch size",
                       e_.predicted ? "The memory model predicts the preview samples run "
                                      "out of memory"
                       : e_.step && *e_.step == 0
                           ? "The OOM happened while generating the baseline sample, "
                             "before step 1"
                           : "The OOM happened while generating preview samples" + step_words()),
           "", 0.8);
  double scale = 1.0;
  std::vector<std::string> costs;
  const int side = std::max(s.max_width, s.max_height);
  if (side > 512) {
    const int lower = next_lower_resolution(side);
    const double ratio = double(lower) / side;
    const int w = std::max(256, int(std::lround(s.width * ratio / 64.0)) * 64);
    const int h = std::max(256, int(std::lround(s.height * ratio / 64.0)) * 64);
    change(fix, "sample.width", js(s.width), js(w));
    change(fix, "sample.height", js(s.height), js(h));
    scale *= double(w) * h / (double(s.width) * s.height);
    costs.push_back(fmt::format("previews at {}x{} instead of {}x{}", w, h, s.width, s.height));
  }
  if (s.steps > 20) {
    // Steps cost time, not memory: the seed guide pairs them with the size (docs/domain.md).
    change(fix, "sample.sample_steps", js(s.steps), js(20));
    costs.push_back(fmt::format("{} sampling steps instead of {}", 20, s.steps));
    fix.why += fmt::format(
        "; {} sampling steps instead of {} shorten each preview (time, not "
        "memory), as the seed guide advises",
        20, s.steps);
  }
  if (s.max_frames > 1) {
    const int frames = fewer_frames(s.num_frames);
    if (frames < s.num_frames) {
      change(fix, "sample.num_frames", js(s.num_frames), js(frames));
      scale *= double(frames) / s.num_frames;
      costs.push_back(fmt::format("{}-frame preview videos instead of {}", frames, s.num_frames));
    }
  }
  if (s.batch_size > 1) {
    change(fix, "sample.batch_size", js(s.batch_size), js(std::max(1, s.batch_size / 2)));
    scale *= double(std::max(1, s.batch_size / 2)) / s.batch_size;
    costs.push_back(fmt::format("evaluation batches of {} instead of {}",
                                std::max(1, s.batch_size / 2), s.batch_size));
  }
  if (fix.changes.empty()) return;
  if (s.count > 4) fix.why += fmt::format("; {} prompts also cost time each round", s.count);
  fix.cost = fmt::format("Lower-quality previews: {}", fmt::join(costs, ", "));
  add(priority, std::move(fix),
      Effect{.activations = scale, .what = fmt::format("sampling activations x{:.2f}", scale)});
}

void Planner::plan_skip_first_sample(int priority) {
  if (!ai_toolkit() || !knows(Knob::kSampling) || c_.skip_first_sample || c_.disable_sampling ||
      !e_.step || *e_.step != 0)
    return;
  Fix fix = make("skip_first_sample", "Skip the baseline sample before training",
                 "The OOM happened in the baseline sample that AI Toolkit generates before step 1",
                 "No 'before' previews to compare against; later previews still run", 0.6);
  change(fix, "train.skip_first_sample", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_disable_sampling(int priority) {
  if (!knows(Knob::kSampling) || c_.disable_sampling) return;
  Fix fix = make("disable_sampling", "Turn preview sampling off",
                 e_.predicted ? "Preview sampling is where the memory model predicts the job "
                                "runs out of memory; without previews that pass never runs"
                              : "Preview sampling is where the job ran out of memory; without "
                                "previews that pass never runs",
                 "No previews during training: judge the LoRA from saved checkpoints instead", 0.7);
  change(fix, "train.disable_sampling", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

}  // namespace oomtriage::triage::detail
