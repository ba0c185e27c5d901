// parsers/event.h
//
// The facts the log analyzer produces: one OomEvent per out-of-memory incident and one
// LogAnalysis per log. Everything above parsers/ (triage, the store, alerts, `scan --json`)
// consumes these types, so their field names follow the JSON contract in docs/design.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomtriage::parsers {

enum class OomKind {
  kCuda,
  kHip,
  kMps,
  kXpu,
  kCublas,
  kCudnn,
  kNccl,
  kHostKilled,
  kHostMemoryError,
  kShm,
};

// Where in the job's life the incident happened. kSampling covers every non-training pass
// inside a run: preview images, the baseline sample, validation and evaluation.
enum class Phase {
  kUnknown,
  kModelLoad,
  kQuantize,
  kCacheLatents,
  kCacheTextEmbeddings,
  kTrainStep,
  kSampling,
  kSaving,
};

// Where a verdict came from (the Evidence below).
enum class EvidenceSource { kBar, kCounter, kMarker, kFrame, kNode, kEpilogue, kSaveName };

enum class Outcome { kUnknown, kRunning, kCompleted, kStopped, kCrashedOom, kCrashedOther };

enum class Trainer {
  kUnknown,
  kAiToolkit,
  kSdScripts,
  kDiffusers,
  kSimpleTuner,
  kOneTrainer,
  kTransformers,
  kComfyUi,
};

std::string_view to_string(OomKind kind);
std::string_view to_string(Phase phase);
std::string_view to_string(Outcome outcome);
std::string_view to_string(Trainer trainer);
std::string_view to_string(EvidenceSource source);
std::optional<EvidenceSource> evidence_source_from_string(std::string_view name);
// A trainer as people name it: the contract's names, any case, '_' for '-', and aliases ("kohya"
// is sd-scripts, "aitk" ai-toolkit, "hf" transformers); "auto" is kUnknown.
std::optional<Trainer> trainer_from_string(std::string_view name);
// The names and main aliases, for a "did you mean".
std::vector<std::string> trainer_names();

struct OtherProcess {
  int64_t pid = 0;
  uint64_t bytes = 0;
  bool operator==(const OtherProcess&) const = default;
};

// Allocator figures. An absent figure is nullopt, never 0: "0 bytes is free" is a real 0.
struct MemoryFigures {
  std::optional<int> gpu_index;
  std::optional<uint64_t> tried_to_allocate_bytes;
  std::optional<uint64_t> total_capacity_bytes;
  std::optional<uint64_t> free_bytes;
  std::optional<uint64_t> allocated_by_pytorch_bytes;
  std::optional<uint64_t> reserved_unallocated_bytes;
  std::optional<uint64_t> reserved_total_bytes;
  std::optional<uint64_t> this_process_in_use_bytes;
  std::vector<OtherProcess> other_processes;

  bool has_any() const;
  // Fills every figure that is absent here from `other`.
  void fill_from(const MemoryFigures& other);
  bool operator==(const MemoryFigures&) const = default;
};

// Where a verdict came from, for people: the line that named the phase or showed the step.
struct Evidence {
  int64_t line = 0;  // 1-based
  EvidenceSource source = EvidenceSource::kMarker;
  std::string text;  // the line, cleaned and cut to a readable length
  bool operator==(const Evidence&) const = default;
};

struct OomEvent {
  OomKind kind = OomKind::kCuda;
  bool recovered = false;
  Phase phase = Phase::kUnknown;
  std::optional<int64_t> step;
  std::optional<int64_t> total_steps;
  MemoryFigures figures;
  int64_t line = 0;     // 1-based; lines end at '\n'
  uint64_t offset = 0;  // byte offset of the record holding the message
  std::optional<std::string> exception;
  std::string message;
  std::optional<Evidence> phase_evidence;
  std::optional<Evidence> step_evidence;
  // 0 as first reported. A follower reports an incident when its log goes quiet (settle()); when
  // more of it arrives later and changes the verdict, the event is reported again, at the same
  // offset, with the next revision: the amendment that replaces the stored one.
  int revision = 0;
  bool operator==(const OomEvent&) const = default;
};

// Training arguments the log itself prints (kohya, diffusers, HF Trainer); used when the job has
// no config file.
struct PrintedArguments {
  std::optional<int> batch_size;
  std::optional<int> gradient_accumulation;
  std::optional<int> resolution;
  std::optional<bool> gradient_checkpointing;
  bool any() const {
    return batch_size || gradient_accumulation || resolution || gradient_checkpointing;
  }
};

struct LogAnalysis {
  Trainer trainer = Trainer::kUnknown;
  Outcome outcome = Outcome::kUnknown;
  std::vector<OomEvent> events;
  std::optional<std::string>
      job_name;                // as the log itself names it (AI Toolkit's "# Running job:")
  std::string printed_config;  // the process config AI Toolkit prints as JSON at start, if any
  PrintedArguments arguments;
  // Every argument a printed `Namespace(...)` or `TrainingArguments(` block shows, as printed.
  std::vector<std::pair<std::string, std::string>> printed_arguments;
  std::optional<std::string> named_config;          // kohya's `Loading settings from X...`
  std::optional<std::string> named_dataset_config;  // `Loading dataset config from X`
  uint64_t bytes = 0;
  int64_t lines = 0;
  uint64_t records = 0;
  uint64_t truncated_records = 0;  // records cut at the analyzer's record size limit
  uint64_t binary_bytes = 0;       // NUL and other control bytes that no text log has
};

}  // namespace oomtriage::parsers
