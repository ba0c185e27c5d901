// tests/triage/memory_model_test.cc: the per-phase memory model (triage/memory_model.h) — each
// term moves the way its physics says, the spec reader refuses what it cannot read, the verdict's
// thresholds — and the dev table: every measured job of ../shared/data/vram/dev.jsonl predicted
// and compared with its stated peak (printed; median error and fits/does-not-fit verdicts held to
// the issue's goals).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/skip.h"
#include "triage/architectures.h"
#include "triage/memory_model.h"
#include "parsers/job_config.h"
#include "triage/memory_spec.h"
#include "triage/preflight.h"
#include "triage/spec_from_config.h"

using namespace oomtriage;
using namespace oomtriage::triage;
using parsers::Phase;

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

MemorySpec flux_lora() {
  MemorySpec spec;
  spec.model_family = "flux1-dev";
  spec.training_type = "lora";
  spec.width = spec.height = 1024;
  spec.batch_size = 1;
  spec.lora_rank = 16;
  spec.gradient_checkpointing = true;
  spec.text_encoder_cached = true;
  spec.quantization = "none";
  spec.dtype = "bf16";
  spec.optimizer = "adamw8bit";
  spec.sampling = SamplingSpec{};
  return spec;
}

uint64_t term(const MemoryEstimate& e, Phase phase, const std::string& name) {
  const PhaseEstimate* p = e.phase(phase);
  REQUIRE(p != nullptr);
  for (const MemoryTerm& t : p->terms) {
    if (t.name == name) return t.bytes;
  }
  return 0;
}

uint64_t train(const MemorySpec& spec) {
  return estimate_memory(spec).phase(Phase::kTrainStep)->peak_bytes;
}

}  // namespace

TEST_CASE("memory model: the terms of a training step add up to its peak") {
  const MemoryEstimate e = estimate_memory(flux_lora());
  for (const PhaseEstimate& p : e.phases) {
    uint64_t sum = 0;
    for (const MemoryTerm& t : p.terms) sum += t.bytes;
    CHECK(sum == p.peak_bytes);
  }
  // FLUX.1's 11.9B parameters in bf16 are about 22 GiB.
  const double weights = term(e, Phase::kTrainStep, "denoiser_weights") / kGiB;
  CHECK(weights > 21.5);
  CHECK(weights < 23);
  CHECK(e.family == "flux1-dev");
  CHECK(e.assumptions.empty());
}

TEST_CASE("memory model: each knob moves its own term") {
  const MemorySpec base = flux_lora();
  const uint64_t base_act = term(estimate_memory(base), Phase::kTrainStep, "activations");

  SUBCASE("checkpointing off keeps every block's activations") {
    MemorySpec s = base;
    s.gradient_checkpointing = false;
    CHECK(term(estimate_memory(s), Phase::kTrainStep, "activations") > 5 * base_act);
  }
  SUBCASE("batch 2 doubles the activations") {
    MemorySpec s = base;
    s.batch_size = 2;
    const double ratio =
        double(term(estimate_memory(s), Phase::kTrainStep, "activations")) / base_act;
    CHECK(ratio == doctest::Approx(2.0).epsilon(0.01));
  }
  SUBCASE("a smaller bucket has fewer tokens") {
    MemorySpec s = base;
    s.width = s.height = 512;
    CHECK(term(estimate_memory(s), Phase::kTrainStep, "activations") < base_act / 2);
  }
  SUBCASE("8-bit weights are about half, 4-bit about a quarter") {
    MemorySpec s = base;
    const uint64_t bf16 = term(estimate_memory(s), Phase::kTrainStep, "denoiser_weights");
    s.quantization = "qfloat8";
    const uint64_t q8 = term(estimate_memory(s), Phase::kTrainStep, "denoiser_weights");
    s.quantization = "nf4";
    const uint64_t q4 = term(estimate_memory(s), Phase::kTrainStep, "denoiser_weights");
    CHECK(double(q8) / bf16 == doctest::Approx(0.52).epsilon(0.05));
    CHECK(double(q4) / bf16 == doctest::Approx(0.3).epsilon(0.1));
  }
  SUBCASE("swapping half the blocks keeps about half the weights on the GPU") {
    MemorySpec s = base;
    s.offload = Offload{"block_swap", 28};
    const double share = double(term(estimate_memory(s), Phase::kTrainStep, "denoiser_weights")) /
                         term(estimate_memory(base), Phase::kTrainStep, "denoiser_weights");
    CHECK(share > 0.45);
    CHECK(share < 0.6);
  }
  SUBCASE("text encoders stay on the GPU unless their outputs are cached") {
    MemorySpec s = base;
    CHECK(term(estimate_memory(s), Phase::kTrainStep, "text_encoder_weights") == 0);
    s.text_encoder_cached = false;
    CHECK(term(estimate_memory(s), Phase::kTrainStep, "text_encoder_weights") / kGiB > 8);
  }
  SUBCASE("a higher rank has more adapter weights, gradients and optimizer states") {
    MemorySpec s = base;
    s.lora_rank = 128;
    CHECK(term(estimate_memory(s), Phase::kTrainStep, "trainable_weights") ==
          doctest::Approx(8.0 * term(estimate_memory(base), Phase::kTrainStep, "trainable_weights"))
              .epsilon(0.01));
  }
  SUBCASE("full fine-tuning holds gradients and two AdamW states per parameter") {
    MemorySpec s = base;
    s.training_type = "full";
    s.optimizer = "adamw";
    const MemoryEstimate e = estimate_memory(s);
    CHECK(term(e, Phase::kTrainStep, "gradients") ==
          term(e, Phase::kTrainStep, "denoiser_weights"));
    CHECK(term(e, Phase::kTrainStep, "optimizer_states") ==
          2 * term(e, Phase::kTrainStep, "denoiser_weights"));
    s.optimizer = "adafactor";  // the fused back pass: one block's gradients at a time
    CHECK(term(estimate_memory(s), Phase::kTrainStep, "gradients") <
          term(e, Phase::kTrainStep, "gradients") / 20);
  }
  SUBCASE("previews off: no sampling phase") {
    MemorySpec s = base;
    s.sampling->enabled = false;
    CHECK(estimate_memory(s).phase(Phase::kSampling) == nullptr);
    CHECK(estimate_memory(base).phase(Phase::kSampling) != nullptr);
  }
}

TEST_CASE("memory model: video tokens grow with frames") {
  MemorySpec s;
  s.model_family = "wan21-t2v-14b";
  s.width = 832;
  s.height = 480;
  s.frames = 81;
  const uint64_t long_clip = train(s);
  s.frames = 21;
  CHECK(train(s) < long_clip);
  s.frames = 1;  // one frame: an image
  CHECK(train(s) < long_clip / 2 + long_clip / 4);
}

TEST_CASE("memory model: what it does not know it assumes, and says so") {
  MemorySpec s;
  s.model_family = "flux1-dev";
  const MemoryEstimate e = estimate_memory(s);
  const auto said = [&](const std::string& words) {
    return std::any_of(e.assumptions.begin(), e.assumptions.end(),
                       [&](const std::string& a) { return a.find(words) != std::string::npos; });
  };
  CHECK(said("batch size not stated: 1 assumed"));
  CHECK(said("resolution not stated: 1024x1024 assumed"));
  CHECK(said("optimizer not stated"));

  s.model_family = "somebody/new-model-7b";
  const MemoryEstimate guessed = estimate_memory(s);
  CHECK(guessed.family == "unknown");
  CHECK(guessed.assumptions.front().find("7B transformer") != std::string::npos);
  CHECK(term(guessed, Phase::kTrainStep, "denoiser_weights") / kGiB ==
        doctest::Approx(7e9 * 2 / kGiB).epsilon(0.01));
}

TEST_CASE("architectures: ids, model names and stated sizes") {
  CHECK(find_architecture("black-forest-labs/FLUX.1-dev")->id == "flux1-dev");
  CHECK(find_architecture("Wan-AI/Wan2.1-T2V-1.3B-Diffusers")->id == "wan21-t2v-1.3b");
  CHECK(find_architecture("Qwen/Qwen-Image-Edit-2509")->id == "qwen-image-edit");
  CHECK(find_architecture("stabilityai/stable-diffusion-xl-base-1.0")->id == "sdxl");
  CHECK(find_architecture("DeepFloyd/IF-I-XL-v1.0")->id == "deepfloyd-if");
  CHECK(find_architecture("zimage:turbo")->id == "z-image");
  CHECK(find_architecture("") == nullptr);
  CHECK(find_architecture("resnet50") == nullptr);
  std::string said;
  const Architecture sana = architecture_for("sana-4.8b", &said);
  CHECK(sana.denoiser_billions == 4.8);
  CHECK(sana.hidden > find_architecture("sana")->hidden);
  CHECK(said.find("4.8B") != std::string::npos);
}

TEST_CASE("memory model: the verdict") {
  const MemoryEstimate e = estimate_memory(flux_lora());
  const uint64_t peak = e.peak().peak_bytes;
  CHECK(judge(e, peak * 2).fit == Fit::kFits);
  CHECK(judge(e, peak + peak / 20).fit == Fit::kTight);
  const FitVerdict over = judge(e, peak - 1);
  CHECK(over.fit == Fit::kWillNotFit);
  CHECK(over.first_failing != Phase::kUnknown);
  CHECK(e.phase(over.first_failing)->peak_bytes > peak - 1);
  // The card less the CUDA context and the caching allocator's reserve, which grows with the card.
  const auto reserve = [](uint64_t card) { return card - usable_bytes(card) - (512ull << 20); };
  CHECK(usable_bytes(24ull << 30) < (24ull << 30) - (512ull << 20));
  CHECK(reserve(80ull << 30) > reserve(24ull << 30));
  CHECK(double(reserve(24ull << 30)) / (24ull << 30) == doctest::Approx(0.06).epsilon(0.01));
  CHECK(usable_bytes(256ull << 20) == 0);
}

TEST_CASE("memory model: a fleet correction scales every phase") {
  const MemoryEstimate plain = estimate_memory(flux_lora());
  const MemoryEstimate corrected =
      estimate_memory(flux_lora(), MemoryCorrection{1.1, 12, "flux1-dev on this fleet"});
  CHECK(double(corrected.peak().peak_bytes) / plain.peak().peak_bytes ==
        doctest::Approx(1.1).epsilon(0.001));
  CHECK(corrected.correction.runs == 12);
}

TEST_CASE("memory spec: read from JSON, refused when a field has the wrong type") {
  const auto ok = parse_memory_spec(nlohmann::json::parse(R"({
      "model_family": "sdxl", "training_type": "lora", "resolution": [1024, 768],
      "frames": null, "batch_size": 2, "gradient_checkpointing": true,
      "offload": {"kind": "block_swap", "amount": 10}, "unknown_field": 3})"),
                                    "spec.json");
  REQUIRE(ok);
  CHECK(ok->width == 1024);
  CHECK(ok->height == 768);
  CHECK(ok->batch_size == 2);
  CHECK_FALSE(ok->frames);
  CHECK(ok->offload->kind == "block_swap");
  CHECK(*ok->offload->amount == 10);
  CHECK(to_json(*ok)["resolution"] == nlohmann::ordered_json::array({1024, 768}));

  const auto bad = parse_memory_spec(
      nlohmann::json::parse(R"({"model_family": "sdxl", "batch_size": "two"})"), "spec.json");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "spec.json: batch_size must be a non-negative integer");
  CHECK_FALSE(parse_memory_spec(nlohmann::json::parse(R"({"batch_size": 1})"), "s.json"));
  CHECK_FALSE(parse_memory_spec(nlohmann::json::parse("[1]"), "s.json"));
  CHECK_FALSE(parse_memory_spec(
      nlohmann::json::parse(R"({"model_family": "sdxl", "resolution": "big"})"), "s.json"));
}

// The dev table: measured and stated peaks of real jobs (trainers' docs and issue threads).
TEST_CASE("memory model: the dev measurements, predicted and stated") {
  const std::filesystem::path rows_path =
      std::filesystem::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "data" / "vram" / "dev.jsonl";
  std::ifstream in(rows_path);
  if (!in) OOMTRIAGE_SKIP("../shared/data/vram/dev.jsonl is absent");
  std::vector<double> errors;
  // costly: "fits" for a job that does not (the wrong verdict that costs a crashed run);
  // contradicted: of those, the ones whose very spec another row states the other way on that
  // card (one spec, two truths: no model of the spec gets both).
  int pairs = 0, right = 0, costly = 0, contradicted = 0;
  std::string table =
      fmt::format("{:<48} {:>9} {:>9} {:>6}\n", "row", "predicted", "stated", "ratio");
  std::vector<nlohmann::json> rows;
  std::map<std::string, std::map<int, std::set<bool>>> truths;  // spec -> card -> truths
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  // The fits / does-not-fit pairs, as the scoring of the held-out set counts them.
  const auto truth_on = [](const nlohmann::json& target, int card) -> std::optional<bool> {
    const double usable = card - 0.5;
    const double stated = target["gib"].get<double>();
    const std::string q = target["qualifier"];
    if (q == "=" || q == "~") {
      if (std::abs(stated - usable) < 0.1 * usable) return std::nullopt;
      return stated < usable;
    }
    if (q == "<=" || q == "<") {
      if (stated > usable * 0.9) return std::nullopt;
      return true;
    }
    if (q == ">=" || q == ">") {
      if (!(stated >= usable * 1.1 || (target["kind"] == "oom" && card <= stated))) {
        return std::nullopt;
      }
      return false;
    }
    return std::nullopt;
  };
  for (const auto& row : rows) {
    if (row["target"]["gib"].is_null()) continue;
    for (const int card : {12, 16, 24, 48, 80}) {
      if (const auto truth = truth_on(row["target"], card)) {
        truths[row["spec"].dump()][card].insert(*truth);
      }
    }
  }
  for (const auto& row : rows) {
    const auto& target = row["target"];
    if (target["gib"].is_null()) continue;
    const auto spec = parse_memory_spec(row["spec"], row["id"].get<std::string>());
    REQUIRE(spec);
    const MemoryEstimate e = estimate_memory(*spec);
    const double predicted = e.peak().peak_bytes / kGiB;
    const double stated = target["gib"].get<double>();
    const std::string q = target["qualifier"];
    table += fmt::format("{:<48} {:>9.2f} {:>8}{:.2f} {:>6.2f}\n", row["id"].get<std::string>(),
                         predicted, q, stated, predicted / stated);
    if (target["kind"] == "measurement" && (q == "=" || q == "~")) {
      errors.push_back(std::abs(predicted - stated) / stated);
    }
    for (const int card : {12, 16, 24, 48, 80}) {
      const std::optional<bool> truth = truth_on(target, card);
      if (!truth) continue;
      ++pairs;
      const bool fits = judge(e, usable_bytes(uint64_t(card) << 30)).fit != Fit::kWillNotFit;
      if (fits == *truth) ++right;
      if (fits && !*truth) {
        ++costly;
        if (truths[row["spec"].dump()][card].size() > 1) ++contradicted;
      }
    }
  }
  REQUIRE(!errors.empty());
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  MESSAGE(table);
  MESSAGE(fmt::format(
      "median absolute error {:.1f}% over {} measurements; verdicts {}/{}; of the {} wrong, {} "
      "say \"fits\" for a job that does not ({} of them where another row states the same spec "
      "the other way)",
      median * 100, errors.size(), right, pairs, pairs - right, costly, contradicted));
  CHECK(median <= 0.15);
  CHECK(right * 100 >= pairs * 92);
  // At most a third of the wrong verdicts on the costly side, once the pairs no model of the spec
  // can get right are set apart (docs/memory-model.md: the dev summary says both counts).
  CHECK((costly - contradicted) * 3 <= pairs - right);
}

TEST_CASE("spec from config: an AI Toolkit job in the model's words") {
  const auto config = parsers::parse_job_config(R"(job: extension
config:
  name: my_lora
  process:
    - type: sd_trainer
      network:
        type: lora
        linear: 32
      datasets:
        - folder_path: /data/a
          resolution: [512, 768, 1024]
      train:
        batch_size: 2
        gradient_checkpointing: false
        dtype: bf16
        optimizer: adamw8bit
        cache_text_embeddings: true
      model:
        name_or_path: black-forest-labs/FLUX.1-dev
        quantize: true
        qtype: qfloat8
      sample:
        width: 1024
        height: 1024
        sample_steps: 20
        sample_every: 250
        prompts: ["a cat"]
)",
                                                parsers::ConfigFormat::kYaml, "config.yaml");
  REQUIRE(config);
  const MemorySpec spec = spec_from_config(*config);
  CHECK(spec.model_family == "flux1-dev");
  CHECK(spec.training_type == "lora");
  CHECK(spec.lora_rank == 32);
  CHECK(spec.width == 1024);
  CHECK(spec.batch_size == 2);
  CHECK(spec.gradient_checkpointing == false);
  CHECK(spec.quantization == "qfloat8");
  CHECK(spec.optimizer == "adamw8bit");
  CHECK(spec.text_encoder_cached == true);
  REQUIRE(spec.sampling);
  CHECK(spec.sampling->enabled);
  CHECK(spec.sampling->width == 1024);

  // No network section: AI Toolkit trains the whole model.
  const auto full = parsers::parse_job_config(
      "config:\n  process:\n    - type: sd_trainer\n      train:\n        batch_size: 1\n"
      "      model:\n        name_or_path: stabilityai/stable-diffusion-xl-base-1.0\n",
      parsers::ConfigFormat::kYaml, "full.yaml");
  REQUIRE(full);
  CHECK(spec_from_config(*full).training_type == "full");
  CHECK(spec_from_config(*full).model_family == "sdxl");
}

TEST_CASE("pre-flight: a job that will not fit gets the ranked fixes that make every phase fit") {
  const auto config = parsers::parse_job_config(R"(config:
  name: flux_on_16
  process:
    - type: sd_trainer
      network:
        type: lora
        linear: 16
      datasets:
        - folder_path: /data/a
          resolution: [512, 768, 1024]
      train:
        batch_size: 1
        steps: 2000
        gradient_checkpointing: true
        dtype: bf16
        optimizer: adamw8bit
      model:
        name_or_path: black-forest-labs/FLUX.1-dev
        quantize: true
      sample:
        sample_every: 250
        width: 1024
        height: 1024
        prompts: ["a cat"]
)",
                                                parsers::ConfigFormat::kYaml, "config.yaml");
  REQUIRE(config);
  const uint64_t usable16 = usable_bytes(16ull << 30);
  const Preflight p = preflight_config(*config, usable16);
  REQUIRE(p.verdict.fit == Fit::kWillNotFit);
  REQUIRE_FALSE(p.fixes.empty());
  CHECK(p.fixes.front().fits == true);
  CHECK(*p.fixes.front().predicted_peak_bytes <= usable16);
  CHECK(p.fixes.front().rank == 1);
  // The fix, applied, is what the model says: every phase of the fixed job fits.
  for (const Fix& fix : p.fixes) {
    CAPTURE(fix.id);
    CHECK(*fix.predicted_peak_bytes < p.estimate.peak().peak_bytes);
    CHECK_FALSE(fix.changes.empty());
  }
  // On a 48 GiB card it fits, and there is nothing to change.
  const Preflight big = preflight_config(*config, usable_bytes(48ull << 30));
  CHECK(big.verdict.fit == Fit::kFits);
  CHECK(big.fixes.empty());
  // A fleet that measured this family 20% above the model moves the verdict and the fixes' peaks.
  const Preflight corrected =
      preflight_config(*config, usable16, MemoryCorrection{1.2, 5, "flux1-dev on this fleet"});
  REQUIRE_FALSE(corrected.fixes.empty());
  CHECK(corrected.estimate.peak().peak_bytes > p.estimate.peak().peak_bytes);
}

// Found by tests/fuzz/preflight_fuzz.cc: config strings that are not UTF-8 (the spec is compared
// as JSON text) and a float past int's range where an integer belongs.
TEST_CASE("pre-flight: bytes that are not UTF-8 and out-of-range numbers in a config") {
  const auto config = parsers::parse_job_config(
      "config:\n  process:\n    - type: sd_trainer\n      network:\n        linear: 16\n"
      "      datasets:\n        - folder_path: /d\n          resolution: [1024]\n"
      "      train:\n        batch_size: 1.0e107\n        optimizer: \"adam\xc3\x28w\"\n"
      "        gradient_checkpointing: false\n      model:\n"
      "        name_or_path: black-forest-labs/FLUX.1-dev\n        qtype: \"q\x8e\"\n",
      parsers::ConfigFormat::kYaml, "bad.yaml");
  REQUIRE(config);
  CHECK_FALSE(config->problems.empty());  // the batch size is refused, not cast
  CHECK(config->batch_size == 1);
  Preflight p;
  CHECK_NOTHROW(p = preflight_config(*config, usable_bytes(8ull << 30)));
  // The refused batch decides the verdict: unknown, never judged as its default of 1.
  CHECK(p.verdict.fit == Fit::kUnknown);
  CHECK(p.verdict.unread == std::vector<std::string>{"batch_size"});
  CHECK(p.fixes.empty());
}
