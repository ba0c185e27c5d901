// triage/fix.cc: the stable fix ids (never rename one; add ids when a real cause needs one).
#include "triage/fix.h"

#include <algorithm>

namespace oomtriage::triage {

const std::vector<std::string_view>& known_fix_ids() {
  static const std::vector<std::string_view> kIds = {
      "enable_gradient_checkpointing",
      "lower_batch_size",
      "drop_top_bucket",
      "lower_resolution",
      "cheapen_previews",
      "disable_sampling",
      "reduce_num_frames",
      "enable_low_vram",
      "quantize_model",
      "quantize_text_encoder",
      "cache_text_embeddings",
      "unload_text_encoder",
      "layer_offloading",
      "cache_latents_to_disk",
      "use_bf16",
      "use_8bit_optimizer",
      "match_target_res",
      "expandable_segments",
      "free_gpu",
      "reduce_host_memory",
      "increase_shm",
      // Added: the baseline sample (before step 1) has its own switch in AI Toolkit.
      "skip_first_sample",
  };
  return kIds;
}

bool Fix::changes_config() const {
  using parsers::TargetKind;
  return std::any_of(changes.begin(), changes.end(), [](const ConfigChange& c) {
    return c.kind == TargetKind::kYaml || c.kind == TargetKind::kJson ||
           c.kind == TargetKind::kToml;
  });
}

parsers::ConfigTarget Fix::target() const {
  if (changes.empty()) return {parsers::TargetKind::kOps, "", ""};
  return {changes.front().kind, changes.front().file, ""};
}

bool is_known_fix_id(std::string_view id) {
  const auto& ids = known_fix_ids();
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace oomtriage::triage
