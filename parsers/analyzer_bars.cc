// parsers/analyzer_bars.cc: progress bars as objects. A frame finds its bar (its description and
// total), which is classified once (training steps, steps of an epoch, epochs, a phase, other):
// the training bar gives the step and the phase, an epoch bar which epoch it is and whether the
// run completed. A step counter printed outside tqdm is a bar of its own. After a signal every
// bar is watched: one that rises twice says training went on (watch_bar).
#include "parsers/log_analyzer.h"

#include <algorithm>

#include "parsers/log_analyzer_internal.h"
#include "parsers/progress.h"
#include "parsers/step_counters.h"

namespace oomtriage::parsers {
namespace {

constexpr size_t kMaxBars = 32;

}  // namespace

void LogAnalyzer::on_frame(const ProgressFrame& frame, std::string_view text, int64_t line) {
  const int64_t total = frame.total.value_or(-1);
  auto bar = std::find_if(bars_.begin(), bars_.end(),
                          [&](const Bar& b) { return b.total == total && b.desc == frame.desc; });
  const std::optional<int64_t> previous_n = bar != bars_.end() ? bar->n : std::nullopt;
  const bool seen_before_signal = bar != bars_.end() && watch_ && bar->seq < watch_->from_seq;
  if (bar == bars_.end()) {
    if (bars_.size() >= kMaxBars) {
      bars_.erase(std::min_element(bars_.begin(), bars_.end(),
                                   [](const Bar& x, const Bar& y) { return x.seq < y.seq; }));
    }
    Bar added;
    added.desc.assign(frame.desc);
    added.total = total;
    added.id = next_bar_id_++;
    bars_.push_back(std::move(added));
    bar = bars_.end() - 1;
  }
  bar->n = frame.n;
  bar->seq = seq_;
  // A bar is classified once, again only when the log's trainer looks different.
  const Trainer guess = trainer_guess();
  if (!bar->classified || bar->classified_for != guess) {
    bar->cls = classify_bar(frame.desc, job_name_, guess, rules_on(guess));
    bar->classified = true;
    bar->classified_for = guess;
  }
  BarClass cls = bar->cls;
  if (frame.notebook) {
    cls = bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
  } else if (frame.desc.empty()) {
    // A bar without a description whose total is the printed number of training steps is the
    // training bar (HF Trainer's, and any loop over range(max_train_steps)).
    if (cls.role == BarRole::kOther && frame.total && printed_total_steps_ &&
        *frame.total == *printed_total_steps_) {
      cls = bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
    }
    // HF Trainer's eval bar has no description either; its total differs from the training one.
    if (cls.role == BarRole::kTrainingSteps && train_total_ && frame.total &&
        *frame.total != *train_total_ &&
        !(printed_total_steps_ && *frame.total == *printed_total_steps_)) {
      cls = bar_class(BarRole::kPhase, Phase::kSampling);
    }
  }
  // A bar that reports a loss or a learning rate counts training steps, whatever it is called
  // (a home-made loop's bar is named after the job, or not at all).
  if (frame.training_postfix) bar->reports_loss = true;
  if (cls.role == BarRole::kOther && bar->reports_loss) {
    cls = bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
  }
  const int bar_id = bar->id;

  bool step_evidence = false;
  switch (cls.role) {
    case BarRole::kTrainingSteps:
      // A training bar that ran to its total and starts again, or a new one with the same
      // total, counts the batches of an epoch: the one after the first, so no global step.
      if (frame.n && total > 0 &&
          ((previous_n && *previous_n >= total && *frame.n < *previous_n) ||
           (!previous_n && finished_epoch_total_ == total && *frame.n < total))) {
        bar->cls = cls = bar_class(BarRole::kTrainingPerEpoch, Phase::kTrainStep, false);
        first_epoch_ = false;
        step_.reset();
        break;
      }
      if (frame.n && total > 0 && *frame.n >= total) finished_epoch_total_ = total;
      if (frame.n && (!train_n_ || *frame.n > *train_n_)) train_advance_seq_ = seq_;
      if (frame.n) train_n_ = frame.n;
      if (frame.total) train_total_ = frame.total;
      train_bar_id_ = bar_id;
      take_vitals(read_bar_vitals(text));
      set_context(EvidenceSource::kBar, Phase::kTrainStep, text, line);
      step_evidence = frame.n.has_value();
      break;
    case BarRole::kTrainingPerEpoch:
      if (cls.epoch) {
        first_epoch_ = first_epoch_of(*cls.epoch, cls.epoch_has_total);
      } else if (cls.first_epoch) {
        first_epoch_ = cls.first_epoch;
      }
      if (frame.n && previous_n != frame.n) train_advance_seq_ = seq_;
      take_vitals(read_bar_vitals(text));
      set_context(EvidenceSource::kBar, Phase::kTrainStep, text, line);
      // Batches of the first epoch are global steps; later epochs' are not.
      step_evidence = frame.n && first_epoch_ == true;
      break;
    case BarRole::kEpochs:
      if (frame.n) {
        if (*frame.n == 0) saw_epoch_zero_ = true;
        first_epoch_ = *frame.n == 0;
      }
      // Every epoch done: the run finished (OneTrainer's outer bar at 2/2).
      if (frame.n && frame.total && *frame.total > 0 && *frame.n >= *frame.total) {
        completed_seq_ = seq_;
      }
      break;
    case BarRole::kPhase: set_context(EvidenceSource::kBar, cls.phase, text, line); break;
    case BarRole::kOther: break;
  }
  // A training counter we cannot read as a global step supersedes older evidence.
  if (cls.role == BarRole::kTrainingPerEpoch && frame.n && !step_evidence) step_.reset();
  if (step_evidence) {
    set_step(EvidenceSource::kBar, *frame.n, text, line);
    if (open_ && seq_ > open_->first_seq &&
        (!open_->after_bar || open_->after_bar->phase == Phase::kUnknown)) {
      open_->after_bar =
          Clue{EvidenceSource::kBar, Phase::kTrainStep, frame.n, seq_, line, evidence_text(text)};
    }
  } else if (cls.role == BarRole::kOther && frame.n && frame.total && !open_ &&
             *frame.n < *frame.total) {
    other_bar_ =
        Clue{EvidenceSource::kBar, Phase::kUnknown, frame.n, seq_, line, evidence_text(text)};
  } else if (cls.role == BarRole::kOther && frame.n && frame.total && open_ &&
             seq_ > open_->first_seq && !open_->after_bar) {
    // A bar nothing names, redrawn after the error as tqdm's close() does while the exception
    // unwinds its loop: the loop the error stopped in. Its count is the step when nothing before
    // the error gave one; it names no phase.
    open_->after_bar =
        Clue{EvidenceSource::kBar, Phase::kUnknown, frame.n, seq_, line, evidence_text(text)};
  }
  // A step in the bar's postfix: "..., global_step=500, loss=0.1]", "gs=1500", "num_updates=1".
  if (const size_t bracket = text.rfind('[');
      bracket != std::string_view::npos &&
      (text.find("step", bracket) != std::string_view::npos ||
       text.find("gs=", bracket) != std::string_view::npos ||
       text.find("num_updates", bracket) != std::string_view::npos)) {
    if (auto counter = match_counter(text.substr(bracket));
        counter && counter->kind == CounterKind::kGlobal && counter->n) {
      set_step(EvidenceSource::kCounter, *counter->n, text, line);
    }
  }
  if (cls.role == BarRole::kTrainingSteps || cls.role == BarRole::kTrainingPerEpoch) {
    if (train_advance_seq_ == seq_ && crash_seq_ >= 0 && seq_ > crash_seq_) ++advances_after_crash_;
    // A run started after the last OOM trains on: the log's story goes on, that OOM stays fatal.
    if (train_advance_seq_ == seq_ && last_event_seq_ >= 0 && run_start_seq_ > last_event_seq_) {
      went_on_seq_ = seq_;
    }
    watch_bar(bar_id, previous_n, seen_before_signal, frame.n);
  }
}

void LogAnalyzer::on_counter(const StepCounter& counter, std::string_view text, int64_t line) {
  switch (counter.kind) {
    case CounterKind::kGlobal:
    case CounterKind::kPerEpoch:
    case CounterKind::kBatches: {
      if (counter.epoch) first_epoch_ = first_epoch_of(*counter.epoch, counter.epoch_has_total);
      set_context(EvidenceSource::kCounter, Phase::kTrainStep, text, line);
      if (!counter.n) break;
      if (counter.kind == CounterKind::kGlobal || first_epoch_ == true ||
          (counter.kind == CounterKind::kBatches && !first_epoch_)) {
        set_step(EvidenceSource::kCounter, *counter.n, text, line);
      } else {
        step_.reset();  // a newer counter that names no global step
      }
      // A printed counter is a bar of its own for "did training go on".
      const std::string_view name = counter.kind == CounterKind::kGlobal ? "\x1e"
                                                                           "counter"
                                                                         : "\x1e"
                                                                           "epoch counter";
      auto bar = std::find_if(bars_.begin(), bars_.end(),
                              [&](const Bar& b) { return b.total == -1 && b.desc == name; });
      std::optional<int64_t> previous_n;
      bool seen_before = false;
      if (bar != bars_.end()) {
        previous_n = bar->n;
        seen_before = watch_ && bar->seq < watch_->from_seq;
      } else {
        Bar added;
        added.desc.assign(name);
        added.id = next_bar_id_++;
        bars_.push_back(std::move(added));
        bar = bars_.end() - 1;
      }
      bar->n = counter.n;
      bar->seq = seq_;
      const int bar_id = bar->id;
      if (!previous_n || *counter.n > *previous_n) train_advance_seq_ = seq_;
      if (counter.kind == CounterKind::kGlobal && counter.total && *counter.total > 0 &&
          *counter.n >= *counter.total) {
        completed_seq_ = seq_;  // "step 5000/5000": the run did every step
      }
      watch_bar(bar_id, previous_n, seen_before, counter.n);
      break;
    }
    case CounterKind::kEpoch:
      if (counter.epoch) first_epoch_ = first_epoch_of(*counter.epoch, counter.epoch_has_total);
      break;
    case CounterKind::kSaveName:
      if (counter.n) {
        set_step(EvidenceSource::kSaveName, *counter.n, text, line);
        last_saved_step_ = *counter.n;
      }
      break;
  }
}

bool LogAnalyzer::first_epoch_of(int64_t epoch, bool has_total) {
  if (epoch == 0) saw_epoch_zero_ = true;
  return epoch == 0 || (epoch == 1 && (has_total || !saw_epoch_zero_));
}

void LogAnalyzer::watch_bar(int bar_id, std::optional<int64_t> previous_n, bool seen_before,
                            std::optional<int64_t> n) {
  if (!watch_ || !n || seq_ <= watch_->from_seq) return;
  auto it = std::find_if(watch_->baselines.begin(), watch_->baselines.end(),
                         [&](const Watch::Baseline& b) { return b.bar_id == bar_id; });
  if (it == watch_->baselines.end()) {
    watch_->baselines.push_back({bar_id, seen_before && previous_n ? *previous_n : *n, 0});
    it = watch_->baselines.end() - 1;
  }
  if (*n > it->n) {
    ++it->rises;
    it->n = *n;
  }
  if (it->rises < 2) return;
  // An uncaught traceback reached the top level: the process died, and what it still prints is
  // output buffered before (stdout flushed at exit). Nothing after it is training going on.
  if (top_level_frame_seq_ >= watch_->traceback_from_seq) {
    watch_.reset();
    return;
  }
  // The same bar moved on twice: the process survived the signal and training went on.
  went_on_seq_ = seq_;
  watch_.reset();
  if (open_) {
    open_->event.recovered = true;
    close_incident();
  }
}

void LogAnalyzer::take_vitals(const BarVitals& vitals) {
  if (vitals.steps_per_second) train_vitals_.steps_per_second = vitals.steps_per_second;
  if (vitals.loss) train_vitals_.loss = vitals.loss;
}

LogAnalyzer::Live LogAnalyzer::live() const {
  Live live;
  live.step = train_n_;
  live.total = train_total_ ? train_total_ : printed_total_steps_;
  live.vitals = train_vitals_;
  live.phase = current_phase();
  if (!has_pending_frame_) return live;
  // The newest frame of a bar waits unparsed until something else is printed: while training
  // runs that is every frame, so it is read here (without touching the analyzer's state).
  const auto frame = parse_progress_frame(pending_frame_);
  if (!frame) return live;
  const int64_t total = frame->total.value_or(-1);
  const auto bar = std::find_if(bars_.begin(), bars_.end(), [&](const Bar& b) {
    return b.total == total && b.desc == frame->desc;
  });
  if (bar != bars_.end() && bar->id == train_bar_id_) {
    if (frame->n) live.step = frame->n;
    const BarVitals vitals = read_bar_vitals(pending_frame_.substr(0, frame->end));
    if (vitals.steps_per_second) live.vitals.steps_per_second = vitals.steps_per_second;
    if (vitals.loss) live.vitals.loss = vitals.loss;
    live.phase = Phase::kTrainStep;
    return live;
  }
  // Another bar (a new one is classified as on_frame() will): a phase bar says the phase.
  const Trainer guess = trainer_guess();
  const BarClass cls = bar != bars_.end() && bar->classified
                           ? bar->cls
                           : classify_bar(frame->desc, job_name_, guess, rules_on(guess));
  if (cls.role == BarRole::kPhase) live.phase = cls.phase;
  return live;
}

}  // namespace oomtriage::parsers
