// parsers/loss_curve.h
//
// The training loss a log shows, step by step, for the HTML report's curve: the loss in a training
// bar's postfix ("my_lora:  17%|█▋ | 500/3000 [12:02<58:09, 1.40s/it, lr: 1.0e-04
// loss: 3.456e-01]", kohya's "avr_loss=0.123", diffusers' "loss=0.0873", SimpleTuner's
// "step_loss=0.0873", OneTrainer's "loss=0.123, smooth loss=0.118"), a counter line that carries
// one ("step 120/1000 | loss 0.12", "iter 100: loss 2.31"), and HF Trainer's "{'loss': 2.3456,
// ...}" dicts at the step its bar showed last. Validation and evaluation losses are not the
// training loss and are left out. A separate pass from the analyzer: only the report pays for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "parsers/record_splitter.h"

namespace oomtriage::parsers {

struct LossPoint {
  int64_t step = 0;
  double loss = 0;
};

// The training loss named in `text` (a bar's postfix, a counter line or a metrics dict): the first
// "loss", "avr_loss", "avg_loss", "step_loss" or "train_loss" key with a finite number.
std::optional<double> loss_in_text(std::string_view text);

class LossCurveReader {
 public:
  // `job_name`: AI Toolkit describes its training bar by the job's name.
  LossCurveReader(std::string job_name, Trainer trainer);

  void feed(std::string_view chunk);
  void finish();

  // One point per step (the last loss shown at it), in step order; a resumed run's later values
  // replace the earlier run's at the same step.
  std::vector<LossPoint> points() const;

 private:
  void on_record(std::string_view text);

  std::string job_name_;
  Trainer trainer_;
  RecordSplitter splitter_;
  std::string scratch_;
  std::optional<int64_t> last_step_;
  std::vector<LossPoint> points_;  // in the order seen
};

// At most `max_points` points, each the mean of a run of neighbours, so that a 100,000-step curve
// stays a small SVG path; fewer points are returned as they are.
std::vector<LossPoint> thin_curve(const std::vector<LossPoint>& points, size_t max_points);

}  // namespace oomtriage::parsers
