// triage/planner_activations.cc: the fixes that shrink what a training step holds beside the
// weights: gradient checkpointing, a smaller batch with more accumulation, the top resolution
// bucket dropped or one resolution lowered, fewer video frames, and control images resized to
// the target's size.
#include "triage/planner.h"

#include <algorithm>

namespace oomtriage::triage::detail {

void Planner::plan_gradient_checkpointing(int priority, int priority_if_unknown) {
  const std::string name = setting("train.gradient_checkpointing", "train.gradient_checkpointing");
  if (!knows(Knob::kGradientCheckpointing)) {
    Fix fix = make("enable_gradient_checkpointing", "Make sure gradient checkpointing is on",
                   fmt::format("Neither the log nor the job's config shows whether gradient "
                               "checkpointing is on, and {}: with it off every activation stays "
                               "in VRAM",
                               ran_out()),
                   "If it was off: steps get roughly 20-30% slower, results are the same", 0.5);
    fix.check = fmt::format("Check whether {} is on; if it is, this fix does nothing", name);
    change(fix, "train.gradient_checkpointing", nullptr, js(true));
    add(priority_if_unknown, std::move(fix), unmodelled());
    return;
  }
  if (c_.gradient_checkpointing) return;
  // "Back on" only where the trainer's default is on (AI Toolkit: docs/domain.md); kohya,
  // diffusers and SimpleTuner leave it off unless asked.
  Fix fix = make(
      "enable_gradient_checkpointing",
      ai_toolkit() ? "Turn gradient checkpointing back on" : "Turn gradient checkpointing on",
      fmt::format("{} is off and {}: without checkpointing every activation stays in VRAM, "
                  "the typical cause of OOMs at step 2-3 or at the first preview. Retry "
                  "with the same batch and resolutions",
                  c_.gradient_checkpointing_explicit || ai_toolkit()
                      ? name
                      : name + " (left out: the trainer's default is off)",
                  ran_out()),
      "Steps get roughly 20-30% slower (activations are recomputed); results are the same", 0.9);
  change(fix, "train.gradient_checkpointing", js(false), js(true));
  add(priority, std::move(fix),
      Effect{.activations = 0.4, .what = "activations x0.40 (checkpointing)"});
}

void Planner::plan_batch(int priority) {
  const std::string batch_name = setting("train.batch_size", "train.batch_size");
  const std::string accumulation_name =
      setting("train.gradient_accumulation", "train." + c_.gradient_accumulation_key);
  if (!knows(Knob::kBatchSize)) {
    Fix fix = make("lower_batch_size", "Halve the batch if it is above 1",
                   fmt::format("Neither the log nor the job's config shows the batch size; {} "
                               "and activations grow with the batch",
                               ran_out("in a training step")),
                   "Same effective batch with doubled accumulation, about the same speed per image",
                   0.45);
    fix.check = fmt::format("Check {}: if it is above 1, halve it and double {}", batch_name,
                            accumulation_name);
    add(priority, std::move(fix), unmodelled());
    return;
  }
  const int batch = c_.effective_batch_size();
  if (batch <= 1) return;
  const int lower = std::max(1, batch / 2);
  const int factor = batch / lower;
  Fix fix = make("lower_batch_size", "Halve the batch and double gradient accumulation",
                 fmt::format("Batch {}{} {}: activations grow with the batch", batch,
                             knows(Knob::kGradientCheckpointing) && c_.gradient_checkpointing
                                 ? " with gradient checkpointing already on"
                                 : "",
                             e_.predicted ? "is predicted to run out of memory"
                                          : "ran out of memory" + step_words()),
                 fmt::format("Same effective batch ({} x {}), about the same speed per image",
                             lower, c_.gradient_accumulation * factor),
                 0.75);
  if (c_.batch_size > 1)
    change(fix, "train.batch_size", js(c_.batch_size), js(std::max(1, c_.batch_size / 2)));
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (const auto b = c_.datasets[i].batch_size; b && *b > 1) {
      change(fix, fmt::format("datasets[{}].batch_size", i), js(*b), js(std::max(1, *b / 2)));
    }
  }
  if (knows(Knob::kGradientAccumulation)) {
    change(fix, "train." + c_.gradient_accumulation_key, js(c_.gradient_accumulation),
           js(c_.gradient_accumulation * factor));
  } else {
    fix.check = fmt::format("The job does not show {}: double it to keep the effective batch",
                            accumulation_name);
  }
  add(priority, std::move(fix),
      Effect{.activations = double(lower) / batch,
             .what = fmt::format("activations x{:.2f} (batch {} -> {})", double(lower) / batch,
                                 batch, lower)});
}

void Planner::plan_top_bucket(int priority) {
  if (!knows(Knob::kResolution)) return;
  const std::vector<int> all = c_.all_resolutions();
  if (all.size() < 2) return;
  const int top = all.back();
  const int next = all[all.size() - 2];
  Fix fix = make("drop_top_bucket", fmt::format("Drop the {} px bucket", top),
                 fmt::format("Resolutions {} are trained as separate datasets drawn at random, so "
                             "the {} px batches arrive at random steps{}",
                             fmt::format("[{}]", fmt::join(all, ", ")), top,
                             e_.step && *e_.step > 5 && !e_.predicted
                                 ? fmt::format(" — this OOM came at step {}, after earlier steps "
                                               "succeeded: an intermittent bucket spike",
                                               *e_.step)
                                 : ""),
                 fmt::format("No training at {} px; re-add it after a stable run", top), 0.75);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    const auto& d = c_.datasets[i];
    if (!d.resolution_is_list || d.resolutions.size() < 2 || d.resolutions.back() != top) continue;
    std::vector<int> kept(d.resolutions.begin(), d.resolutions.end() - 1);
    change(fix, fmt::format("datasets[{}].resolution", i), js(d.resolutions), js(kept));
  }
  if (fix.changes.empty()) return;
  const double scale = double(next) * next / (double(top) * top);
  add(priority, std::move(fix),
      Effect{.activations = scale,
             .what = fmt::format("activations x{:.2f} ({} -> {} px)", scale, top, next)});
}

void Planner::plan_lower_resolution(int priority) {
  if (!knows(Knob::kResolution)) return;
  const std::vector<int> all = c_.all_resolutions();
  if (all.size() != 1 || all[0] <= 512) return;
  const int r = all[0];
  const int lower = next_lower_resolution(r);
  Fix fix = make("lower_resolution", fmt::format("Train at {} px instead of {}", lower, r),
                 fmt::format("The only training resolution is {} px; activations grow with the "
                             "pixel count",
                             r),
                 "Less detail learned at the top resolution", 0.6);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    const auto& d = c_.datasets[i];
    if (d.resolutions.empty()) continue;
    const nlohmann::json from = d.resolution_is_list ? js(d.resolutions) : js(r);
    const nlohmann::json to = d.resolution_is_list ? js(std::vector<int>{lower}) : js(lower);
    change(fix, fmt::format("datasets[{}].resolution", i), from, to);
  }
  const double scale = double(lower) * lower / (double(r) * r);
  add(priority, std::move(fix),
      Effect{.activations = scale, .what = fmt::format("activations x{:.2f}", scale)});
}

void Planner::plan_num_frames(int priority) {
  if (!knows(Knob::kNumFrames)) return;
  const int frames = c_.max_num_frames();
  if (frames <= 1) return;
  const int lower = fewer_frames(frames);
  if (lower >= frames) return;
  Fix fix =
      make("reduce_num_frames", fmt::format("Train on {} frames instead of {}", lower, frames),
           fmt::format("{} is a video model and each sample has {} frames: activations grow "
                       "with the frame count",
                       parsers::to_string(c_.family), frames),
           "Shorter clips: less motion context per sample", 0.75);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (c_.datasets[i].num_frames > 1) {
      change(fix, fmt::format("datasets[{}].num_frames", i), js(c_.datasets[i].num_frames),
             js(fewer_frames(c_.datasets[i].num_frames)));
    }
  }
  add(priority, std::move(fix),
      Effect{.activations = double(lower) / frames,
             .what = fmt::format("activations x{:.2f} ({} -> {} frames)", double(lower) / frames,
                                 frames, lower)});
}

void Planner::plan_match_target_res(int priority) {
  if (!ai_toolkit() || c_.family != ModelFamily::kQwenImageEditPlus || c_.match_target_res ||
      !c_.has_control_images()) {
    return;
  }
  Fix fix = make("match_target_res", "Resize control images to the target's size",
                 "Qwen-Image-Edit-2509/2511 resizes every control image to about 1 MP by default; "
                 "with match_target_res they follow the training resolution",
                 "Control images carry less detail at low resolutions", 0.6);
  change(fix, "model.model_kwargs.match_target_res", js(false), js(true));
  add(priority, std::move(fix),
      Effect{.activations = 0.8, .what = "activations x0.80 (smaller controls, rough)"});
}

}  // namespace oomtriage::triage::detail
