// parsers/analyzer_checkpoint.cc: where a stream can be resumed after a restart and the context a
// resumed analyzer needs, saved as JSON by checkpoint() and read back by the resuming constructor.
#include "parsers/log_analyzer.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "parsers/log_analyzer_internal.h"

namespace oomtriage::parsers {

uint64_t LogAnalyzer::resume_offset() const {
  uint64_t offset = splitter_.pending_record_offset();
  if (has_pending_frame_) offset = std::min(offset, pending_offset_);
  if (const Incident* open = still_open()) offset = std::min(offset, open->record_offset);
  return offset;
}

int64_t LogAnalyzer::resume_line() const {
  int64_t line = splitter_.pending_record_line();
  if (has_pending_frame_) line = std::min(line, pending_line_);
  if (const Incident* open = still_open()) line = std::min(line, open->record_line);
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
      {"saw_epoch_zero", saw_epoch_zero_},
      // A resumed analyzer re-reads the open incident from its start: give it the evidence
      // as it stood there, not what the incident's own lines added since.
      {"context", clue_json(still_open() ? still_open()->context : context_)},
      {"step", clue_json(still_open() ? still_open()->step : step_)},
      {"resume_step", opt(resume_step_)},
      {"printed_total_steps", opt(printed_total_steps_)},
      {"crash_seq", crash_seq_},
      {"stop_seq", stop_seq_},
      {"completed_seq", completed_seq_},
      // The open incident is read again, so the last event is the one before it; its event,
      // when reported, goes on from its revision.
      {"last_event_seq", last_event_seq_},
      {"last_event_recovered", last_event_recovered_},
      {"open_event_offset",
       open_ && open_->reported ? nlohmann::json(open_->reported->offset) : nlohmann::json()},
      {"open_event_revision", open_ && open_->reported ? open_->reported->revision : 0},
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
      saw_epoch_zero_ = j.value("saw_epoch_zero", false);
      read_clue(j, "context", context_);
      read_clue(j, "step", step_);
      went_on_seq_ = j.value("went_on_seq", int64_t{-1});
      run_start_seq_ = j.value("run_start_seq", int64_t{-1});
      read_opt(j, "open_event_offset", resumed_event_offset_);
      resumed_event_revision_ = j.value("open_event_revision", 0);
    } else {
      went_on_seq_ = train_advance_seq_;  // v1 had no proof of training going on: keep its view
    }
  } catch (const nlohmann::json::exception&) {
    *this = LogAnalyzer(options_);
    splitter_.start_at(offset, line);
  }
}

}  // namespace oomtriage::parsers
