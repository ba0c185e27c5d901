// tests/fuzz/config_patch_fuzz.cc: `oomtriage fix`'s YAML and JSON patchers on arbitrary
// configs, with the changes the ranker proposes (set, insert, create a section, list values).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "triage/config_patch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using oomtriage::triage::ConfigChange;
  static const std::vector<ConfigChange> kChanges = {
      {"config.process[0].train.gradient_checkpointing", "false", "true"},
      {"config.process[0].train.batch_size", "4", "2"},
      {"config.process[0].datasets[0].resolution", "[512,768,1024]", "[512,768]"},
      {"config.process[0].model.model_kwargs.match_target_res", "false", "true"},
      {"config.process[0].model.qtype", "\"qfloat8\"", "\"uint4\""},
      {"env.PYTORCH_CUDA_ALLOC_CONF", "null", "\"expandable_segments:True\""},
  };
  for (const ConfigChange& change : kChanges) {
    const auto yaml = oomtriage::triage::patch_yaml(text, {change});
    if (yaml.text) (void)oomtriage::triage::unified_diff(text, *yaml.text, "a", "b");
    (void)oomtriage::triage::patch_json(text, {change});
  }
  return 0;
}
