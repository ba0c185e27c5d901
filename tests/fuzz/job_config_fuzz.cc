// tests/fuzz/job_config_fuzz.cc: the job config readers on arbitrary bytes: AI Toolkit's as
// YAML, JSON and the process config printed in a log; every other trainer's as TOML and JSON;
// a printed Namespace. They must return a view or an error, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "parsers/job_config.h"
#include "parsers/native_config.h"
#include "parsers/printed_arguments.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using oomtriage::parsers::ConfigFormat;
  for (ConfigFormat format :
       {ConfigFormat::kYaml, ConfigFormat::kJson, ConfigFormat::kPrintedProcess}) {
    const auto load = oomtriage::parsers::parse_job_config(text, format, "fuzz");
    if (load) (void)load->all_resolutions();
  }
  using oomtriage::parsers::TargetKind;
  using oomtriage::parsers::Trainer;
  for (Trainer trainer : {Trainer::kSdScripts, Trainer::kSimpleTuner, Trainer::kOneTrainer,
                          Trainer::kTransformers, Trainer::kDiffusers}) {
    const std::string bytes(text);
    (void)oomtriage::parsers::read_native_config(trainer, {{TargetKind::kToml, "c.toml", bytes}});
    (void)oomtriage::parsers::read_native_config(trainer, {{TargetKind::kJson, "c.json", bytes}});
    (void)oomtriage::parsers::read_native_config(
        trainer, {{TargetKind::kToml, "c.toml", "a = 1\n"}, {TargetKind::kToml, "d.toml", bytes}});
    (void)oomtriage::parsers::config_from_printed_arguments(
        trainer, oomtriage::parsers::parse_namespace(text), true, "log");
  }
  return 0;
}
