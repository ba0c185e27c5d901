// parsers/loss_curve.cc: the training loss a log shows, from bars, counters and metrics dicts.
#include "parsers/loss_curve.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "parsers/line_cleaner.h"
#include "parsers/progress.h"
#include "parsers/step_counters.h"

namespace oomtriage::parsers {
namespace {

// A loss key and its number, as trainers print them (samples in tests/parsers/loss_curve_test.cc):
//   AI Toolkit   "..., 1.40s/it, lr: 1.0e-04 loss: 4.523e-01]"
//   kohya        "..., 1.44it/s, avr_loss=0.123]"
//   diffusers    "..., 1.44it/s, loss=0.0873, lr=0.0001]"
//   SimpleTuner  "..., 1.44it/s, lr=0.0001, step_loss=0.0873]"
//   OneTrainer   "..., 1.44it/s, loss=0.123, smooth loss=0.118]"
//   HF Trainer   "{'loss': 2.3456, 'grad_norm': ...}" and, since 2025, "{'loss': '2.346', ...}"
//   counters     "step 120/1000 | loss 0.12", "iter 100: loss 2.31"
// The key must start a word, so "val_loss", "eval_loss" and "val_avg_loss" are not it.
const RE2& loss_pattern() {
  static const RE2 pattern(
      R"((?i)(?:^|[\s,{\[|(])['"]?(?:avr_|avg_|step_)?loss['"]?\s*[:=]?\s*['"]?)"
      R"(([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)(?:[^\w.]|$))");
  return pattern;
}

bool is_training_bar(const ProgressFrame& frame, const BarClass& bar) {
  if (frame.notebook) return true;
  if (bar.role == BarRole::kTrainingSteps) return true;
  // A per-epoch bar counts global steps in the first epoch only.
  return bar.role == BarRole::kTrainingPerEpoch && bar.first_epoch.value_or(false);
}

// "validation loss: 0.4", "val loss 0.5", "eval loss", "test loss": a loss, not the training one.
bool after_evaluation_word(std::string_view text, const char* number) {
  std::string before(text.substr(0, static_cast<size_t>(number - text.data())));
  for (char& c : before) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t key = before.rfind("loss");
  if (key == std::string::npos) return false;
  std::string_view word(before.data(), key);
  while (!word.empty() && (word.back() == ' ' || word.back() == '\'' || word.back() == '"')) {
    word.remove_suffix(1);
  }
  for (const std::string_view evaluation :
       {"val", "valid", "validation", "eval", "evaluation", "test"}) {
    if (word.ends_with(evaluation)) return true;
  }
  return false;
}

}  // namespace

std::optional<double> loss_in_text(std::string_view text) {
  re2::StringPiece input(text.data(), text.size());
  re2::StringPiece number;
  while (RE2::FindAndConsume(&input, loss_pattern(), &number)) {
    if (after_evaluation_word(text, number.data())) continue;
    const std::string digits(number.data(), number.size());
    char* end = nullptr;
    const double value = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() && std::isfinite(value)) return value;
  }
  return std::nullopt;
}

LossCurveReader::LossCurveReader(std::string job_name, Trainer trainer)
    : job_name_(std::move(job_name)), trainer_(trainer) {}

void LossCurveReader::feed(std::string_view chunk) {
  splitter_.feed(chunk, [this](const Record& record) { on_record(record.text); });
}

void LossCurveReader::finish() {
  splitter_.finish([this](const Record& record) { on_record(record.text); });
}

void LossCurveReader::on_record(std::string_view text) {
  const CleanLine clean = clean_line(text, scratch_);
  if (auto frame = parse_progress_frame(clean.text)) {
    if (!frame->n) return;
    const BarClass bar = classify_bar(frame->desc, job_name_, trainer_);
    if (!is_training_bar(*frame, bar)) return;
    last_step_ = *frame->n;
    // The postfix sits inside the frame's last brackets, after the rate.
    const std::string_view body = clean.text.substr(0, frame->end);
    const size_t open = body.rfind('[');
    if (open == std::string_view::npos) return;
    if (auto loss = loss_in_text(body.substr(open))) points_.push_back({*frame->n, *loss});
    return;
  }
  if (clean.text.find("oss") == std::string_view::npos) return;
  const auto loss = loss_in_text(clean.text);
  if (!loss) return;
  if (auto counter = match_counter(clean.text);
      counter && counter->n &&
      (counter->kind == CounterKind::kGlobal || counter->kind == CounterKind::kBatches ||
       counter->first_epoch().value_or(false))) {
    points_.push_back({*counter->n, *loss});
    return;
  }
  // HF Trainer logs a metrics dict every logging_steps, at the step its bar shows.
  if (clean.text.starts_with("{") && last_step_) points_.push_back({*last_step_, *loss});
}

std::vector<LossPoint> LossCurveReader::points() const {
  std::vector<LossPoint> sorted = points_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const LossPoint& a, const LossPoint& b) { return a.step < b.step; });
  std::vector<LossPoint> out;
  for (const LossPoint& point : sorted) {
    if (!out.empty() && out.back().step == point.step) {
      out.back() = point;  // the later value: a resumed run's
    } else {
      out.push_back(point);
    }
  }
  return out;
}

std::vector<LossPoint> thin_curve(const std::vector<LossPoint>& points, size_t max_points) {
  if (max_points == 0 || points.size() <= max_points) return points;
  std::vector<LossPoint> out;
  out.reserve(max_points);
  for (size_t bucket = 0; bucket < max_points; ++bucket) {
    const size_t begin = bucket * points.size() / max_points;
    const size_t end = (bucket + 1) * points.size() / max_points;
    if (begin == end) continue;
    double steps = 0;
    double losses = 0;
    for (size_t i = begin; i < end; ++i) {
      steps += static_cast<double>(points[i].step);
      losses += points[i].loss;
    }
    const double n = static_cast<double>(end - begin);
    out.push_back({static_cast<int64_t>(std::llround(steps / n)), losses / n});
  }
  return out;
}

}  // namespace oomtriage::parsers
