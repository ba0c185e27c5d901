// parsers/log_analyzer.cc: the analyzer's state machine. Each record is either a progress frame
// (most of a log, handled without regexes), or text that passes a literal prefilter and is then
// cleaned and matched against the context and OOM tables, or noise that is skipped.
#include "parsers/log_analyzer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

#include "parsers/context_patterns.h"
#include "parsers/line_cleaner.h"
#include "parsers/oom_figures.h"
#include "parsers/oom_patterns.h"
#include "parsers/progress.h"

namespace oomtriage::parsers {
namespace {

// Records after an incident's last signal that still belong to it: AI Toolkit prints the error,
// a result block, then a traceback of up to a few hundred lines ending in the same message.
constexpr int64_t kIncidentWindow = 400;
// How far before a signal its traceback may start.
constexpr int64_t kTracebackLookback = 300;
constexpr size_t kMaxMessageBytes = 4096;
constexpr int kMaxContinuationLines = 8;
constexpr size_t kBinarySampleBytes = 64 * 1024;
constexpr size_t kFramePhaseHistory = 512;

bool is_gpu_family(OomKind kind) {
  return kind == OomKind::kCuda || kind == OomKind::kHip || kind == OomKind::kCublas ||
         kind == OomKind::kCudnn || kind == OomKind::kNccl;
}

// Higher wins when a traceback shows several phases: a sample inside the training loop is
// sampling, a quantize inside the model load is quantize.
int phase_precedence(Phase phase) {
  switch (phase) {
    case Phase::kSampling: return 7;
    case Phase::kCacheLatents: return 6;
    case Phase::kCacheTextEmbeddings: return 5;
    case Phase::kQuantize: return 4;
    case Phase::kModelLoad: return 3;
    case Phase::kSaving: return 2;
    case Phase::kTrainStep: return 1;
    case Phase::kUnknown: return 0;
  }
  return 0;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
}

bool is_binary_byte(unsigned char c) {
  return c < 0x09 || (c > 0x0d && c < 0x20 && c != 0x1b) || c == 0x7f;
}

}  // namespace

LogAnalyzer::LogAnalyzer(AnalyzerOptions options)
    : options_(std::move(options)), job_name_(options_.job_name) {}

void LogAnalyzer::feed(std::string_view bytes) {
  if (sampled_bytes_ < kBinarySampleBytes) {
    const size_t n = std::min(bytes.size(), kBinarySampleBytes - sampled_bytes_);
    for (size_t i = 0; i < n; ++i) {
      binary_bytes_ += is_binary_byte(static_cast<unsigned char>(bytes[i])) ? 1 : 0;
    }
    sampled_bytes_ += n;
  }
  chunk_begin_ = bytes.data();
  chunk_end_ = bytes.data() + bytes.size();
  splitter_.feed(bytes, [this](const Record& record) { on_record(record); });
  // The chunk's memory is the caller's: keep the waiting frame in our own.
  if (has_pending_frame_ && pending_frame_.data() != pending_copy_.data()) {
    pending_copy_.assign(pending_frame_);
    pending_frame_ = pending_copy_;
  }
  chunk_begin_ = chunk_end_ = nullptr;
}

std::vector<OomEvent> LogAnalyzer::take_events() {
  flush_pending_frame();
  std::vector<OomEvent> taken;
  taken.swap(events_);
  return taken;
}

void LogAnalyzer::on_record(const Record& record) {
  ++seq_;
  current_record_offset_ = record.offset;
  current_record_line_ = record.line;
  if (open_ && seq_ - open_->last_signal_seq > kIncidentWindow) {
    close_incident();
  }
  if (config_capture_ != ConfigCapture::kDone) capture_printed_config(record.text);
  if (defer_frame(record)) {
    return;
  }
  flush_pending_frame();
  process_text(record.text, record.offset, record.line, 0);
}

// AI Toolkit prints its process config with json.dumps(indent=4) before anything else: a line
// "{", the body, and a line "}". Only the first one near the top is kept, bounded in size.
void LogAnalyzer::capture_printed_config(std::string_view text) {
  constexpr size_t kMaxPrintedConfigBytes = 256 * 1024;
  constexpr int64_t kSearchRecords = 200;
  if (config_capture_ == ConfigCapture::kLooking) {
    if (text == "{") {
      config_capture_ = ConfigCapture::kCapturing;
      printed_config_ = "{\n";
    } else if (seq_ > kSearchRecords) {
      config_capture_ = ConfigCapture::kDone;
    }
    return;
  }
  printed_config_.append(text);
  printed_config_.push_back('\n');
  if (text == "}") {
    config_capture_ = ConfigCapture::kDone;
  } else if (printed_config_.size() > kMaxPrintedConfigBytes) {
    printed_config_.clear();
    config_capture_ = ConfigCapture::kDone;
  }
}

bool LogAnalyzer::defer_frame(const Record& record) {
  constexpr size_t kBarPrefixBytes = 16;
  std::string_view text = record.text;
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.back() != ']' || text.size() > 1024 ||
      (open_ && open_->awaiting_continuation)) {
    return false;
  }
  // tqdm's frame ends in "[elapsed<remaining, rate...]": the last '[' opens the time.
  const void* bracket = memrchr(text.data(), '[', text.size());
  if (bracket == nullptr) return false;
  const char* after = static_cast<const char*>(bracket) + 1;
  if (after >= text.data() + text.size() || *after < '0' || *after > '9') return false;
  if (has_pending_frame_) {
    const size_t n = std::min({kBarPrefixBytes, text.size(), pending_frame_.size()});
    if (pending_frame_.compare(0, n, text.data(), n) != 0) flush_pending_frame();
  }
  const char* p = record.text.data();
  if (p >= chunk_begin_ && p + record.text.size() <= chunk_end_) {
    pending_frame_ = record.text;  // valid until feed() returns
  } else {
    pending_copy_.assign(record.text);  // the splitter's carry buffer: copy now
    pending_frame_ = pending_copy_;
  }
  has_pending_frame_ = true;
  pending_seq_ = seq_;
  pending_offset_ = record.offset;
  pending_line_ = record.line;
  return true;
}

void LogAnalyzer::flush_pending_frame() {
  if (!has_pending_frame_) return;
  has_pending_frame_ = false;
  const int64_t now = seq_;
  const uint64_t now_offset = current_record_offset_;
  const int64_t now_line = current_record_line_;
  seq_ = pending_seq_;
  current_record_offset_ = pending_offset_;
  current_record_line_ = pending_line_;
  const std::string_view frame = pending_frame_;
  process_text(frame, pending_offset_, pending_line_, 0);
  seq_ = now;
  current_record_offset_ = now_offset;
  current_record_line_ = now_line;
}

void LogAnalyzer::process_text(std::string_view text, uint64_t offset, int64_t line, int depth) {
  if (is_blank(text)) {
    if (open_) open_->awaiting_continuation = false;
    return;
  }
  any_text_ = true;
  if (auto frame = parse_progress_frame(text)) {
    if (open_) open_->awaiting_continuation = false;
    on_frame(*frame);
    // Output glued to the end of a frame: "...[00:00<?, ?it/s]Killed".
    if (frame->end < text.size() && depth < 8) {
      process_text(text.substr(frame->end), offset + frame->end, line, depth + 1);
    }
    return;
  }
  const bool awaiting = open_ && open_->awaiting_continuation;
  const bool oom_literal = may_mention_oom(text);
  if (!awaiting && !oom_literal && !may_be_context(text)) {
    return;
  }
  const CleanLine clean = clean_line(text, scratch_);
  if (awaiting && try_continue_message(clean.text)) {
    return;
  }

  std::vector<ContextMatch> contexts;
  match_context(clean.text, contexts);
  for (const ContextMatch& match : contexts) {
    on_context(match);
  }
  if (auto frame_phase = traceback_frame_phase(clean.text)) {
    if (*frame_phase != Phase::kUnknown) {
      frame_phases_.emplace_back(seq_, *frame_phase);
      if (frame_phases_.size() > kFramePhaseHistory) frame_phases_.pop_front();
    }
    return;
  }
  if (traceback_seq_ >= 0 && seq_ - traceback_seq_ <= 2 * kIncidentWindow &&
      is_exception_line(clean.text)) {
    crash_seq_ = seq_;
  }
  if (oom_literal) {
    if (auto match = match_oom(clean.text)) {
      uint64_t message_offset = offset;
      if (clean.text.data() >= text.data() && clean.text.data() <= text.data() + text.size()) {
        message_offset += static_cast<uint64_t>(clean.text.data() - text.data()) + match->begin;
      }
      on_signal(*match, clean.text, clean.rank, message_offset, line);
    }
  }
}

void LogAnalyzer::on_frame(const ProgressFrame& frame) {
  BarClass cls;
  if (frame.notebook) {
    cls = {BarRole::kTrainingSteps, Phase::kTrainStep};
  } else if (frame.desc == last_desc_ && !last_desc_.empty()) {
    cls = {static_cast<BarRole>(last_desc_role_), static_cast<Phase>(last_desc_phase_)};
  } else {
    cls = classify_bar(frame.desc, job_name_, trainer_guess());
    last_desc_.assign(frame.desc);
    last_desc_role_ = static_cast<int>(cls.role);
    last_desc_phase_ = static_cast<int>(cls.phase);
  }
  // HF Trainer's training bar has no description; its total is the printed number of steps.
  if (cls.role == BarRole::kOther && frame.desc.empty() && frame.total && printed_total_steps_ &&
      *frame.total == *printed_total_steps_) {
    cls = {BarRole::kTrainingSteps, Phase::kTrainStep};
  }
  // HF Trainer's eval bar has no description either; its total differs from the training one.
  if (cls.role == BarRole::kTrainingSteps && frame.desc.empty() && !frame.notebook &&
      train_total_ && frame.total && *frame.total != *train_total_) {
    cls = {BarRole::kPhase, Phase::kSampling};
  }
  switch (cls.role) {
    case BarRole::kTrainingSteps:
      if (frame.n) {
        if (!train_n_ || *frame.n > *train_n_) train_advance_seq_ = seq_;
        train_n_ = frame.n;
      }
      if (frame.total) train_total_ = frame.total;
      train_seq_ = seq_;
      bar_phase_ = Phase::kTrainStep;
      bar_seq_ = seq_;
      break;
    case BarRole::kTrainingPerEpoch:
      if (frame.n) {
        if (!epoch_n_ || *frame.n != *epoch_n_) train_advance_seq_ = seq_;
        epoch_n_ = frame.n;
      }
      bar_phase_ = Phase::kTrainStep;
      bar_seq_ = seq_;
      break;
    case BarRole::kPhase:
      bar_phase_ = cls.phase;
      bar_seq_ = seq_;
      break;
    case BarRole::kOther:
      break;
  }
  if (train_advance_seq_ == seq_) settled_.reset();
  // Training went on past the incident: the trainer survived it.
  if (open_ && train_advance_seq_ == seq_ && seq_ > open_->first_seq) {
    const auto step = open_->event.step;
    if (cls.role == BarRole::kTrainingPerEpoch || !step || !frame.n || *frame.n > *step) {
      open_->event.recovered = true;
      close_incident();
    }
  }
}

void LogAnalyzer::on_context(const ContextMatch& match) {
  const ContextPattern& pattern = *match.pattern;
  if (pattern.trainer != Trainer::kUnknown) {
    ++trainer_votes_[static_cast<size_t>(pattern.trainer)];
  }
  switch (pattern.effect) {
    case MarkerEffect::kNone:
      break;
    case MarkerEffect::kPhase:
      marker_phase_ = pattern.phase;
      marker_seq_ = seq_;
      marker_step_ = match.n;
      break;
    case MarkerEffect::kBaselineSample:
      marker_phase_ = Phase::kSampling;
      marker_seq_ = seq_;
      marker_step_ = resume_step_.value_or(0);
      break;
    case MarkerEffect::kResumeStep:
      resume_step_ = match.n;
      break;
    case MarkerEffect::kRunStart:
      if (open_) close_incident();
      settled_.reset();
      if (!match.job.empty() && options_.job_name.empty()) job_name_.assign(match.job);
      train_n_.reset();
      epoch_n_.reset();
      train_seq_ = -1;
      crash_seq_ = stop_seq_ = completed_seq_ = -1;
      marker_phase_ = pattern.phase;
      marker_seq_ = seq_;
      marker_step_.reset();
      break;
    case MarkerEffect::kTotalSteps:
      printed_total_steps_ = match.n;
      break;
    case MarkerEffect::kCrash:
      crash_seq_ = seq_;
      break;
    case MarkerEffect::kStop:
      stop_seq_ = seq_;
      break;
    case MarkerEffect::kCompleted:
      completed_seq_ = seq_;
      break;
    case MarkerEffect::kTracebackHeader:
      traceback_seq_ = seq_;
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

Phase LogAnalyzer::context_phase() const {
  if (marker_seq_ > bar_seq_) return marker_phase_;
  if (bar_seq_ >= 0) return bar_phase_;
  return marker_phase_;
}

std::optional<int64_t> LogAnalyzer::current_step() const {
  // A marker newer than the last training frame names the step exactly ("Saving at step 250",
  // kohya's "generating sample images at step 500", the baseline sample = step 0).
  if (marker_seq_ > train_seq_ && marker_step_) return marker_step_;
  return train_n_;
}

Trainer LogAnalyzer::trainer_guess() const {
  if (options_.trainer != Trainer::kUnknown) return options_.trainer;
  size_t best = 0;
  for (size_t i = 1; i < trainer_votes_.size(); ++i) {
    if (trainer_votes_[i] > trainer_votes_[best]) best = i;
  }
  return static_cast<Trainer>(best);
}

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
  const auto& mine = incident.event.figures.tried_to_allocate_bytes;
  if (mine && figures.tried_to_allocate_bytes && *mine != *figures.tried_to_allocate_bytes) {
    return false;  // two different allocations failed: two incidents
  }
  return true;
}

void LogAnalyzer::on_signal(const OomMatch& match, std::string_view line, std::optional<int> rank,
                            uint64_t offset, int64_t line_number) {
  const OomPattern& pattern = *match.pattern;
  std::string_view message = line.substr(match.begin);
  if (message.size() > kMaxMessageBytes) message = message.substr(0, kMaxMessageBytes);
  MemoryFigures figures =
      pattern.allocator_message ? extract_figures(message, match.kind) : MemoryFigures{};
  if (!figures.gpu_index) figures.gpu_index = pattern.gpu_index;
  const auto exception = exception_class(line);

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
  if (open_) close_incident();
  // The rest of an incident that settle() already reported (its traceback's last line, say).
  if (settled_ && !pattern.recovered && seq_ - settled_->last_signal_seq <= kIncidentWindow &&
      can_merge(*settled_, match.kind, figures, rank)) {
    settled_->last_signal_seq = seq_;
    return;
  }

  Incident incident;
  incident.record_offset = current_record_offset_;
  incident.record_line = current_record_line_;
  OomEvent& event = incident.event;
  event.kind = match.kind;
  event.recovered = pattern.recovered;
  event.step = current_step();
  event.total_steps = train_total_ ? train_total_
                                   : (printed_total_steps_ ? printed_total_steps_
                                                           : options_.total_steps);
  event.figures = figures;
  event.line = line_number;
  event.offset = offset;
  if (exception) event.exception.emplace(*exception);
  event.message.assign(message);
  incident.first_seq = incident.last_signal_seq = seq_;
  incident.traceback_from_seq = (traceback_seq_ >= 0 && seq_ - traceback_seq_ <= kTracebackLookback)
                                    ? traceback_seq_
                                    : seq_ - kTracebackLookback;
  incident.signal_phase = pattern.phase;
  incident.context_phase = context_phase();
  incident.own_incident = pattern.recovered;
  incident.awaiting_continuation = pattern.allocator_message && looks_incomplete(message);
  if (rank) incident.ranks.push_back(*rank);
  open_ = std::move(incident);
}

bool LogAnalyzer::try_continue_message(std::string_view line) {
  Incident& incident = *open_;
  const bool new_record = starts_with(line, "Traceback") || starts_with(line, "File ") ||
                          starts_with(line, "frame #") || starts_with(line, "During handling") ||
                          starts_with(line, "The above exception") || is_exception_line(line) ||
                          line.find("Warning:") != std::string_view::npos ||
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

void LogAnalyzer::close_incident() {
  Incident& incident = *open_;
  OomEvent& event = incident.event;
  Phase phase = incident.signal_phase;
  if (phase == Phase::kUnknown) {
    for (const auto& [seq, frame_phase] : frame_phases_) {
      if (seq >= incident.traceback_from_seq &&
          phase_precedence(frame_phase) > phase_precedence(phase)) {
        phase = frame_phase;
      }
    }
  }
  if (phase == Phase::kUnknown) phase = incident.context_phase;
  event.phase = phase;
  if (!event.figures.gpu_index && gpu_hint_ && gpu_hint_seq_ >= incident.first_seq) {
    event.figures.gpu_index = gpu_hint_;
  }
  last_event_seq_ = incident.first_seq;
  last_event_recovered_ = event.recovered;
  events_.push_back(std::move(event));
  open_.reset();
}

LogAnalysis LogAnalyzer::finish() {
  splitter_.finish([this](const Record& record) { on_record(record); });
  flush_pending_frame();
  const bool had_events = open_.has_value() || last_event_seq_ >= 0;
  if (open_) close_incident();

  LogAnalysis analysis;
  analysis.trainer = trainer_guess();
  if (!job_name_.empty()) analysis.job_name = job_name_;
  analysis.bytes = splitter_.bytes();
  analysis.lines = splitter_.lines();
  analysis.records = static_cast<uint64_t>(seq_);
  analysis.truncated_records = splitter_.truncated_records();
  analysis.binary_bytes = binary_bytes_;
  if (config_capture_ == ConfigCapture::kDone) analysis.printed_config = printed_config_;
  analysis.arguments = arguments_;

  analysis.outcome = decide_outcome(had_events);
  analysis.events = std::move(events_);
  events_.clear();
  return analysis;
}

Outcome LogAnalyzer::decide_outcome(bool had_events) const {
  const bool progress_after_oom = train_advance_seq_ > last_event_seq_;
  const bool training_finished = train_n_ && train_total_ && *train_total_ > 0 &&
                                 *train_n_ >= *train_total_;
  if (stop_seq_ >= 0 && stop_seq_ >= crash_seq_ && stop_seq_ >= last_event_seq_) {
    return Outcome::kStopped;
  }
  if (had_events && !progress_after_oom &&
      (!last_event_recovered_ || crash_seq_ > last_event_seq_)) {
    return Outcome::kCrashedOom;
  }
  if (crash_seq_ >= 0 && crash_seq_ > train_advance_seq_ && crash_seq_ > completed_seq_) {
    return Outcome::kCrashedOther;
  }
  if (completed_seq_ >= 0 || training_finished) return Outcome::kCompleted;
  return any_text_ ? Outcome::kRunning : Outcome::kUnknown;
}

Outcome LogAnalyzer::outcome_so_far() const {
  return decide_outcome(open_.has_value() || last_event_seq_ >= 0);
}

void LogAnalyzer::settle() {
  flush_pending_frame();
  if (!open_) return;
  Incident copy = *open_;
  close_incident();
  settled_ = std::move(copy);
}

uint64_t LogAnalyzer::resume_offset() const {
  uint64_t offset = splitter_.pending_record_offset();
  if (has_pending_frame_) offset = std::min(offset, pending_offset_);
  if (open_) offset = std::min(offset, open_->record_offset);
  return offset;
}

int64_t LogAnalyzer::resume_line() const {
  int64_t line = splitter_.pending_record_line();
  if (has_pending_frame_) line = std::min(line, pending_line_);
  if (open_) line = std::min(line, open_->record_line);
  return line;
}

namespace {

template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

template <class T>
void read_opt(const nlohmann::json& j, const char* key, std::optional<T>& out) {
  if (j.contains(key) && !j[key].is_null()) out = j[key].get<T>();
}

}  // namespace

std::string LogAnalyzer::checkpoint() const {
  nlohmann::json j = {
      {"v", 1},
      {"seq", seq_},
      {"train_n", opt(train_n_)},
      {"train_total", opt(train_total_)},
      {"train_seq", train_seq_},
      {"train_advance_seq", train_advance_seq_},
      {"epoch_n", opt(epoch_n_)},
      {"bar_phase", static_cast<int>(bar_phase_)},
      {"bar_seq", bar_seq_},
      {"marker_phase", static_cast<int>(marker_phase_)},
      {"marker_seq", marker_seq_},
      {"marker_step", opt(marker_step_)},
      {"resume_step", opt(resume_step_)},
      {"printed_total_steps", opt(printed_total_steps_)},
      {"crash_seq", crash_seq_},
      {"stop_seq", stop_seq_},
      {"completed_seq", completed_seq_},
      {"last_event_seq", last_event_seq_},
      {"last_event_recovered", last_event_recovered_},
      {"any_text", any_text_},
      {"job_name", job_name_},
      {"votes", trainer_votes_},
  };
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LogAnalyzer::LogAnalyzer(AnalyzerOptions options, std::string_view checkpoint, uint64_t offset,
                         int64_t line)
    : LogAnalyzer(std::move(options)) {
  splitter_.start_at(offset, line);
  sampled_bytes_ = kBinarySampleBytes;  // only the start of a file is sampled for binary bytes
  config_capture_ = ConfigCapture::kDone;
  const auto j = nlohmann::json::parse(checkpoint, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("v", 0) != 1) return;
  // A checkpoint from an older or damaged store is ignored: the file is read with no context.
  try {
    seq_ = j.value("seq", int64_t{0});
    read_opt(j, "train_n", train_n_);
    read_opt(j, "train_total", train_total_);
    train_seq_ = j.value("train_seq", int64_t{-1});
    train_advance_seq_ = j.value("train_advance_seq", int64_t{-1});
    read_opt(j, "epoch_n", epoch_n_);
    bar_phase_ = static_cast<Phase>(j.value("bar_phase", 0));
    bar_seq_ = j.value("bar_seq", int64_t{-1});
    marker_phase_ = static_cast<Phase>(j.value("marker_phase", 0));
    marker_seq_ = j.value("marker_seq", int64_t{-1});
    read_opt(j, "marker_step", marker_step_);
    read_opt(j, "resume_step", resume_step_);
    read_opt(j, "printed_total_steps", printed_total_steps_);
    crash_seq_ = j.value("crash_seq", int64_t{-1});
    stop_seq_ = j.value("stop_seq", int64_t{-1});
    completed_seq_ = j.value("completed_seq", int64_t{-1});
    last_event_seq_ = j.value("last_event_seq", int64_t{-1});
    last_event_recovered_ = j.value("last_event_recovered", false);
    any_text_ = j.value("any_text", false);
    if (options_.job_name.empty()) job_name_ = j.value("job_name", std::string());
    if (j.contains("votes") && j["votes"].is_array() && j["votes"].size() == trainer_votes_.size()) {
      for (size_t i = 0; i < trainer_votes_.size(); ++i) trainer_votes_[i] = j["votes"][i].get<int>();
    }
  } catch (const nlohmann::json::exception&) {
    *this = LogAnalyzer(options_);
    splitter_.start_at(offset, line);
  }
}

LogAnalysis analyze_log(std::string_view bytes, AnalyzerOptions options) {
  LogAnalyzer analyzer(std::move(options));
  analyzer.feed(bytes);
  return analyzer.finish();
}

}  // namespace oomtriage::parsers
