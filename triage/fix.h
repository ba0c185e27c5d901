// triage/fix.h
//
// A ranked fix for one job: the stable id (docs/design.md lists them), the exact config changes,
// why it applies to this job, its cost and, where the memory model can tell, the predicted peak.
// The ranking rules that produce these arrive with the triage engine; scan prints the list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomtriage::triage {

// A config change ("config.process[0].train.gradient_checkpointing") or an environment change
// ("env.PYTORCH_CUDA_ALLOC_CONF"). Values are JSON text so that null, numbers, strings and lists
// keep their type.
struct ConfigChange {
  std::string path;
  std::string from_json;  // the current value as JSON text ("false", "null" when absent)
  std::string to_json;
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

  // True when at least one change edits the job config (paths under "config.").
  bool changes_config() const;
};

// The fix ids of the contract, in no particular order. Reports, alerts and tests use them.
const std::vector<std::string_view>& known_fix_ids();

bool is_known_fix_id(std::string_view id);

}  // namespace oomtriage::triage
