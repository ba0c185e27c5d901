// parsers/analyzer_markers.cc: the evidence newest before now and what a marker of the context
// table does: set the phase and the step, start a run (which forgets the bars and the evidence of
// the one before), count the total steps, say the job crashed, stopped or completed, open a
// traceback, read a printed argument or the GPU's index, vote for a trainer.
#include "parsers/log_analyzer.h"

#include "parsers/context_patterns.h"
#include "parsers/log_analyzer_internal.h"
#include "parsers/oom_patterns.h"

namespace oomtriage::parsers {

void LogAnalyzer::set_context(EvidenceSource source, Phase phase, std::string_view text,
                              int64_t line) {
  if (phase == Phase::kUnknown) {
    context_.reset();  // "Model Loaded": the stage it ended is over, the next one unnamed
    return;
  }
  if (context_ && context_->seq == seq_ && context_->source == source && context_->phase == phase) {
    return;
  }
  if (!context_) context_ = Clue{};
  context_->source = source;
  context_->phase = phase;
  context_->seq = seq_;
  context_->line = line;
  assign_evidence(context_->text, text);
}

void LogAnalyzer::set_step(EvidenceSource source, int64_t step, std::string_view text,
                           int64_t line) {
  if (!step_) step_ = Clue{};
  step_->source = source;
  step_->step = step;
  step_->seq = seq_;
  step_->line = line;
  assign_evidence(step_->text, text);
}

void LogAnalyzer::on_context(const ContextMatch& match, std::string_view text, int64_t line) {
  const ContextPattern& pattern = *match.pattern;
  if (pattern.trainer != Trainer::kUnknown) {
    ++trainer_votes_[static_cast<size_t>(pattern.trainer)];
  }
  switch (pattern.effect) {
    case MarkerEffect::kNone: break;
    case MarkerEffect::kPhase:
      set_context(EvidenceSource::kMarker, pattern.phase, text, line);
      if (match.n) set_step(EvidenceSource::kMarker, *match.n, text, line);
      break;
    case MarkerEffect::kBaselineSample:
      set_context(EvidenceSource::kMarker, Phase::kSampling, text, line);
      set_step(EvidenceSource::kMarker, resume_step_.value_or(0), text, line);
      break;
    case MarkerEffect::kResumeStep: resume_step_ = match.n; break;
    case MarkerEffect::kRunStart:
      if (open_) close_incident();
      run_start_seq_ = seq_;
      attempt_step_ = step_;
      watch_.reset();
      if (!match.job.empty() && options_.job_name.empty()) job_name_.assign(match.job);
      bars_.clear();
      train_n_.reset();
      train_bar_id_ = -1;
      train_vitals_ = {};
      first_epoch_.reset();
      saw_epoch_zero_ = false;
      other_bar_.reset();
      finished_epoch_total_ = -1;
      step_.reset();
      node_.reset();
      crash_seq_ = stop_seq_ = completed_seq_ = -1;
      set_context(EvidenceSource::kMarker, pattern.phase, text, line);
      break;
    case MarkerEffect::kTotalSteps: printed_total_steps_ = match.n; break;
    case MarkerEffect::kCrash:
      crash_seq_ = seq_;
      advances_after_crash_ = 0;
      break;
    case MarkerEffect::kStop: stop_seq_ = seq_; break;
    case MarkerEffect::kCompleted: completed_seq_ = seq_; break;
    case MarkerEffect::kTracebackHeader:
      traceback_seq_ = seq_;
      traceback_offset_ = current_record_offset_;
      traceback_line_ = current_record_line_;
      break;
    case MarkerEffect::kArgBatchSize:
      if (match.n && *match.n > 0 && *match.n < 100000) arguments_.batch_size = int(*match.n);
      break;
    case MarkerEffect::kArgGradientAccumulation:
      if (match.n && *match.n > 0 && *match.n < 100000) {
        arguments_.gradient_accumulation = int(*match.n);
      }
      break;
    case MarkerEffect::kArgResolution:
      if (match.n && *match.n >= 64 && *match.n < 100000) arguments_.resolution = int(*match.n);
      break;
    case MarkerEffect::kBatchSizeAdjusted:
      if (match.n && arguments_.batch_size && *match.n < *arguments_.batch_size) {
        static const OomPattern kSilentRetry{.name = "batch-size-adjusted",
                                             .kind = OomKind::kCuda,
                                             .regex = {},
                                             .also = {},
                                             .veto = {},
                                             .recovered = true,
                                             .phase = Phase::kTrainStep,
                                             .allocator_message = false,
                                             .gpu_index = std::nullopt,
                                             .samples = {}};
        // The banner reprints after the retry: the attempt before it is what ran out of memory.
        step_ = attempt_step_;
        on_signal(OomMatch{&kSilentRetry, OomKind::kCuda, 0}, text, std::nullopt,
                  current_record_offset_, line);
      }
      break;
    case MarkerEffect::kArgGradientCheckpointing:
      arguments_.gradient_checkpointing = match.flag == "True";
      break;
    case MarkerEffect::kGpuIndex:
      if (match.n && *match.n < 4096) {
        gpu_hint_ = static_cast<int>(*match.n);
        gpu_hint_seq_ = seq_;
      }
      break;
  }
}

}  // namespace oomtriage::parsers
