// parsers/progress.h
//
// Recognises progress-bar frames (tqdm and its relatives) without a regex, because they are most
// of a training log: "my_lora:  17%|█▋   | 500/3000 [12:02<58:09,  1.40s/it, lr: 1.0e-04]",
// "steps:  12% 120/1000 [01:23<10:12,  1.44it/s]" (ncols=0), "0it [00:00, ?it/s]" and the HF
// notebook widget " [ 501/1500 06:35 < 13:11, 1.26 it/s, Epoch 1/3]". classify_bar() says what a
// bar counts (training steps, samples, latents...) from its description.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

struct ProgressFrame {
  std::string_view desc;  // trimmed, without the trailing ':'; empty for undescribed bars
  std::optional<int64_t> n;
  std::optional<int64_t> total;
  size_t end = 0;         // index just past the frame's closing ']'; text after it is glued output
  bool notebook = false;  // the HF notebook widget, which always counts global steps
  // The postfix reports a loss or a learning rate ("loss=0.0911, lr=2e-6", "avr_loss: 0.1"):
  // only a training loop's bar does, whatever its description says.
  bool training_postfix = false;
};

// Whether a bar's postfix ("00:02<00:02, 7.89it/s, loss=1.0172", Rich's "v_num: 0 loss: 2.3")
// names a loss or a learning rate as a key.
bool has_training_postfix(std::string_view postfix);

// What a training bar says about the run besides its count: its rate and its newest loss.
struct BarVitals {
  std::optional<double> steps_per_second;  // "1.40s/it" is 1/1.40; "2.31it/s", "1.26 it/s"
  std::optional<double> loss;  // the first key naming a loss: "loss=0.0911", "avr_loss: 0.1"
};
// Reads them from a frame's text (tqdm's "[12:02<58:09,  1.40s/it, loss=0.1]", Rich's columns,
// the notebook widget's "1.26 it/s"); "?it/s" and a missing or non-finite figure give nullopt.
BarVitals read_bar_vitals(std::string_view frame_text);

// A whole frame, or one cut at the terminal's width after its counter ("steps:  12%|█▏   |
// 120/1000 [01:2"): the counter is still read.
std::optional<ProgressFrame> parse_progress_frame(std::string_view record);

enum class BarRole {
  kOther,             // a bar we cannot place (an undescribed pipeline bar, ...)
  kTrainingSteps,     // counts global training steps: its n is the step
  kTrainingPerEpoch,  // counts batches within an epoch: a global step only in the first epoch
  kEpochs,            // counts epochs (OneTrainer's outer "epoch" bar): n is the epoch index
  kPhase,             // sampling, caching, loading or quantizing: see BarClass::phase
};

struct BarClass {
  BarRole role = BarRole::kOther;
  Phase phase = Phase::kUnknown;
  // The epoch a per-epoch bar names in its description ("Epoch 0", Lightning counts from 0;
  // "Epoch 1/10 - steps" counts from 1), with whether it is the first one.
  std::optional<bool> first_epoch;
  // That epoch's index as printed, and whether a total came with it ("1/10"): an epoch 1 with no
  // total is the first of a run that never showed an epoch 0 (log_analyzer.h first_epoch_of()).
  std::optional<int64_t> epoch;
  bool epoch_has_total = false;
};

inline BarClass bar_class(BarRole role, Phase phase, std::optional<bool> first_epoch = {}) {
  BarClass cls;
  cls.role = role;
  cls.phase = phase;
  cls.first_epoch = first_epoch;
  return cls;
}

// `job_name` is AI Toolkit's job name when known: its training bar is described by it.
// `trainer_guess` is what the log looks like so far; `trainer_rules` false leaves out the rules
// that hold for that trainer only (the leave-one-trainer-out test).
BarClass classify_bar(std::string_view desc, std::string_view job_name, Trainer trainer_guess,
                      bool trainer_rules = true);

Result<Ok> progress_patterns_ok();

}  // namespace oomtriage::parsers
