// tests/fuzz/native_config_fuzz.cc: every other trainer's config reader (parsers/native_config.h)
// on arbitrary bytes, as the job registry reads them: a main file and, after the first NUL byte,
// the dataset config kohya's TOML names; each as TOML and as JSON (SimpleTuner's "--" keys,
// OneTrainer's one level of nesting). A view or a one-line error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "parsers/native_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t nul = text.find('\0');
  const std::string main(text.substr(0, nul));
  const std::string dataset(nul == std::string_view::npos ? "" : text.substr(nul + 1));
  using oomtriage::parsers::TargetKind;
  using oomtriage::parsers::Trainer;
  for (Trainer trainer : {Trainer::kSdScripts, Trainer::kSimpleTuner, Trainer::kOneTrainer,
                          Trainer::kTransformers, Trainer::kDiffusers}) {
    for (TargetKind kind : {TargetKind::kToml, TargetKind::kJson}) {
      auto load = oomtriage::parsers::read_native_config(
          trainer, {{kind, "config", main}, {TargetKind::kToml, "dataset.toml", dataset}});
      if (load) (void)load->effective_batch_size();
    }
  }
  return 0;
}
