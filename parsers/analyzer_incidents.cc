// parsers/analyzer_incidents.cc: the signals of one incident grouped into one event (the
// "Error running job:" line, the traceback's last line, a second rank's copy, a doubled tee, a
// trainer's back-off), the allocator message's wrapped lines joined, the phase and step resolved
// by precedence when the incident is reported (settle()) and again when it closes (an
// amendment when the verdict changed), an event the scheduler reported, and the log's outcome.
#include "parsers/log_analyzer.h"

#include <algorithm>
#include <tuple>

#include "parsers/context_patterns.h"
#include "parsers/log_analyzer_internal.h"
#include "parsers/oom_figures.h"
#include "parsers/oom_patterns.h"

namespace oomtriage::parsers {
namespace {

// How far before a signal its traceback may start.
constexpr int64_t kTracebackLookback = 300;
constexpr size_t kMaxMessageBytes = 4096;
constexpr int kMaxContinuationLines = 8;
// How many records after an OOM message a trainer's back-off line still speaks of it.
constexpr int64_t kBackoffReach = 50;

bool is_gpu_family(OomKind kind) {
  return kind == OomKind::kCuda || kind == OomKind::kHip || kind == OomKind::kCublas ||
         kind == OomKind::kCudnn || kind == OomKind::kNccl;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Evidence to_evidence(const auto& clue) { return Evidence{clue.line, clue.source, clue.text}; }

}  // namespace

bool LogAnalyzer::can_merge(const Incident& incident, OomKind kind, const MemoryFigures& figures,
                            std::optional<int> rank) const {
  if (incident.own_incident) return false;
  const OomKind open_kind = incident.event.kind;
  if (open_kind != kind && !(is_gpu_family(open_kind) && is_gpu_family(kind))) return false;
  // Another rank's copy of the same crash prints its own GPU's figures.
  if (rank && !incident.ranks.empty() &&
      std::find(incident.ranks.begin(), incident.ranks.end(), *rank) == incident.ranks.end()) {
    return true;
  }
  // Two different failures may ask for the same size: compare every figure both show.
  const MemoryFigures& mine = incident.event.figures;
  auto differs = [](const auto& a, const auto& b) { return a && b && *a != *b; };
  return !(differs(mine.tried_to_allocate_bytes, figures.tried_to_allocate_bytes) ||
           differs(mine.total_capacity_bytes, figures.total_capacity_bytes) ||
           differs(mine.free_bytes, figures.free_bytes) ||
           differs(mine.allocated_by_pytorch_bytes, figures.allocated_by_pytorch_bytes) ||
           differs(mine.reserved_unallocated_bytes, figures.reserved_unallocated_bytes) ||
           differs(mine.reserved_total_bytes, figures.reserved_total_bytes) ||
           differs(mine.gpu_index, figures.gpu_index));
}

void LogAnalyzer::on_signal(const OomMatch& match, std::string_view line, std::optional<int> rank,
                            uint64_t offset, int64_t line_number) {
  const OomPattern& pattern = *match.pattern;
  std::string_view message = line.substr(match.begin);
  if (message.size() > kMaxMessageBytes) message = message.substr(0, kMaxMessageBytes);
  // Other messages print the size asked for, if anything, and some before their match ("failed
  // to allocate 890.06M (933298432 bytes) from device: HIP_ERROR_OutOfMemory").
  MemoryFigures figures = pattern.allocator_message ? extract_figures(message, match.kind)
                                                    : extract_request_figures(line);
  if (!figures.gpu_index) figures.gpu_index = pattern.gpu_index;
  const auto exception = exception_class(line);

  // The summary printed before the message it counted: the message is the incident.
  if (open_ && open_->from_summary && !pattern.recovered && !open_->reported) open_.reset();
  if (open_ && !pattern.recovered && can_merge(*open_, match.kind, figures, rank)) {
    Incident& incident = *open_;
    incident.last_signal_seq = seq_;
    if (incident.event.kind == OomKind::kCuda && match.kind == OomKind::kHip) {
      incident.event.kind = OomKind::kHip;  // ROCm prints "CUDA error: ..." then hipError...
    }
    if (!incident.event.figures.has_any() && figures.has_any()) {
      incident.event.message.assign(message);
      incident.awaiting_continuation = looks_incomplete(message);
      incident.continuation_lines = 0;
    }
    incident.event.figures.fill_from(figures);
    if (!incident.event.exception && exception) incident.event.exception.emplace(*exception);
    if (incident.signal_phase == Phase::kUnknown) incident.signal_phase = pattern.phase;
    if (rank) incident.ranks.push_back(*rank);
    return;
  }
  // "CUDA out of memory ..." then "attempting to recover from OOM" / "retrying with batch 2":
  // the back-off is the trainer's verdict on the OOM it just printed, one recovered incident.
  if (open_ && pattern.recovered && !open_->own_incident && !open_->event.recovered &&
      seq_ - open_->last_signal_seq <= kBackoffReach &&
      top_level_frame_seq_ < open_->traceback_from_seq) {
    mark_backed_off(*open_, seq_, pattern.phase);
    return;
  }
  // More lines of that back-off ("attempting to recover from OOM", then "OOM in all workers,
  // skipping batch"): the same OOM. A back-off line with no message before it is an OOM of
  // its own (AI Toolkit's "skipping batch 1/3", "2/3").
  if (open_ && pattern.recovered && open_->backed_off && !figures.has_any() &&
      seq_ - open_->last_signal_seq <= kBackoffReach) {
    open_->last_signal_seq = seq_;
    if (open_->signal_phase == Phase::kUnknown) open_->signal_phase = pattern.phase;
    return;
  }
  if (open_) close_incident();

  Incident incident;
  incident.record_offset = current_record_offset_;
  incident.record_line = current_record_line_;
  OomEvent& event = incident.event;
  event.kind = match.kind;
  event.recovered = pattern.recovered;
  event.total_steps = train_total_
                          ? train_total_
                          : (printed_total_steps_ ? printed_total_steps_ : options_.total_steps);
  event.figures = figures;
  event.line = line_number;
  event.offset = offset;
  if (exception) event.exception.emplace(*exception);
  event.message.assign(message);
  incident.first_seq = incident.last_signal_seq = seq_;
  incident.traceback_from_seq = (traceback_seq_ >= 0 && seq_ - traceback_seq_ <= kTracebackLookback)
                                    ? traceback_seq_
                                    : seq_ - kTracebackLookback;
  // Frames printed before the previous incident ended belong to it, not to this one.
  incident.traceback_from_seq = std::max(incident.traceback_from_seq, last_incident_end_seq_ + 1);
  incident.signal_phase = pattern.phase;
  incident.context = context_;
  incident.step = step_;
  // A bar nothing names, unfinished and newer than any stage marker, was running when the
  // error came: the loop it stopped. Its count is a step when nothing better is known.
  if (other_bar_ && seq_ - other_bar_->seq <= kTracebackLookback &&
      (!context_ || context_->seq < other_bar_->seq) && (!step_ || step_->seq < other_bar_->seq)) {
    incident.open_bar = other_bar_;
  }
  if (node_ && seq_ - node_->seq <= kTracebackLookback) incident.node = node_;
  incident.own_incident = pattern.recovered;
  incident.from_summary = &pattern == &memory_summary_pattern();
  incident.awaiting_continuation = pattern.allocator_message && looks_incomplete(message);
  // Python prints a raised OOM as a traceback ending in its exception line; a line that is not
  // that, with no traceback just before it, is a message the traceback follows ("Error running
  // job: CUDA out of memory", logger.exception()). Killed processes print none.
  const bool traceback_ended_here =
      traceback_seq_ > last_incident_end_seq_ && seq_ - traceback_seq_ <= kTracebackLookback;
  if (traceback_ended_here && traceback_offset_ < incident.record_offset) {
    incident.record_offset = traceback_offset_;  // its frames decide the phase: read them again
    incident.record_line = traceback_line_;
  }
  incident.traceback_to_come = !pattern.recovered && match.kind != OomKind::kHostKilled &&
                               match.kind != OomKind::kShm && !is_exception_line(line) &&
                               !traceback_ended_here;
  if (rank) incident.ranks.push_back(*rank);
  watch_ = Watch{seq_, incident.traceback_from_seq, {}};
  open_ = std::move(incident);
}

bool LogAnalyzer::try_continue_message(std::string_view line) {
  Incident& incident = *open_;
  const bool new_record = starts_with(line, "Traceback") || starts_with(line, "File ") ||
                          starts_with(line, "frame #") || starts_with(line, "During handling") ||
                          starts_with(line, "The above exception") || is_exception_line(line) ||
                          line.find("Warning:") != std::string_view::npos ||
                          starts_with(line, "ERROR") || starts_with(line, "WARN") ||
                          starts_with(line, "INFO") || starts_with(line, "DEBUG") ||
                          starts_with(line, "CRITICAL") || starts_with(line, "FATAL") ||
                          (may_mention_oom(line) && match_oom(line));
  if (new_record || incident.continuation_lines >= kMaxContinuationLines ||
      incident.event.message.size() + line.size() > kMaxMessageBytes) {
    incident.awaiting_continuation = false;
    return false;
  }
  incident.event.message.push_back(' ');
  incident.event.message.append(line);
  ++incident.continuation_lines;
  incident.event.figures.fill_from(extract_figures(incident.event.message, incident.event.kind));
  incident.awaiting_continuation = looks_incomplete(incident.event.message);
  return true;
}

// The phase, by precedence (docs/detection.md "Phase precedence"): what the OOM line itself names;
// the traceback's frames that name a stage (the innermost activity wins); a UI node type; a failure
// line after the error; the newest marker, counter or bar before the error; what the traceback's
// entry points and script names suggest; a training bar drawn after the error.
// The step: the newest step evidence before the error (a training bar, a counter, a marker naming
// its step, a save name); else a training bar drawn after the error (tqdm's close() at exit).
OomEvent LogAnalyzer::resolve_incident(const Incident& incident) const {
  OomEvent event = incident.event;
  Phase phase = incident.signal_phase;
  if (phase != Phase::kUnknown) {
    event.phase_evidence =
        Evidence{event.line, EvidenceSource::kMarker, evidence_text(event.message)};
  }
  // The innermost frame that names a stage wins (a sample inside the training loop is sampling,
  // a save inside "_maybe_log_save_evaluate" is saving, a model moved to the device inside a
  // sampler is model loading), with one exception: training-step code runs inside evaluation too
  // (compute_loss under prediction_step), so a training frame wins only when no other stage is
  // named. Frames of the error's own traceback come before later ones.
  auto best_frame = [&](bool strong) -> const Clue* {
    const Clue* best = nullptr;
    auto rank = [&](const Clue& frame) {
      return std::tuple(frame.seq <= incident.last_signal_seq, frame.phase != Phase::kTrainStep,
                        frame.seq);
    };
    for (const Clue& frame : frames_) {
      if (frame.seq < incident.traceback_from_seq || frame.strong != strong ||
          frame.phase == Phase::kUnknown) {
        continue;
      }
      if (!best || rank(frame) > rank(*best)) best = &frame;
    }
    return best;
  };
  // Hints (an entry point, a script's name) that name two stages say nothing: unknown, and no
  // weaker source is asked either.
  auto weak_hints_agree = [&] {
    const Clue* first = nullptr;
    for (const Clue& frame : frames_) {
      if (frame.seq < incident.traceback_from_seq || frame.strong ||
          frame.phase == Phase::kUnknown) {
        continue;
      }
      if (first && first->phase != frame.phase) return false;
      if (!first) first = &frame;
    }
    return true;
  };
  auto clue_of = [](const std::optional<Clue>& clue) { return clue ? &*clue : nullptr; };
  const Clue* const by_precedence[] = {best_frame(true),           clue_of(incident.node),
                                       clue_of(incident.epilogue), clue_of(incident.context),
                                       best_frame(false),          clue_of(incident.after_bar)};
  for (const Clue* clue : by_precedence) {
    if (phase != Phase::kUnknown) break;
    if (clue == by_precedence[4] && clue && !weak_hints_agree()) break;
    if (clue && clue->phase != Phase::kUnknown) {
      phase = clue->phase;
      event.phase_evidence = to_evidence(*clue);
    }
  }
  event.phase = phase;
  const Clue* step =
      incident.step ? &*incident.step : (incident.after_bar ? &*incident.after_bar : nullptr);
  // The open bar counts what the error stopped; only a training step is counted in steps.
  if (!step && incident.open_bar && (phase == Phase::kTrainStep || phase == Phase::kUnknown)) {
    step = &*incident.open_bar;
  }
  if (step && step->step) {
    event.step = step->step;
    event.step_evidence = to_evidence(*step);
  }
  if (!event.figures.gpu_index && gpu_hint_ && gpu_hint_seq_ >= incident.first_seq) {
    event.figures.gpu_index = gpu_hint_;
  }
  return event;
}

void LogAnalyzer::report(Incident& incident) {
  OomEvent event = resolve_incident(incident);
  if (!incident.reported && resumed_event_offset_ == event.offset) {
    // Reported before a restart: the same event, amended from the revision it had.
    event.revision = resumed_event_revision_ + 1;
    resumed_event_offset_.reset();
  } else if (incident.reported) {
    event.revision = incident.reported->revision;
    if (event == *incident.reported) return;
    ++event.revision;
  }
  incident.reported = event;
  events_.push_back(std::move(event));
}

void LogAnalyzer::close_incident() {
  Incident& incident = *open_;
  report(incident);
  last_event_seq_ = incident.first_seq;
  last_incident_end_seq_ = incident.last_signal_seq;
  last_event_recovered_ = incident.reported->recovered;
  open_.reset();
}

void LogAnalyzer::add_reported_event(OomKind kind, std::string message) {
  // The job is over: its last line is whole even without its newline (a killed tqdm bar).
  splitter_.finish([this](const Record& record) { on_record(record); });
  flush_pending_frame();
  if (open_) close_incident();
  OomEvent event;
  event.kind = kind;
  event.message = std::move(message);
  event.line = splitter_.pending_record_line();
  event.offset = splitter_.pending_record_offset();
  event.total_steps = train_total_ ? train_total_ : printed_total_steps_;
  if (context_ && context_->phase != Phase::kUnknown) {
    event.phase = context_->phase;
    event.phase_evidence = to_evidence(*context_);
  }
  if (step_ && step_->step) {
    event.step = step_->step;
    event.step_evidence = to_evidence(*step_);
  } else if (train_n_) {
    event.step = train_n_;
  }
  ++seq_;  // after everything the log said: no bar drawn before it is progress after it
  last_event_seq_ = seq_;
  last_incident_end_seq_ = seq_;
  last_event_recovered_ = false;
  events_.push_back(std::move(event));
}

std::chrono::milliseconds LogAnalyzer::quiet_before_settle(std::chrono::milliseconds settle) const {
  if (!open_) return settle;
  // A traceback begun after the signal and not yet ended by an exception line, or none begun yet
  // after a message that one follows.
  const bool traceback_open = traceback_seq_ > open_->first_seq && traceback_seq_ > crash_seq_;
  const bool traceback_awaited = open_->traceback_to_come && traceback_seq_ < open_->first_seq;
  return traceback_open || traceback_awaited ? std::max(settle, kTracebackWait) : settle;
}

void LogAnalyzer::settle() {
  flush_pending_frame();
  if (!open_) return;
  report(*open_);
  open_->reported_seq = seq_;
}

Outcome LogAnalyzer::decide_outcome(bool had_events) const {
  // An incident reported but still open (settle()) counts as the last event.
  const int64_t last_event_seq = open_ ? open_->first_seq : last_event_seq_;
  const bool last_event_recovered = open_ ? open_->event.recovered : last_event_recovered_;
  const bool progress_after_oom = went_on_seq_ > last_event_seq;
  const bool training_finished =
      train_n_ && train_total_ && *train_total_ > 0 && *train_n_ >= *train_total_;
  if (stop_seq_ >= 0 && stop_seq_ >= crash_seq_ && stop_seq_ >= last_event_seq) {
    return Outcome::kStopped;
  }
  if (had_events && !progress_after_oom && (!last_event_recovered || crash_seq_ > last_event_seq)) {
    return Outcome::kCrashedOom;
  }
  // After a crash, one redraw of a bar (tqdm's close() at exit) is no training going on.
  if (crash_seq_ >= 0 && (crash_seq_ > train_advance_seq_ || advances_after_crash_ < 2) &&
      crash_seq_ > completed_seq_) {
    return Outcome::kCrashedOther;
  }
  if (completed_seq_ >= 0 || training_finished) return Outcome::kCompleted;
  return any_text_ ? Outcome::kRunning : Outcome::kUnknown;
}

Outcome LogAnalyzer::outcome_so_far() const {
  return decide_outcome(open_.has_value() || last_event_seq_ >= 0);
}

}  // namespace oomtriage::parsers
