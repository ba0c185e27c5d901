// parsers/log_analyzer.h
//
// The streaming analyzer: bytes in (chunks of any size), OomEvents and the log's outcome out.
// `oomtriage scan` feeds it a file; the daemon feeds it what each file grows by. It splits records
// (record_splitter.h), follows the training bar and the phase markers (progress.h,
// context_patterns.h), recognises OOM messages (oom_patterns.h, oom_figures.h) and groups the
// signals of one incident (the "Error running job:" line, the traceback's last line, a second
// rank's copy, a doubled tee) into one event. Pure: no I/O, no clock; never throws on any input.
// Its member functions are defined in parts, which parsers/log_analyzer_internal.h lists.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "parsers/progress.h"
#include "parsers/record_splitter.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

struct OomMatch;
struct ProgressFrame;
struct ContextMatch;
struct StepCounter;
struct FrameRun;

struct AnalyzerOptions {
  Trainer trainer = Trainer::kUnknown;  // forced when not kUnknown (scan --trainer)
  std::string job_name;                 // AI Toolkit: the training bar is described by it
  std::optional<int64_t> total_steps;   // from the job config, when the log does not print it
  // Leaves out the rules written for this trainer's own output (tests: a trainer held out must
  // still get its phase and step from the generic evidence).
  Trainer without_rules_of = Trainer::kUnknown;
  // Runs of frames of the bar already waiting to be parsed are taken in one go, without a look
  // at each (the results are the same; tests turn it off to prove it).
  bool skip_frame_runs = true;
};

class LogAnalyzer {
 public:
  explicit LogAnalyzer(AnalyzerOptions options = {});

  // Resumes a stream at `offset` (line `line`) with the context saved by checkpoint().
  LogAnalyzer(AnalyzerOptions options, std::string_view checkpoint, uint64_t offset, int64_t line);

  void feed(std::string_view bytes);
  // As feed(), with the runs of frames find_frame_runs() found in `bytes` (or in a part of the
  // stream around it): each is taken in one step where the analyzer would take its records one
  // by one. The results are those of feed(bytes).
  void feed(std::string_view bytes, const std::vector<FrameRun>& runs);

  // Moves out the events whose incident is complete. An incident stays open until the log
  // moves on (training progress, a new run) or enough records follow it to see its traceback.
  std::vector<OomEvent> take_events();

  // Ends the stream: closes the open incident and decides the outcome. Returns every event not
  // taken before.
  LogAnalysis finish();

  // Reports the open incident's event now. The daemon calls it when a file has been quiet for a
  // moment: a crash ends the log, so no later record would close the incident. The incident
  // stays open as it would in a whole-file scan: what still arrives of it (its traceback, another
  // rank's copy) is merged, and when that changes the verdict the next settle() or the close
  // reports the event again with revision + 1 (an amendment). So the last revision is the event
  // analyze_log() gives for the whole file.
  void settle();

  // How long the log must have been quiet before settle() may close the open incident: `settle`,
  // or kTracebackWait while the incident's traceback is still to come (a message printed before
  // its traceback, as AI Toolkit's "Error running job:" is, or a traceback without its exception
  // line yet). Its deeper frames decide the phase, and a slow pipe brings them late.
  std::chrono::milliseconds quiet_before_settle(std::chrono::milliseconds settle) const;
  static constexpr std::chrono::milliseconds kTracebackWait{2000};

  // An OOM the log does not show but the job's scheduler reported when it ended (Slurm's
  // OUT_OF_MEMORY: the cgroup's kill leaves no line when slurmstepd's own is lost): an event of
  // `kind` at the log's end, in the phase and at the step the log was in when it stopped, with
  // `message` as what said so. take_events() returns it; the outcome becomes crashed_oom.
  void add_reported_event(OomKind kind, std::string message);

  // Where the stream can be re-read from after a restart without losing an incident in progress
  // (the start of the open incident or of the frame waiting to be parsed), and its line.
  uint64_t resume_offset() const;
  int64_t resume_line() const;
  // The context a resumed analyzer needs (the training bar, phase markers, trainer, job), JSON.
  std::string checkpoint() const;
  // The outcome so far, as finish() would decide it.
  Outcome outcome_so_far() const;
  // An incident whose event is not reported as it stands: never reported, or records arrived
  // since settle() reported it (they may amend it).
  bool has_open_incident() const {
    return open_ && (!open_->reported || seq_ > open_->reported_seq);
  }
  uint64_t records() const { return static_cast<uint64_t>(seq_); }
  uint64_t truncated_records() const { return splitter_.truncated_records(); }
  Trainer trainer() const { return trainer_guess(); }
  const PrintedArguments& arguments() const { return arguments_; }
  // The training bar's position as last parsed (the frame waiting to be parsed is not), and the
  // step of the newest save the log named: `run --heal` checks that a restart resumed there.
  std::optional<int64_t> training_step() const { return train_n_; }
  std::optional<int64_t> training_total() const { return train_total_; }
  std::optional<int64_t> last_saved_step() const { return last_saved_step_; }
  // The training bar as the log shows it now, the frame waiting to be parsed included: what
  // `oomtriage jobs` and `top` show of a running job (db/store.h LiveState).
  struct Live {
    std::optional<int64_t> step;
    std::optional<int64_t> total;
    BarVitals vitals;
    Phase phase = Phase::kUnknown;
  };
  Live live() const;
  // What the log says it is doing now: the phase of the newest marker or bar (the memory
  // timeline's phase, triage/gpu_timeline.h); kUnknown before any.
  Phase current_phase() const { return context_ ? context_->phase : Phase::kUnknown; }
  // What the log has shown so far about its job (trainer, name, printed config and arguments,
  // config files it loads): a LogAnalysis without events or counts.
  LogAnalysis job_facts() const;

 private:
  // A piece of evidence for the phase or the step, and where the log shows it.
  struct Clue {
    EvidenceSource source = EvidenceSource::kMarker;
    Phase phase = Phase::kUnknown;
    std::optional<int64_t> step;
    int64_t seq = -1;
    int64_t line = 0;
    std::string text;
    bool strong = true;  // frames only: an entry point or a script name is weak
  };

  // A progress bar as an object: its identity is its description and total.
  struct Bar {
    std::string desc;
    int64_t total = -1;  // -1: unknown
    int id = 0;
    BarClass cls;
    bool classified = false;
    Trainer classified_for = Trainer::kUnknown;
    std::optional<int64_t> n;
    int64_t seq = -1;
    bool reports_loss = false;  // a frame's postfix named a loss or a learning rate
  };

  // Bars seen since the last signal: training went on only when one bar's n rises past its
  // value at the signal, twice (one rise is the redraw tqdm's close() prints at exit).
  struct Watch {
    int64_t from_seq = 0;
    int64_t traceback_from_seq = 0;  // where the signal's traceback may start
    struct Baseline {
      int bar_id = 0;
      int64_t n = 0;
      int rises = 0;
    };
    std::vector<Baseline> baselines;
  };

  struct Incident {
    OomEvent event;
    int64_t first_seq = 0;
    int64_t last_signal_seq = 0;
    int64_t traceback_from_seq = 0;
    Phase signal_phase = Phase::kUnknown;
    std::optional<Clue> context;    // the newest marker or bar before the signal
    std::optional<Clue> step;       // the newest step evidence before the signal
    std::optional<Clue> node;       // a UI node type
    std::optional<Clue> epilogue;   // the first failure line after the signal naming a stage
    std::optional<Clue> after_bar;  // a training bar first drawn after the signal
    std::optional<Clue> open_bar;   // a bar nothing names, running when the signal came
    bool own_incident = false;      // a recovered banner: never merged with other signals
    bool backed_off = false;        // the trainer's back-off line followed its OOM message
    bool from_summary = false;      // a memory summary's count: the message it counts replaces it
    bool awaiting_continuation = false;
    bool traceback_to_come = false;  // a message that its traceback follows
    int continuation_lines = 0;
    std::vector<int> ranks;
    // Where a resumed analyzer reads it again from: the record of its first signal, or the
    // start of the traceback that ends in it.
    uint64_t record_offset = 0;
    int64_t record_line = 0;
    std::optional<OomEvent> reported;  // the event as settle() last reported it
    int64_t reported_seq = -1;
  };

  void on_record(const Record& record);
  void capture_printed_config(std::string_view text);
  void capture_job_arguments(std::string_view text);
  bool defer_frame(const Record& record);
  RecordSplitter::Skipped skip_frame_run(const char* p, const char* end, uint64_t offset,
                                         int64_t line);
  const FrameRun* known_run(uint64_t at, ptrdiff_t left_in_chunk);
  void flush_pending_frame();
  void process_text(std::string_view text, uint64_t offset, int64_t line, int depth);
  void on_frame(const ProgressFrame& frame, std::string_view text, int64_t line);
  void on_context(const ContextMatch& match, std::string_view text, int64_t line);
  void on_counter(const StepCounter& counter, std::string_view text, int64_t line);
  void on_frame_line(std::string_view text, int64_t line);
  void on_signal(const OomMatch& match, std::string_view line, std::optional<int> rank,
                 uint64_t offset, int64_t line_number);
  bool try_continue_message(std::string_view line);
  bool can_merge(const Incident& incident, OomKind kind, const MemoryFigures& figures,
                 std::optional<int> rank) const;
  void watch_bar(int bar_id, std::optional<int64_t> previous_n, bool seen_before,
                 std::optional<int64_t> n);
  void set_context(EvidenceSource source, Phase phase, std::string_view text, int64_t line);
  void take_vitals(const BarVitals& vitals);
  void set_step(EvidenceSource source, int64_t step, std::string_view text, int64_t line);
  // Whether an epoch index names the run's first epoch. Epoch 0 does; epoch 1 does when printed
  // with a total ("1/10", counted from 1) or when this run never showed an epoch 0: a trainer
  // that counts from 0 prints its epoch 0 first.
  bool first_epoch_of(int64_t epoch, bool has_total);
  void close_incident();
  // The event an incident amounts to, its phase and step resolved by precedence.
  OomEvent resolve_incident(const Incident& incident) const;
  // Reports the incident's event, or its amendment when the verdict changed since reported.
  void report(Incident& incident);
  // The open incident a resumed analyzer must read again, reported or not: what still arrives of
  // it after a restart amends its event (docs/daemon.md "Restarts").
  const Incident* still_open() const { return open_ ? &*open_ : nullptr; }
  Outcome decide_outcome(bool had_events) const;
  Trainer trainer_guess() const;
  bool rules_on(Trainer trainer) const;

  AnalyzerOptions options_;
  RecordSplitter splitter_;
  std::string scratch_;
  // Consecutive frames of one bar are most of a log; only the last one before anything else
  // matters, so it waits here and is parsed when the bar changes or other text arrives.
  // The waiting frame is a view into the chunk being fed while it lasts (no copy per frame);
  // it is copied into pending_copy_ only when the chunk ends.
  std::string_view pending_frame_;
  std::string pending_copy_;
  bool has_pending_frame_ = false;
  const char* chunk_begin_ = nullptr;
  const char* chunk_end_ = nullptr;
  const FrameRun* next_run_ = nullptr;  // during feed(bytes, runs): the first not yet passed
  const FrameRun* runs_end_ = nullptr;
  int64_t pending_seq_ = 0;
  uint64_t pending_offset_ = 0;
  int64_t pending_line_ = 0;
  std::string job_name_;
  int64_t seq_ = 0;  // index of the current record

  // The training bar, the bars as objects, and the evidence newest before now.
  std::vector<Bar> bars_;
  std::optional<int64_t> train_n_;
  std::optional<int64_t> train_total_;
  int64_t train_advance_seq_ = -1;
  int train_bar_id_ = -1;  // the bar train_n_ was read from
  BarVitals train_vitals_;
  std::optional<bool> first_epoch_;
  bool saw_epoch_zero_ = false;
  std::optional<Clue> other_bar_;  // the newest unfinished bar nothing names
  std::optional<Clue> context_;
  std::optional<Clue> step_;
  std::optional<Clue> attempt_step_;  // the step evidence when the last run start came
  std::optional<Clue> node_;
  std::optional<int64_t> resume_step_;
  std::optional<int64_t> last_saved_step_;
  std::optional<int64_t> printed_total_steps_;
  int64_t traceback_seq_ = -1;
  uint64_t traceback_offset_ = 0;  // where the newest traceback header's record starts
  int64_t traceback_line_ = 0;
  // A resumed analyzer reads again an incident reported before the restart: the event at this
  // offset goes on from the revision it had.
  std::optional<uint64_t> resumed_event_offset_;
  int resumed_event_revision_ = 0;
  std::deque<Clue> frames_;
  bool source_line_next_ = false;
  std::optional<int> gpu_hint_;
  int64_t gpu_hint_seq_ = -1;
  int next_bar_id_ = 0;
  int64_t finished_epoch_total_ = -1;  // the total a training bar ran to (an epoch, maybe)
  std::optional<Watch> watch_;
  int64_t went_on_seq_ = -1;  // where training was last seen going on after a signal
  int64_t run_start_seq_ = -1;
  int64_t last_incident_end_seq_ = -1;  // the last signal of the incident closed last
  int64_t top_level_frame_seq_ = -1;    // the last "in <module>" frame: a process dying

  // What the end of the log says.
  int64_t crash_seq_ = -1;
  int advances_after_crash_ = 0;  // training-bar rises since the crash
  int64_t stop_seq_ = -1;
  int64_t completed_seq_ = -1;
  int64_t last_event_seq_ = -1;
  bool last_event_recovered_ = false;
  bool any_text_ = false;
  enum class ConfigCapture { kLooking, kCapturing, kDone };
  ConfigCapture config_capture_ = ConfigCapture::kLooking;
  std::string printed_config_;
  PrintedArguments arguments_;
  std::vector<std::pair<std::string, std::string>> printed_arguments_;
  bool in_arguments_block_ = false;
  std::optional<std::string> named_config_;
  std::optional<std::string> named_dataset_config_;
  std::array<int, 8> trainer_votes_{};

  std::optional<Incident> open_;
  uint64_t current_record_offset_ = 0;
  int64_t current_record_line_ = 0;
  std::vector<OomEvent> events_;
  uint64_t binary_bytes_ = 0;
  uint64_t sampled_bytes_ = 0;
};

// Whether every regex of every parser table compiled (checked at start-up: a bad edit must fail
// loudly, not match nothing); names the first bad one in `error`.
Result<Ok> parser_patterns_ok();

// Convenience for tests and one-shot callers: the whole analysis of `bytes`.
LogAnalysis analyze_log(std::string_view bytes, AnalyzerOptions options = {});

}  // namespace oomtriage::parsers
