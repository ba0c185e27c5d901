// parsers/log_analyzer.cc: the analyzer's record dispatch and its public entry points. Each record
// is either a progress frame (most of a log, handled without regexes; the last frame of a run of
// one bar waits and is parsed alone), or text that passes a literal prefilter and is then cleaned
// and matched against the context and OOM tables, or noise that is skipped. What a match does is
// in the other parts: analyzer_bars.cc (bars and counters), analyzer_markers.cc (the context
// table's markers), analyzer_incidents.cc (signals, incidents, the outcome), analyzer_job_facts.cc
// and analyzer_checkpoint.cc.
#include "parsers/log_analyzer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "parsers/context_patterns.h"
#include "parsers/frame_runs.h"
#include "parsers/line_cleaner.h"
#include "parsers/line_literals.h"
#include "parsers/log_analyzer_internal.h"
#include "parsers/oom_figures.h"
#include "parsers/oom_patterns.h"
#include "parsers/progress.h"
#include "parsers/stage_lexicon.h"
#include "parsers/step_counters.h"

namespace oomtriage::parsers {
namespace {

// Trainers print their arguments and config files near the top: this many records are read for
// them.
constexpr int64_t kJobFactRecords = 5000;

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
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

// Where a "[rankN]:" prefix starts inside a line rather than at its start, or npos.
size_t glued_rank_prefix(std::string_view text) {
  for (size_t at = text.find("[rank", 1); at != std::string_view::npos;
       at = text.find("[rank", at + 1)) {
    size_t i = at + 5;
    const size_t digits = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i > digits && i + 1 < text.size() && text[i] == ']' && text[i + 1] == ':') return at;
  }
  return std::string_view::npos;
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
    // Text has none: without -mpopcnt the count is a libgcc call, so it is made only when needed.
    if (mask != 0) count += static_cast<uint64_t>(__builtin_popcount(static_cast<unsigned>(mask)));
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
  // Two ranks' writes on one line: "    loss = model(batch).loss[rank1]: torch.OutOfMemoryError:".
  if (const size_t glued = glued_rank_prefix(text); glued != std::string_view::npos && depth < 8) {
    process_text(text.substr(0, glued), offset, line, depth + 1);
    process_text(text.substr(glued), offset + glued, line, depth + 1);
    return;
  }
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
  // A coloured Rich bar is read once its escapes are gone; an uncoloured one was read above.
  const bool coloured_bar = text.find('\x1b') != std::string_view::npos &&
                            text.find("\xe2\x94\x81") != std::string_view::npos;
  if (!awaiting && !oom_literal && !context_literal && !counter_literal && !announcing &&
      !source_line && !open_ && !coloured_bar) {
    return;
  }
  const CleanLine clean = clean_line(text, scratch_);
  if (open_ && !open_->event.recovered && !open_->own_incident &&
      seq_ - open_->last_signal_seq <= 3 && is_bare_backoff(clean.text)) {
    // "Skipping batch" under the OOM it skips (fairseq before 0.10): a recovered OOM.
    mark_backed_off(*open_, seq_, Phase::kTrainStep);
    open_->awaiting_continuation = false;
    return;
  }
  if (awaiting && try_continue_message(clean.text)) {
    return;
  }
  if (coloured_bar) {
    if (auto frame = parse_progress_frame(clean.text)) {
      if (open_) open_->awaiting_continuation = false;
      on_frame(*frame, clean.text, line);
      return;
    }
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
  if (const std::string_view code = ipython_statement(clean.text); !code.empty()) {
    // A notebook's traceback: the statement its cell or frame ran, the innermost last.
    if (const FrameEvidence statement = statement_evidence(code);
        statement.phase != Phase::kUnknown) {
      remember_frame(frames_, Clue{EvidenceSource::kFrame, statement.phase, std::nullopt, seq_,
                                   line, evidence_text(clean.text), statement.strong});
    }
    return;
  }
  if (auto frame = traceback_frame(clean.text)) {
    remember_frame(frames_, Clue{EvidenceSource::kFrame, frame->phase, std::nullopt, seq_, line,
                                 evidence_text(clean.text), frame->strong});
    source_line_next_ = frame->wants_source_line;
    if (frame->top_level) top_level_frame_seq_ = seq_;
    return;
  }
  if (!source_line && calls_backward(clean.text) && !is_exception_line(clean.text)) {
    // The backward call of a traceback whose frame line was cut or wrapped away.
    remember_frame(frames_, Clue{EvidenceSource::kFrame, Phase::kTrainStep, std::nullopt, seq_,
                                 line, evidence_text(clean.text), true});
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
    if (phase != Phase::kUnknown) {
      set_context(EvidenceSource::kMarker, phase, clean.text, line);
    } else if (announces_unnamed_caching(clean.text) ||
               (!untagged.empty() && announces_unnamed_caching(untagged))) {
      set_context(EvidenceSource::kMarker, Phase::kUnknown, clean.text, line);  // what ran is over
    }
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
    // A memory summary that counted OOMs, in a log that showed none of them.
    if (!open_ && last_event_seq_ < 0 && memory_summary_ooms(clean.text).value_or(0) > 0) {
      on_signal(OomMatch{&memory_summary_pattern(), OomKind::kCuda, 0}, clean.text, clean.rank,
                offset, line);
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

Result<Ok> parser_patterns_ok() {
  // The OOM table last: a caller may be compiling it on another thread meanwhile (main.cc).
  OOMTRIAGE_TRY(oom_figures_ok());
  OOMTRIAGE_TRY(line_cleaner_ok());
  OOMTRIAGE_TRY(context_patterns_ok());
  OOMTRIAGE_TRY(counter_patterns_ok());
  OOMTRIAGE_TRY(progress_patterns_ok());
  OOMTRIAGE_TRY(line_literals_ok());
  return oom_patterns_ok();
}

LogAnalysis analyze_log(std::string_view bytes, AnalyzerOptions options) {
  LogAnalyzer analyzer(std::move(options));
  analyzer.feed(bytes);
  return analyzer.finish();
}

}  // namespace oomtriage::parsers
