// triage/fix.h
//
// A ranked fix for one job: the stable id (docs/design.md lists them), the exact changes in the
// trainer's own syntax and where they are written, why it applies to this job, its cost and,
// where the memory model can tell, the predicted peak.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/job_config.h"

namespace oomtriage::triage {

// One change in the job's own syntax, and where it is written:
//   yaml/json (AI Toolkit)  "config.process[0].train.gradient_checkpointing"
//   toml/json (others)      "gradient_checkpointing", in `table` ("datasets[0]", "general")
//   args                    "--train_batch_size"
//   env                     "env.PYTORCH_CUDA_ALLOC_CONF"
// Values are typed (null, a bool, a number, text, a list), as a config file holds them, so that
// they keep their type from the planner to the file they are written to; a `to` of null removes
// the key (or the flag).
struct ConfigChange {
  std::string path;
  nlohmann::json from;  // the current value; null when absent
  nlohmann::json to;
  parsers::TargetKind kind = parsers::TargetKind::kYaml;
  std::string file;      // the file it is written to; "" when the config was only printed
  std::string table;     // TOML: the table holding the key ("" at the root)
  bool neutral = false;  // still in the ranker's vocabulary (triage/native_changes.h converts)
};

struct Fix {
  std::string id;
  int rank = 0;
  std::string title;
  std::string why;
  std::vector<ConfigChange> changes;
  std::string cost;
  std::optional<uint64_t> predicted_peak_bytes;
  std::optional<bool> fits;  // predicted peak under 95% of the usable memory
  std::string estimate;      // how the predicted peak was reached (assumptions, in words)
  double confidence = 0.0;
  // What to check first when the job does not show a value the fix depends on ("the log does
  // not show the batch size: if it is above 1, ...").
  std::string check;
  // A plan (id "combined_plan"): the ids of the fixes it combines, in rank order; its changes are
  // theirs.
  std::vector<std::string> parts;

  // True when at least one change edits the job's config file (yaml, json or toml).
  bool changes_config() const;
  // Where the fix is written: its first change's target; ops when it changes nothing.
  parsers::ConfigTarget target() const;
};

// The fix ids of the contract, in no particular order. Reports, alerts and tests use them.
const std::vector<std::string_view>& known_fix_ids();

bool is_known_fix_id(std::string_view id);

}  // namespace oomtriage::triage
