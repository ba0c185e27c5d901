// tests/fuzz/config_patch_fuzz.cc: `oomtriage fix`'s YAML, JSON and TOML patchers (and the
// read-back check) on arbitrary configs, with the changes the ranker proposes (set, insert,
// create a section, list values, remove a key).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "triage/config_patch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using oomtriage::triage::ConfigChange;
  static const std::vector<ConfigChange> kChanges = {
      {"config.process[0].train.gradient_checkpointing", false, true},
      {"config.process[0].train.batch_size", 4, 2},
      {"config.process[0].datasets[0].resolution", nlohmann::json::array({512, 768, 1024}),
       nlohmann::json::array({512, 768})},
      {"config.process[0].model.model_kwargs.match_target_res", false, true},
      {"config.process[0].model.qtype", "qfloat8", "uint4"},
      {"env.PYTORCH_CUDA_ALLOC_CONF", nullptr, "expandable_segments:True"},
  };
  using oomtriage::parsers::TargetKind;
  static const std::vector<ConfigChange> kNative = {
      {"train_batch_size", 4, 2, TargetKind::kToml, "c.toml", "training_arguments"},
      {"gradient_checkpointing", nullptr, true, TargetKind::kToml, "c.toml", ""},
      {"batch_size", 2, 1, TargetKind::kToml, "d.toml", "datasets[1]"},
      {"resolution", nlohmann::json::array({1024, 768}), nlohmann::json::array({768, 576}),
       TargetKind::kToml, "d.toml", "general"},
      {"sample_prompts", "p.txt", nullptr, TargetKind::kToml, "c.toml", ""},
      {"optimizer", "ADAMW", "ADAMW_8BIT", TargetKind::kJson, "c.json", "optimizer"},
      {"--validation_resolution", "1024x1024", "768x768", TargetKind::kJson, "c.json", ""},
  };
  for (const ConfigChange& change : kChanges) {
    const auto yaml = oomtriage::triage::patch_yaml(text, {change});
    if (yaml) (void)oomtriage::triage::unified_diff(text, *yaml, "a", "b");
    (void)oomtriage::triage::patch_json(text, {change});
    (void)oomtriage::triage::patch_file(TargetKind::kYaml, text, {change});
  }
  for (const ConfigChange& change : kNative) {
    (void)oomtriage::triage::patch_file(change.kind, text, {change});
    (void)oomtriage::triage::patch_toml(text, {change});
  }
  return 0;
}
