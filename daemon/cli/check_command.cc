// daemon/cli/check_command.cc: `check` in order: read what was given (check_input.h), explain
// it or size the card (--gpu, NVML for auto), run the pre-flight, print it
// (render/preflight_output.h) and exit by the verdict.
#include "daemon/cli/check_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>

#include "daemon/cli/check_input.h"
#include "daemon/cli/command_fixes.h"
#include "daemon/common/did_you_mean.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/nvml_probe.h"
#include "daemon/render/preflight_output.h"
#include "daemon/service/fleet_memory.h"
#include "parsers/family_names.h"
#include "parsers/gpu_cards.h"
#include "triage/architectures.h"
#include "triage/preflight.h"
#include "triage/spec_from_config.h"
#include "triage/spec_from_llm.h"

namespace oomtriage::daemon {
namespace {

// "24", "24GB", "RTX 4090", "A100-80GB": the card table's reading (parsers/gpu_cards.h).
Result<uint64_t> card_bytes(const std::string& gpu) {
  Result<uint64_t> bytes = parsers::parse_card_memory(gpu);
  if (!bytes) return make_error(bytes.error().code, "--gpu " + bytes.error().message);
  return bytes;
}

// --gpu auto asks NVML for the card CUDA will use first. Without NVML there is no answer to
// guess: a wrong card size would make every verdict wrong in silence.
Result<uint64_t> card_for(const std::string& gpu) {
  if (gpu != "auto") return card_bytes(gpu);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  auto total = nvml_total_memory(
      cuda_device_index(visible ? std::optional<std::string_view>(visible) : std::nullopt));
  if (!total) {
    return make_error(total.error().code,
                      fmt::format("--gpu auto: {}: give the card's size, e.g. --gpu 24GiB",
                                  total.error().message));
  }
  return *total;
}

Result<CheckInput> read_input(const CheckOptions& options) {
  const int given =
      options.spec.has_value() + options.config.has_value() + !options.command.empty();
  if (given != 1) {
    return make_error(ErrorCode::kBadInput,
                      "check takes one of CONFIG, --spec FILE.json or -- COMMAND ARGS...");
  }
  const parsers::Trainer trainer =
      parsers::trainer_from_string(options.trainer).value_or(parsers::Trainer::kUnknown);
  if (options.spec) return read_spec_input(*options.spec);
  if (options.config) return read_config_input(*options.config, trainer);
  return read_command_input(options.command, trainer);
}

// Values that read but that no training job has: a batch past what any card holds, a
// resolution of 0. An error, not a verdict: the model would price them (or their default) with
// a straight face.
constexpr int kMaxBatch = 65536;
constexpr int kMaxSide = 65536;  // pixels
constexpr int kMaxFrames = 100000;

Result<Ok> within_reason(const CheckInput& input, const triage::MemorySpec& spec,
                         const std::string& source) {
  const auto absurd = [&](const std::string& what) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}: {}", source, what));
  };
  if (input.config) {
    const parsers::JobConfig& c = *input.config;
    if (!c.implausible.empty()) return make_error(ErrorCode::kBadInput, c.implausible.front());
    if (c.knows(parsers::Knob::kBatchSize) &&
        (c.batch_size <= 0 || c.effective_batch_size() > kMaxBatch)) {
      return absurd(fmt::format("batch_size {} is not a batch any card trains (1 to {})",
                                c.batch_size <= 0 ? c.batch_size : c.effective_batch_size(),
                                kMaxBatch));
    }
    for (const parsers::DatasetView& d : c.datasets) {
      if (d.batch_size && (*d.batch_size <= 0 || *d.batch_size > kMaxBatch)) {
        return absurd(
            fmt::format("a dataset's batch_size {} is not a batch any card trains "
                        "(1 to {})",
                        *d.batch_size, kMaxBatch));
      }
      for (const int side : d.resolutions) {
        if (c.knows(parsers::Knob::kResolution) && (side <= 0 || side > kMaxSide)) {
          return absurd(
              fmt::format("resolution {} is not an image size (1 to {} pixels)", side, kMaxSide));
        }
      }
      if (c.knows(parsers::Knob::kNumFrames) && (d.num_frames <= 0 || d.num_frames > kMaxFrames)) {
        return absurd(
            fmt::format("num_frames {} is not a clip length (1 to {})", d.num_frames, kMaxFrames));
      }
    }
  }
  if (spec.batch_size && (*spec.batch_size <= 0 || *spec.batch_size > kMaxBatch)) {
    return absurd(fmt::format("batch_size {} is not a batch any card trains (1 to {})",
                              *spec.batch_size, kMaxBatch));
  }
  for (const auto& side : {spec.width, spec.height}) {
    if (side && (*side <= 0 || *side > kMaxSide)) {
      return absurd(
          fmt::format("resolution {} is not an image size (1 to {} pixels)", *side, kMaxSide));
    }
  }
  if (spec.frames && (*spec.frames <= 0 || *spec.frames > kMaxFrames)) {
    return absurd(
        fmt::format("frames {} is not a clip length (1 to {})", *spec.frames, kMaxFrames));
  }
  return Ok{};
}

// --model over the family the input names: a family the memory model knows, else an error
// with the names it was probably meant to be.
Result<Ok> name_model(const std::string& model, CheckInput& input) {
  triage::MemorySpec probe;
  probe.model_family = model;
  if (const triage::MemoryEstimate e = triage::estimate_memory(probe); !e.model_unknown.empty()) {
    std::vector<std::string> ids;
    for (const std::string_view id : triage::architecture_ids()) ids.emplace_back(id);
    const std::vector<std::string> close = close_matches(model, ids);
    return make_error(
        ErrorCode::kBadInput,
        fmt::format("--model {}: not a family the memory model knows{}", model,
                    close.empty() ? std::string(" (docs/memory-model.md lists them)")
                                  : fmt::format("; did you mean {}?", fmt::join(close, ", "))));
  }
  if (input.spec) input.spec->model_family = model;
  if (input.config) {
    input.config->name_or_path = model;
    input.config->arch.clear();
    input.config->family =
        parsers::family_of_architecture(model).value_or(parsers::family_from_name(model));
  }
  return Ok{};
}

// What reading the input assumed comes before what the model assumed.
void add_assumptions(std::vector<std::string>& to, const std::vector<std::string>& first) {
  to.insert(to.begin(), first.begin(), first.end());
}

}  // namespace

int run_check(const CheckOptions& options) {
  Result<CheckInput> input = read_input(options);
  if (!input) {
    fmt::print(stderr, "oomtriage: {}\n", input.error().message);
    return exit_code_for(input.error());
  }
  if (options.model) {
    if (auto named = name_model(*options.model, *input); !named) {
      fmt::print(stderr, "oomtriage: {}\n", named.error().message);
      return exit_code_for(named.error());
    }
  }
  triage::MemorySpec spec = input->spec ? *input->spec : triage::spec_from_config(*input->config);
  if (!input->spec && input->launch) triage::apply_distributed(spec, *input->launch);
  const std::string source = options.spec     ? *options.spec
                             : options.config ? *options.config
                                              : std::string("the command line");
  if (auto reasonable = within_reason(*input, spec, source); !reasonable) {
    fmt::print(stderr, "oomtriage: {}\n", reasonable.error().message);
    return exit_code_for(reasonable.error());
  }
  if (options.explain) {
    triage::MemoryEstimate estimate = triage::estimate_memory(spec);
    add_assumptions(estimate.assumptions, input->assumptions);
    if (options.json) {
      fmt::print("{}\n", explain_to_json(spec, estimate)
                             .dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("{}", render_explain_text(spec, estimate));
    }
    return kExitOk;
  }
  const Result<uint64_t> card = card_for(options.gpu);
  if (!card) {
    fmt::print(stderr, "oomtriage: {}\n", card.error().message);
    return exit_code_for(card.error());
  }
  const uint64_t usable = triage::usable_bytes(*card);
  // What this fleet's finished runs of the family say of the model; never a store created here.
  triage::MemoryCorrection correction;
  std::error_code ec;
  if (!options.store.empty() && std::filesystem::exists(options.store, ec)) {
    const std::string family = triage::estimate_memory(spec).family;
    if (auto learnt = fleet_correction(options.store, family, *card)) {
      correction = *learnt;
    } else {
      fmt::print(stderr,
                 "oomtriage: note: the fleet's history was not read ({}): the model's "
                 "estimate stands alone\n",
                 learnt.error().message);
    }
    // This config's own crashes outrank the model and the fleet (issue 45).
    if (!input->spec && !input->launch) {
      if (auto evidence = job_evidence(options.store, spec)) {
        correction.evidence = std::move(*evidence);
      }
    }
  }
  triage::Preflight result =
      input->spec     ? triage::preflight_spec(*input->spec, usable, correction)
      : input->launch ? triage::preflight_config(*input->config, *input->launch, usable, correction)
                      : triage::preflight_config(*input->config, usable, correction);
  add_assumptions(result.estimate.assumptions, input->assumptions);
  // A command line's fixes are edits of that command (issue 45).
  std::vector<std::vector<std::string>> commands;
  if (!options.command.empty()) {
    as_edits_of(options.command, result.fixes);
    commands = fixed_commands(options.command, result.fixes);
  }
  if (options.json) {
    fmt::print("{}\n", preflight_to_json(result, *card, commands)
                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", render_preflight_text(result, *card, color_enabled(options.color), commands));
  }
  switch (result.verdict.fit) {
    case triage::Fit::kWillNotFit: return kExitWillNotFit;
    case triage::Fit::kUnknown: return kExitUnknown;
    case triage::Fit::kFits:
    case triage::Fit::kTight: return kExitOk;
  }
  return kExitOk;
}

}  // namespace oomtriage::daemon
