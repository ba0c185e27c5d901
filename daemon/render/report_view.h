// daemon/render/report_view.h
//
// One job's story as `report` tells it, whatever the output: the text on a terminal
// (text_report.h), the JSON (json_report.h, with the store's rows), the HTML page (html_report.h)
// and the Markdown for chat (markdown_report.h) are each drawn from this, so they say the same
// things. Built by daemon/cli/report_command.cc from the store's rows (and the loss the job's
// files show).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/store.h"
#include "parsers/loss_curve.h"
#include "triage/gpu_timeline.h"

namespace oomtriage::daemon {

struct RunView {
  int number = 0;  // 1 for the job's first run
  int64_t id = 0;  // the store's
  std::string log_path;
  std::string outcome;
  std::string started_at;  // RFC 3339
  std::string updated_at;
  // Fixes this run carried from the previous run's crash, and how that went.
  std::vector<std::string> carried_fixes;
  std::string carried_result;
  // "attempt 2/3: train.batch_size 2 -> 1, resumed at step 500, crashed_oom (...)" for runs of
  // `oomtriage run --heal` or the daemon's healing; "" otherwise.
  std::string attempt;
};

struct SnapshotView {
  int64_t id = 0;
  std::string path;
  std::string sha256;
  std::string seen_at;
  std::string diff_from_previous;  // unified diff; "" for the first
};

struct LossCurve {
  std::vector<parsers::LossPoint> points;
  std::string source;  // "loss_log.db", "the log's progress bar", or "" when none was found
};

// One run's GPU memory on one card, as the daemon or `run` sampled it (triage/gpu_timeline.h).
struct GpuMemoryView {
  int run_number = 0;
  int64_t run_id = 0;
  unsigned gpu = 0;
  uint64_t total_bytes = 0;
  uint64_t peak_bytes = 0;
  std::string peak_phase;
  std::optional<int64_t> peak_step;
  uint64_t others_peak_bytes = 0;  // other processes on the card, at most
  std::vector<std::pair<std::string, uint64_t>> phase_peaks;  // in the order the run ran them
  std::vector<triage::GpuPoint> points;
  std::vector<triage::GpuGap> gaps;  // times the card did not answer NVML
};

// The job as it is now (issue 47): its summary with the newest run's live state and the marks
// that stay, and the time the page was made (how long a stalled log has been silent).
struct LiveView {
  db::JobSummary job;
  int64_t now = 0;
};

// "peak 22.08 GiB of 24.00 GiB (92%) in sampling at step 30": one line for every face.
std::string gpu_peak_text(const GpuMemoryView& gpu);

struct ReportView {
  std::string name;      // as people see it: "my_lora (col/b)" where another job shares the name
  std::string job_name;  // as the job calls itself ("my_lora"): its training bar's description
  // How to ask for this job again: "oomtriage report 'my_lora (col/b)' --host gpu07".
  std::string report_command;
  std::string trainer;
  std::string model_family;
  std::string outcome;
  std::string log_dir;
  std::string host;  // "" for a node's own store
  std::string made_at;
  std::vector<RunView> runs;
  std::vector<SnapshotView> snapshots;
  // As `report --json` has them: the scan shape plus run_id, snapshot_id and stored_at.
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  nlohmann::ordered_json fixes = nlohmann::ordered_json::array();  // the last incident's, ranked
  bool completed_since = false;  // a later run completed: the fixes are no longer to do
  LossCurve loss;
  // The job's log was already there when the daemon first started, and it began at its end (no
  // backfill): the crash may be in the part it did not read.
  std::optional<std::string> unread_log;
  std::vector<GpuMemoryView> gpu_memory;  // oldest run first
  // Links (href, text) above the HTML page's title: set by `oomtriage serve`, empty in files.
  std::vector<std::pair<std::string, std::string>> nav;
  // Set by `oomtriage serve` (daemon/render/live_html.h): the HTML page's "Now" section.
  std::optional<LiveView> live;

  // The job's run number of a store run id (0 when unknown).
  int run_number(int64_t run_id) const {
    for (const RunView& run : runs) {
      if (run.id == run_id) return run.number;
    }
    return 0;
  }
};

// GPU memory at a crash, from an event's allocator figures.
struct MemoryAtCrash {
  uint64_t capacity = 0;  // 0 when the message gave no figures
  uint64_t in_use = 0;    // by the crashed process
  uint64_t other = 0;     // other processes and the driver: what is neither in use nor free
  std::optional<uint64_t> free;
  uint64_t tried = 0;
};
MemoryAtCrash memory_at_crash(const nlohmann::ordered_json& event);

// An event's or a fix's field as text ("" when absent or null; numbers as JSON writes them), and
// as an integer when it is one.
std::string text_of(const nlohmann::ordered_json& object, const char* key);
std::optional<int64_t> integer_of(const nlohmann::ordered_json& object, const char* key);
// "cuda in sampling, step 500/3000", with " (recovered)" for a recovered one.
std::string event_title(const nlohmann::ordered_json& event);
// At most `max` bytes, cut at a character boundary (never inside a UTF-8 sequence), with "…".
std::string cut(std::string_view text, size_t max);

// `text` as one shell word: as it is when it is plain, else in single quotes.
std::string shell_quote(std::string_view text);

}  // namespace oomtriage::daemon
