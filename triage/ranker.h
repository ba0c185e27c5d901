// triage/ranker.h
//
// Ranks the fixes for one log: which OOM it was (kind, phase, step, figures), the job's config
// (parsers/job_config.h, any trainer) and what is already applied. The rules are the seed
// guide's (docs/domain.md), kept as data in ranking_table(): gradient checkpointing first when
// it is off; cheaper previews for a sampling OOM; the top resolution bucket for an OOM at a
// random later step; a smaller batch with more gradient accumulation for an early OOM;
// quantization, low_vram and offloading for a load/quantize OOM; free the GPU, expandable
// segments, host memory and /dev/shm for the causes no config change fixes. A fix already
// applied, one the trainer cannot express, or one that would claim a value the job does not
// show is never proposed (an unknown value gives a fix that says what to check). Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "triage/fix.h"
#include "triage/memory_pressure.h"

namespace oomtriage::triage {

// The situations the ranking table knows, in the order they are considered.
enum class Situation {
  kShm,
  kHost,
  kOtherProcesses,
  kFragmentation,
  kCheckpointingOff,
  kQuantize,
  kLoad,
  kCacheTextEmbeddings,
  kCacheLatents,
  kSampling,
  kTrainLaterBuckets,
  kTrainBatch,
  kTrainBatchOne,
  kTrainAny,
};

// One row of the ranking table: when it applies (in words, for docs/ranking.md) and the candidate
// fixes with their priority (lower first). Every matching row adds its candidates; a fix id
// proposed twice keeps its first placement. Candidates are then ordered: the fixes of rows that
// `lead` (the seed guide's rules) first, by priority, whatever the memory model predicts of each
// alone (a plan of several comes before them when none fits alone: triage/planner.h); then the
// others by fit (fits by the memory model, not estimated, cannot fit), priority, confidence.
struct RankingRow {
  Situation situation;
  std::string_view when;
  std::vector<std::pair<std::string_view, int>> fixes;
  bool leads = false;
};
const std::vector<RankingRow>& ranking_table();

// The table as docs/ranking.md shows it (a Markdown table).
std::string ranking_table_markdown();

// What the ranker needs of one moment of memory pressure (a crash, a prediction, a near-OOM
// warning). Commands and the daemon do not fill it themselves: they call triage/triage_job.h,
// the one path from an analysis, a job and its history to fixes.
struct TriageInput {
  const MemoryPressure* pressure = nullptr;
  parsers::Trainer trainer = parsers::Trainer::kUnknown;
  parsers::PrintedArguments arguments;         // what the log prints of the training arguments
  const parsers::JobConfig* config = nullptr;  // null: no config, or it did not parse
  std::string config_problem;  // why there is no config, in words, for the fixes' "why"
  // Fixes the job's previous run carried before it crashed again in the same phase: they go
  // after every other candidate, so the next lever leads (cheaper previews -> previews off).
  std::vector<std::string> tried_and_failed;
};

// The event the fixes answer: the last OOM that was not recovered, else the last one.
const parsers::OomEvent* incident_to_fix(const parsers::LogAnalysis& analysis);

// The config a log alone shows when the job has no config: the trainer, the training arguments
// it prints (batch, accumulation, checkpointing, resolution), every other knob unknown; fixes
// are written for the trainer's command line (AI Toolkit: its YAML paths).
parsers::JobConfig config_from_log(parsers::Trainer trainer, const parsers::PrintedArguments& args);

std::vector<Fix> rank_fixes(const TriageInput& input);

}  // namespace oomtriage::triage
