// parsers/log_analyzer.cc: the analyzer's state machine. Each record is either a progress frame
// (most of a log, handled without regexes), or text that passes a literal prefilter and is then
// cleaned and matched against the context and OOM tables, or noise that is skipped.
#include "parsers/log_analyzer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <tuple>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "parsers/context_patterns.h"
#include "parsers/frame_runs.h"
#include "parsers/line_cleaner.h"
#include "parsers/line_literals.h"
#include "parsers/oom_figures.h"
#include "parsers/oom_patterns.h"
#include "parsers/printed_arguments.h"
#include "parsers/progress.h"
#include "parsers/stage_lexicon.h"
#include "parsers/step_counters.h"

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
// Trainers print their arguments and config files near the top: this many records are read for
// them.
constexpr int64_t kJobFactRecords = 5000;
constexpr size_t kFrameHistory = 512;
// How many records after an OOM message a trainer's back-off line still speaks of it.
constexpr int64_t kBackoffReach = 50;
constexpr size_t kMaxBars = 32;
constexpr size_t kEvidenceTextBytes = 200;

bool is_gpu_family(OomKind kind) {
  return kind == OomKind::kCuda || kind == OomKind::kHip || kind == OomKind::kCublas ||
         kind == OomKind::kCudnn || kind == OomKind::kNccl;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
}

// The evidence line as people read it: no indentation, cut at a character boundary. Writes into
// `out` so that a clue updated on every frame reuses its buffer.
void assign_evidence(std::string& out, std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  if (text.size() <= kEvidenceTextBytes) {
    out.assign(text);
    return;
  }
  size_t cut = kEvidenceTextBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  out.assign(text.substr(0, cut));
  out.append("\u2026");
}

std::string evidence_text(std::string_view text) {
  std::string out;
  assign_evidence(out, text);
  return out;
}

// "trainer: step 300 loss=..." or "[ft] Saving pipeline": a logger's name or tag left after the
// cleaner took the timestamp and level. Counters and announcements are read past it too.
std::string_view after_logger_tag(std::string_view text) {
  size_t i = 0;
  if (!text.empty() && text.front() == '[') {
    i = 1;
    while (i < text.size() && i < 40 &&
           (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '-' ||
            text[i] == '.')) {
      ++i;
    }
    if (i == 1 || i >= text.size() || text[i] != ']') return {};
    ++i;
  } else {
    while (i < text.size() && i < 40 &&
           (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '-' ||
            text[i] == '.')) {
      ++i;
    }
    if (i == 0 || i >= text.size() || text[i] != ':') return {};
    ++i;
  }
  if (i >= text.size() || text[i] != ' ') return {};
  while (i < text.size() && text[i] == ' ') ++i;
  return text.substr(i);
}

bool is_binary_byte(unsigned char c) {
  return c < 0x09 || (c > 0x0d && c < 0x20 && c != 0x1b) || c == 0x7f;
}

// is_binary_byte() over a span, 16 bytes a step (the daemon samples the head of every log).
uint64_t count_binary_bytes(std::string_view bytes) {
  uint64_t count = 0;
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= bytes.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes.data() + i));
    // Signed compares: bytes from 0x80 (UTF-8) are negative and never binary.
    const __m128i low =
        _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(-1)), _mm_cmplt_epi8(v, _mm_set1_epi8(0x09)));
    const __m128i control = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x1b)),
                                             _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(0x0d)),
                                                           _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))));
    const __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
    const int mask = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(low, control), del));
    count += static_cast<uint64_t>(__builtin_popcount(static_cast<unsigned>(mask)));
  }
#endif
  for (; i < bytes.size(); ++i)
    count += is_binary_byte(static_cast<unsigned char>(bytes[i])) ? 1 : 0;
  return count;
}

}  // namespace

LogAnalyzer::LogAnalyzer(AnalyzerOptions options)
    : options_(std::move(options)), job_name_(options_.job_name) {}

void LogAnalyzer::feed(std::string_view bytes) { feed(bytes, {}); }

void LogAnalyzer::feed(std::string_view bytes, const std::vector<FrameRun>& runs) {
  next_run_ = runs.data();
  runs_end_ = runs.data() + runs.size();
  if (sampled_bytes_ < kBinarySampleBytes) {
    const size_t n = std::min(bytes.size(), kBinarySampleBytes - sampled_bytes_);
    binary_bytes_ += count_binary_bytes(bytes.substr(0, n));
    sampled_bytes_ += n;
  }
  chunk_begin_ = bytes.data();
  chunk_end_ = bytes.data() + bytes.size();
  splitter_.feed(
      bytes, [this](const Record& record) { on_record(record); },
      [this](const char* p, const char* end, uint64_t offset, int64_t line) {
        return skip_frame_run(p, end, offset, line);
      });
  // The chunk's memory is the caller's: keep the waiting frame in our own.
  if (has_pending_frame_ && pending_frame_.data() != pending_copy_.data()) {
    pending_copy_.assign(pending_frame_);
    pending_frame_ = pending_copy_;
  }
  chunk_begin_ = chunk_end_ = nullptr;
  next_run_ = runs_end_ = nullptr;
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
  if (watch_ && seq_ - watch_->from_seq > 2 * kIncidentWindow) watch_.reset();
  if (config_capture_ != ConfigCapture::kDone) capture_printed_config(record.text);
  if (defer_frame(record)) {
    return;
  }
  // A frame is never an argument line: only the rest is looked at for the job's facts.
  if (seq_ <= kJobFactRecords) capture_job_arguments(record.text);
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

// Trainers print their arguments and the config files they load near the top; only the first
// namespace and the first names are kept, bounded.
void LogAnalyzer::capture_job_arguments(std::string_view text) {
  constexpr size_t kMaxArguments = 1000;
  if (in_arguments_block_) {
    auto field = parse_field_line(text);
    if (field && printed_arguments_.size() < kMaxArguments) {
      printed_arguments_.push_back(std::move(*field));
      return;
    }
    in_arguments_block_ = false;
  }
  if (printed_arguments_.empty()) {
    if (text.find("Namespace(") != std::string_view::npos) {
      printed_arguments_ = parse_namespace(text);
    } else if (text.size() >= 18 && text.substr(text.size() - 18) == "TrainingArguments(") {
      in_arguments_block_ = true;
    } else if (text.find(".py ") != std::string_view::npos &&
               text.find(" --") != std::string_view::npos) {
      // A launch script's echo: its --config_file is the config the job loads.
      Arguments args = parse_command_line(text);
      for (const auto& [name, value] : args) {
        if (name == "config_file" && !named_config_) named_config_ = value;
        if (name == "dataset_config" && !named_dataset_config_) named_dataset_config_ = value;
      }
      printed_arguments_ = std::move(args);
    }
  }
  if (!named_config_ || !named_dataset_config_) {
    if (auto named = named_config_file(text)) {
      auto& slot = named->dataset ? named_dataset_config_ : named_config_;
      if (!slot) slot = std::move(named->path);
    }
  }
}

LogAnalysis LogAnalyzer::job_facts() const {
  LogAnalysis facts;
  facts.trainer = trainer_guess();
  if (!job_name_.empty()) facts.job_name = job_name_;
  if (config_capture_ == ConfigCapture::kDone) facts.printed_config = printed_config_;
  facts.arguments = arguments_;
  facts.printed_arguments = printed_arguments_;
  facts.named_config = named_config_;
  facts.named_dataset_config = named_dataset_config_;
  return facts;
}

bool LogAnalyzer::defer_frame(const Record& record) {
  // After a signal every frame counts: is it tqdm's one redraw at exit, or training going on?
  if (watch_ || (open_ && open_->awaiting_continuation) || !ends_like_frame(record.text)) {
    return false;
  }
  const std::string_view text = record.text;
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

// The steady state of a long log: a bar redrawn thousands of times per line. A record that
// defer_frame() would take as the next frame of the bar already waiting (the same first 16
// bytes, a tqdm time field at its end, no incident or watch open, the printed config behind)
// just becomes the waiting frame, as it would through on_record(); anything else ends the run
// and goes the slow way, so a bar whose text changes mid-line or text between two '\r' is seen
// there. Only records whose terminator and the byte after it lie in the chunk are taken.
RecordSplitter::Skipped LogAnalyzer::skip_frame_run(const char* p, const char* end, uint64_t offset,
                                                    int64_t line) {
  RecordSplitter::Skipped run{p, 0};
  if (!options_.skip_frame_runs || !has_pending_frame_ || open_ || watch_ ||
      config_capture_ != ConfigCapture::kDone || pending_frame_.size() < kBarPrefixBytes) {
    return run;
  }
  char prefix[kBarPrefixBytes];
  std::memcpy(prefix, pending_frame_.data(), kBarPrefixBytes);
  const char* const start = p;
  while (true) {
    if (const FrameRun* known = known_run(offset + static_cast<uint64_t>(p - start), end - p);
        known != nullptr && std::memcmp(p, prefix, kBarPrefixBytes) == 0) {
      // The whole run at once: what the loop below would do for each of its records.
      const uint64_t at = offset + static_cast<uint64_t>(p - start);
      const bool from_second = known->begin != at;
      const int64_t skipped_newlines = from_second ? known->first_newlines : 0;
      seq_ += known->records - (from_second ? 1 : 0);
      pending_frame_ = std::string_view(p + (known->last_offset - at), known->last_size);
      pending_seq_ = seq_;
      pending_offset_ = known->last_offset;
      pending_line_ = line + run.newlines + known->newlines_before_last - skipped_newlines;
      run.newlines += known->newlines - skipped_newlines;
      p += known->end - at;
      run.next = p;
      if (p == end) break;
      continue;
    }
    const char* eol = find_record_end(p, end);
    if (end - eol < 2) break;
    const size_t n = static_cast<size_t>(eol - p);
    if (n < kBarPrefixBytes || std::memcmp(p, prefix, kBarPrefixBytes) != 0) break;
    if (!ends_like_frame(std::string_view(p, n))) break;
    // The next frame of the bar: it waits instead of the last one.
    ++seq_;
    pending_frame_ = std::string_view(p, n);
    pending_seq_ = seq_;
    pending_offset_ = offset + static_cast<uint64_t>(p - start);
    pending_line_ = line + run.newlines;
    p = eol + 1;
    if (*eol == '\n') {
      ++run.newlines;
    } else if (*p == '\n') {
      ++p;
      ++run.newlines;
    }
    run.next = p;
  }
  return run;
}

const FrameRun* LogAnalyzer::known_run(uint64_t at, ptrdiff_t left_in_chunk) {
  while (next_run_ != runs_end_ && next_run_->end <= at) ++next_run_;
  if (next_run_ == runs_end_ || (next_run_->begin != at && next_run_->second != at)) {
    return nullptr;
  }
  // Its last record must not end the chunk: the loop below leaves that one to the splitter.
  if (next_run_->end - at >= static_cast<uint64_t>(left_in_chunk)) return nullptr;
  return next_run_;
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
  const bool source_line = source_line_next_;
  source_line_next_ = false;
  if (is_blank(text)) {
    if (open_) open_->awaiting_continuation = false;
    return;
  }
  any_text_ = true;
  if (auto frame = parse_progress_frame(text)) {
    if (open_) open_->awaiting_continuation = false;
    on_frame(*frame, text.substr(0, frame->end), line);
    // Output glued to the end of a frame: "...[00:00<?, ?it/s]Killed".
    if (frame->end < text.size() && depth < 8) {
      process_text(text.substr(frame->end), offset + frame->end, line, depth + 1);
    }
    return;
  }
  const bool awaiting = open_ && open_->awaiting_continuation;
  const LineLiterals literals = line_literals(text);
  const bool oom_literal = literals.oom;
  const bool context_literal = literals.context;
  const bool counter_literal = literals.counter;
  const bool announcing = text.substr(0, 96).find("ing ") != std::string_view::npos;
  // While an incident is open every line may name the stage that failed (the epilogue).
  if (!awaiting && !oom_literal && !context_literal && !counter_literal && !announcing &&
      !source_line && !open_) {
    return;
  }
  const CleanLine clean = clean_line(text, scratch_);
  if (awaiting && try_continue_message(clean.text)) {
    return;
  }

  bool named_phase = false;
  if (context_literal) {
    std::vector<ContextMatch> contexts;
    match_context(clean.text, contexts);
    for (const ContextMatch& match : contexts) {
      if (!rules_on(rules_of(*match.pattern))) continue;
      const MarkerEffect effect = match.pattern->effect;
      named_phase |= effect == MarkerEffect::kPhase || effect == MarkerEffect::kBaselineSample ||
                     effect == MarkerEffect::kRunStart;
      on_context(match, clean.text, line);
    }
  }
  if (auto frame = traceback_frame(clean.text)) {
    frames_.push_back({EvidenceSource::kFrame, frame->phase, std::nullopt, seq_, line,
                       evidence_text(clean.text), frame->strong, frame->device_move});
    if (frames_.size() > kFrameHistory) frames_.pop_front();
    source_line_next_ = frame->wants_source_line;
    if (frame->top_level) top_level_frame_seq_ = seq_;
    return;
  }
  if (source_line && !frames_.empty() && frames_.back().phase == Phase::kUnknown &&
      !is_exception_line(clean.text)) {
    // The line below a frame that said nothing: "    self.transformer = quantize(...)".
    if (const Phase phase = source_line_phase(clean.text); phase != Phase::kUnknown) {
      Clue& frame = frames_.back();
      frame.phase = phase;
      frame.strong = true;
      frame.text = evidence_text(frame.text + " / " + std::string(clean.text));
    }
  }
  if (traceback_seq_ >= 0 && seq_ - traceback_seq_ <= 2 * kIncidentWindow &&
      is_exception_line(clean.text)) {
    crash_seq_ = seq_;
    advances_after_crash_ = 0;
  }
  if (const std::string_view type = node_type(clean.text); !type.empty()) {
    if (const Phase phase = stage_of(type); phase != Phase::kUnknown) {
      Clue clue{EvidenceSource::kNode, phase, std::nullopt, seq_, line, evidence_text(clean.text)};
      if (open_ && !open_->node) open_->node = clue;
      node_ = std::move(clue);
    }
  }
  const std::string_view untagged = after_logger_tag(clean.text);
  if (counter_literal) {
    auto counter = match_counter(clean.text);
    if (!counter && !untagged.empty()) counter = match_counter(untagged);
    if (counter) on_counter(*counter, clean.text, line);
  }
  if (!named_phase && announcing) {
    Phase phase = announced_stage(clean.text);
    if (phase == Phase::kUnknown && !untagged.empty()) phase = announced_stage(untagged);
    if (phase != Phase::kUnknown) set_context(EvidenceSource::kMarker, phase, clean.text, line);
  }
  if (oom_literal) {
    if (auto match = match_oom(clean.text)) {
      uint64_t message_offset = offset;
      if (clean.text.data() >= text.data() && clean.text.data() <= text.data() + text.size()) {
        message_offset += static_cast<uint64_t>(clean.text.data() - text.data()) + match->begin;
      }
      on_signal(*match, clean.text, clean.rank, message_offset, line);
      return;
    }
  }
  if (open_ && !open_->epilogue && seq_ > open_->first_seq) {
    if (const Phase phase = failed_stage(clean.text); phase != Phase::kUnknown) {
      open_->epilogue = Clue{EvidenceSource::kEpilogue, phase, std::nullopt, seq_, line,
                             evidence_text(clean.text)};
    }
  }
}

bool LogAnalyzer::rules_on(Trainer trainer) const {
  return trainer == Trainer::kUnknown || trainer != options_.without_rules_of;
}

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
    cls = {BarRole::kTrainingSteps, Phase::kTrainStep, std::nullopt};
  } else if (frame.desc.empty()) {
    // A bar without a description whose total is the printed number of training steps is the
    // training bar (HF Trainer's, and any loop over range(max_train_steps)).
    if (cls.role == BarRole::kOther && frame.total && printed_total_steps_ &&
        *frame.total == *printed_total_steps_) {
      cls = {BarRole::kTrainingSteps, Phase::kTrainStep, std::nullopt};
    }
    // HF Trainer's eval bar has no description either; its total differs from the training one.
    if (cls.role == BarRole::kTrainingSteps && train_total_ && frame.total &&
        *frame.total != *train_total_ &&
        !(printed_total_steps_ && *frame.total == *printed_total_steps_)) {
      cls = {BarRole::kPhase, Phase::kSampling, std::nullopt};
    }
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
        bar->cls = cls = {BarRole::kTrainingPerEpoch, Phase::kTrainStep, false};
        first_epoch_ = false;
        step_.reset();
        break;
      }
      if (frame.n && total > 0 && *frame.n >= total) finished_epoch_total_ = total;
      if (frame.n && (!train_n_ || *frame.n > *train_n_)) train_advance_seq_ = seq_;
      if (frame.n) train_n_ = frame.n;
      if (frame.total) train_total_ = frame.total;
      set_context(EvidenceSource::kBar, Phase::kTrainStep, text, line);
      step_evidence = frame.n.has_value();
      break;
    case BarRole::kTrainingPerEpoch:
      if (cls.first_epoch) first_epoch_ = cls.first_epoch;
      if (frame.n && previous_n != frame.n) train_advance_seq_ = seq_;
      set_context(EvidenceSource::kBar, Phase::kTrainStep, text, line);
      // Batches of the first epoch are global steps; later epochs' are not.
      step_evidence = frame.n && first_epoch_ == true;
      break;
    case BarRole::kEpochs:
      if (frame.n) first_epoch_ = *frame.n == 0;
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
    if (open_ && seq_ > open_->first_seq && !open_->after_bar) {
      open_->after_bar =
          Clue{EvidenceSource::kBar, Phase::kTrainStep, frame.n, seq_, line, evidence_text(text)};
    }
  }
  // A step in the bar's postfix: "..., global_step=500, loss=0.1]", "gs=1500".
  if (const size_t bracket = text.rfind('[');
      bracket != std::string_view::npos && (text.find("step", bracket) != std::string_view::npos ||
                                            text.find("gs=", bracket) != std::string_view::npos)) {
    if (auto counter = match_counter(text.substr(bracket));
        counter && counter->kind == CounterKind::kGlobal && counter->n) {
      set_step(EvidenceSource::kCounter, *counter->n, text, line);
    }
  }
  if (cls.role == BarRole::kTrainingSteps || cls.role == BarRole::kTrainingPerEpoch) {
    if (train_advance_seq_ == seq_) settled_.reset();
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
    case CounterKind::kPerEpoch: {
      if (counter.epoch) first_epoch_ = counter.first_epoch();
      set_context(EvidenceSource::kCounter, Phase::kTrainStep, text, line);
      if (!counter.n) break;
      if (counter.kind == CounterKind::kGlobal || first_epoch_ == true) {
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
    case CounterKind::kEpoch: first_epoch_ = counter.first_epoch(); break;
    case CounterKind::kSaveName:
      if (counter.n) {
        set_step(EvidenceSource::kSaveName, *counter.n, text, line);
        last_saved_step_ = *counter.n;
      }
      break;
  }
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
  settled_.reset();
  if (open_) {
    open_->event.recovered = true;
    close_incident();
  }
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
      settled_.reset();
      watch_.reset();
      if (!match.job.empty() && options_.job_name.empty()) job_name_.assign(match.job);
      bars_.clear();
      train_n_.reset();
      first_epoch_.reset();
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
    case MarkerEffect::kTracebackHeader: traceback_seq_ = seq_; break;
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
  // "CUDA out of memory ..." then "attempting to recover from OOM" / "retrying with batch 2":
  // the back-off is the trainer's verdict on the OOM it just printed, one recovered incident.
  if (open_ && pattern.recovered && !open_->own_incident && !open_->event.recovered &&
      seq_ - open_->last_signal_seq <= kBackoffReach &&
      top_level_frame_seq_ < open_->traceback_from_seq) {
    open_->event.recovered = true;
    open_->own_incident = true;
    open_->last_signal_seq = seq_;
    if (open_->signal_phase == Phase::kUnknown) open_->signal_phase = pattern.phase;
    return;
  }
  if (open_) close_incident();
  // The rest of an incident that settle() already reported (its traceback's last line, say).
  if (settled_ && !pattern.recovered && seq_ - settled_->last_signal_seq <= kIncidentWindow &&
      can_merge(*settled_, match.kind, figures, rank)) {
    settled_->last_signal_seq = seq_;
    last_incident_end_seq_ = seq_;
    return;
  }

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
  if (node_ && seq_ - node_->seq <= kTracebackLookback) incident.node = node_;
  incident.own_incident = pattern.recovered;
  incident.awaiting_continuation = pattern.allocator_message && looks_incomplete(message);
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

namespace {

Evidence to_evidence(const auto& clue) { return Evidence{clue.line, clue.source, clue.text}; }

}  // namespace

// The phase, by precedence (docs/detection.md "Phase precedence"): what the OOM line itself names;
// the traceback's frames that name a stage (the innermost activity wins); a UI node type; a failure
// line after the error; the newest marker, counter or bar before the error; what the traceback's
// entry points and script names suggest; a training bar drawn after the error.
// The step: the newest step evidence before the error (a training bar, a counter, a marker naming
// its step, a save name); else a training bar drawn after the error (tqdm's close() at exit).
void LogAnalyzer::close_incident() {
  Incident& incident = *open_;
  OomEvent& event = incident.event;
  Phase phase = incident.signal_phase;
  if (phase != Phase::kUnknown) {
    event.phase_evidence =
        Evidence{event.line, EvidenceSource::kMarker, evidence_text(event.message)};
  }
  // The innermost frame that names a stage wins (a sample inside the training loop is sampling,
  // a save inside "_maybe_log_save_evaluate" is saving), with two exceptions: training-step code
  // runs inside evaluation too (compute_loss under prediction_step), so a training frame wins
  // only when no other stage is named; and a model moved to the device (Module._apply) belongs
  // to the stage that moved it. Frames of the error's own traceback come before later ones.
  auto best_frame = [&](bool strong) -> const Clue* {
    const Clue* best = nullptr;
    auto rank = [&](const Clue& frame) {
      return std::tuple(frame.seq <= incident.last_signal_seq, frame.phase != Phase::kTrainStep,
                        !frame.device_move, frame.seq);
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
  auto clue_of = [](const std::optional<Clue>& clue) { return clue ? &*clue : nullptr; };
  const Clue* const by_precedence[] = {best_frame(true),           clue_of(incident.node),
                                       clue_of(incident.epilogue), clue_of(incident.context),
                                       best_frame(false),          clue_of(incident.after_bar)};
  for (const Clue* clue : by_precedence) {
    if (phase != Phase::kUnknown) break;
    if (clue && clue->phase != Phase::kUnknown) {
      phase = clue->phase;
      event.phase_evidence = to_evidence(*clue);
    }
  }
  event.phase = phase;
  const Clue* step =
      incident.step ? &*incident.step : (incident.after_bar ? &*incident.after_bar : nullptr);
  if (step && step->step) {
    event.step = step->step;
    event.step_evidence = to_evidence(*step);
  }
  if (!event.figures.gpu_index && gpu_hint_ && gpu_hint_seq_ >= incident.first_seq) {
    event.figures.gpu_index = gpu_hint_;
  }
  last_event_seq_ = incident.first_seq;
  last_incident_end_seq_ = incident.last_signal_seq;
  last_event_recovered_ = event.recovered;
  events_.push_back(std::move(event));
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

LogAnalysis LogAnalyzer::finish() {
  splitter_.finish([this](const Record& record) { on_record(record); });
  flush_pending_frame();
  const bool had_events = open_.has_value() || last_event_seq_ >= 0;
  if (open_) close_incident();

  LogAnalysis analysis = job_facts();
  analysis.bytes = splitter_.bytes();
  analysis.lines = splitter_.lines();
  analysis.records = static_cast<uint64_t>(seq_);
  analysis.truncated_records = splitter_.truncated_records();
  analysis.binary_bytes = binary_bytes_;

  analysis.outcome = decide_outcome(had_events);
  analysis.events = std::move(events_);
  events_.clear();
  return analysis;
}

Outcome LogAnalyzer::decide_outcome(bool had_events) const {
  const bool progress_after_oom = went_on_seq_ > last_event_seq_;
  const bool training_finished =
      train_n_ && train_total_ && *train_total_ > 0 && *train_n_ >= *train_total_;
  if (stop_seq_ >= 0 && stop_seq_ >= crash_seq_ && stop_seq_ >= last_event_seq_) {
    return Outcome::kStopped;
  }
  if (had_events && !progress_after_oom &&
      (!last_event_recovered_ || crash_seq_ > last_event_seq_)) {
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

namespace {

template <class Clue>
nlohmann::json clue_json(const std::optional<Clue>& clue) {
  if (!clue) return nullptr;
  return {{"source", to_string(clue->source)},
          {"phase", static_cast<int>(clue->phase)},
          {"step", opt(clue->step)},
          {"seq", clue->seq},
          {"line", clue->line},
          {"text", clue->text}};
}

template <class Clue>
void read_clue(const nlohmann::json& j, const char* key, std::optional<Clue>& out) {
  if (!j.contains(key) || !j[key].is_object()) return;
  const nlohmann::json& c = j[key];
  Clue clue;
  clue.source =
      evidence_source_from_string(c.value("source", "")).value_or(EvidenceSource::kMarker);
  const int phase = c.value("phase", 0);
  clue.phase = phase >= 0 && phase <= static_cast<int>(Phase::kSaving) ? static_cast<Phase>(phase)
                                                                       : Phase::kUnknown;
  read_opt(c, "step", clue.step);
  clue.seq = c.value("seq", int64_t{-1});
  clue.line = c.value("line", int64_t{0});
  clue.text = c.value("text", std::string());
  out = std::move(clue);
}

}  // namespace

// v2 carries the evidence (the newest context and step clue); a v1 checkpoint is read for its
// counters and outcome only.
std::string LogAnalyzer::checkpoint() const {
  nlohmann::json j = {
      {"v", 2},
      {"seq", seq_},
      {"train_n", opt(train_n_)},
      {"train_total", opt(train_total_)},
      {"train_advance_seq", train_advance_seq_},
      {"first_epoch", opt(first_epoch_)},
      // A resumed analyzer re-reads the open incident from its start: give it the evidence
      // as it stood there, not what the incident's own lines added since.
      {"context", clue_json(open_ ? open_->context : context_)},
      {"step", clue_json(open_ ? open_->step : step_)},
      {"resume_step", opt(resume_step_)},
      {"printed_total_steps", opt(printed_total_steps_)},
      {"crash_seq", crash_seq_},
      {"stop_seq", stop_seq_},
      {"completed_seq", completed_seq_},
      {"last_event_seq", last_event_seq_},
      {"last_event_recovered", last_event_recovered_},
      {"went_on_seq", went_on_seq_},
      {"run_start_seq", run_start_seq_},
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
  const int version = j.is_object() ? j.value("v", 0) : 0;
  if (j.is_discarded() || (version != 1 && version != 2)) return;
  // A checkpoint from an older or damaged store is ignored: the file is read with no context.
  try {
    seq_ = j.value("seq", int64_t{0});
    read_opt(j, "train_n", train_n_);
    read_opt(j, "train_total", train_total_);
    train_advance_seq_ = j.value("train_advance_seq", int64_t{-1});
    read_opt(j, "resume_step", resume_step_);
    read_opt(j, "printed_total_steps", printed_total_steps_);
    crash_seq_ = j.value("crash_seq", int64_t{-1});
    stop_seq_ = j.value("stop_seq", int64_t{-1});
    completed_seq_ = j.value("completed_seq", int64_t{-1});
    last_event_seq_ = j.value("last_event_seq", int64_t{-1});
    last_event_recovered_ = j.value("last_event_recovered", false);
    any_text_ = j.value("any_text", false);
    if (options_.job_name.empty()) job_name_ = j.value("job_name", std::string());
    if (j.contains("votes") && j["votes"].is_array() &&
        j["votes"].size() == trainer_votes_.size()) {
      for (size_t i = 0; i < trainer_votes_.size(); ++i)
        trainer_votes_[i] = j["votes"][i].get<int>();
    }
    if (version == 2) {
      read_opt(j, "first_epoch", first_epoch_);
      read_clue(j, "context", context_);
      read_clue(j, "step", step_);
      went_on_seq_ = j.value("went_on_seq", int64_t{-1});
      run_start_seq_ = j.value("run_start_seq", int64_t{-1});
    } else {
      went_on_seq_ = train_advance_seq_;  // v1 had no proof of training going on: keep its view
    }
  } catch (const nlohmann::json::exception&) {
    *this = LogAnalyzer(options_);
    splitter_.start_at(offset, line);
  }
}

bool parser_patterns_ok(std::string* error) {
  // The OOM table last: a caller may be compiling it on another thread meanwhile (main.cc).
  return oom_figures_ok(error) && line_cleaner_ok(error) && context_patterns_ok(error) &&
         counter_patterns_ok(error) && progress_patterns_ok(error) && line_literals_ok(error) &&
         oom_patterns_ok(error);
}

LogAnalysis analyze_log(std::string_view bytes, AnalyzerOptions options) {
  LogAnalyzer analyzer(std::move(options));
  analyzer.feed(bytes);
  return analyzer.finish();
}

}  // namespace oomtriage::parsers
