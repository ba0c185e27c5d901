// tests/triage/ranker_test.cc
//
// The seed guide's rules as a scenario table (config + incident -> order constraints), each
// family of the seed's table included, real example configs from ../shared where present; then
// properties over every scenario x phase x kind: no fix twice, ranks in order, only known ids,
// nothing already applied, and a boolean fix, once applied to the config text, is not proposed
// again.
#include "triage/ranker.h"
#include "triage/triage_job.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "parsers/log_analyzer.h"
#include "triage/config_patch.h"
#include "triage/heal_plan.h"
#include "triage/preflight.h"
#include "triage/run_config.h"

#include "tests/support/files.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage;
using parsers::OomKind;
using parsers::Phase;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

// A job config in AI Toolkit's YAML with the given section bodies (already indented 8 spaces).
std::string config(const std::string& train, const std::string& model = "",
                   const std::string& datasets = "          resolution: [512, 768, 1024]\n",
                   const std::string& sample = "") {
  std::string yaml = "job: extension\nconfig:\n  name: job\n  process:\n    - type: sd_trainer\n";
  yaml += "      network:\n        type: lora\n        linear: 16\n";
  yaml += "      datasets:\n        - folder_path: /data\n" + datasets;
  yaml += "      train:\n" + (train.empty() ? std::string("        steps: 3000\n") : train);
  yaml += "      model:\n" +
          (model.empty() ? std::string("        name_or_path: black-forest-labs/FLUX.1-dev\n"
                                       "        is_flux: true\n        quantize: true\n")
                         : model);
  yaml += "      sample:\n" + (sample.empty() ? std::string("        sample_every: 250\n"
                                                            "        width: 1024\n"
                                                            "        height: 1024\n"
                                                            "        sample_steps: 30\n")
                                              : sample);
  return yaml;
}

struct Incident {
  OomKind kind = OomKind::kCuda;
  Phase phase = Phase::kTrainStep;
  std::optional<int64_t> step;
  parsers::MemoryFigures figures;
};

parsers::LogAnalysis analysis_of(const Incident& incident) {
  parsers::LogAnalysis analysis;
  analysis.trainer = parsers::Trainer::kAiToolkit;
  parsers::OomEvent event;
  event.kind = incident.kind;
  event.phase = incident.phase;
  event.step = incident.step;
  event.total_steps = 3000;
  event.figures = incident.figures;
  analysis.events.push_back(event);
  return analysis;
}

std::vector<triage::Fix> rank(const std::string& yaml, const Incident& incident) {
  const parsers::LogAnalysis analysis = analysis_of(incident);
  if (yaml.empty()) {
    return triage::triage_log(analysis, {nullptr, "no job config was found"}).fixes;
  }
  auto load = parsers::parse_job_config(yaml, parsers::ConfigFormat::kYaml, "config.yaml");
  INFO(load.error().message);
  REQUIRE(load);
  return triage::triage_log(analysis, {&*load, ""}).fixes;
}

// The single fixes in rank order; a plan (several of them together) is checked apart.
std::vector<std::string> ids(const std::vector<triage::Fix>& fixes) {
  std::vector<std::string> out;
  for (const auto& fix : fixes) {
    if (fix.id != "combined_plan") out.push_back(fix.id);
  }
  return out;
}

parsers::MemoryFigures figures_24gb(uint64_t tried = 2 * kGiB) {
  parsers::MemoryFigures f;
  f.gpu_index = 0;
  f.total_capacity_bytes = 24 * kGiB;
  f.free_bytes = kGiB / 2;
  f.tried_to_allocate_bytes = tried;
  f.allocated_by_pytorch_bytes = 22 * kGiB;
  f.reserved_unallocated_bytes = kGiB / 4;
  return f;
}

struct Scenario {
  std::string name;
  std::string yaml;
  Incident incident;
  std::string first;
  std::vector<std::pair<std::string, std::string>> before;  // a ranks above b
  std::vector<std::string> present;
  std::vector<std::string> absent;
};

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::vector<Scenario> scenarios() {
  const std::string gc_off = "        gradient_checkpointing: false\n        dtype: bf16\n";
  const std::string gc_on = "        gradient_checkpointing: true\n        dtype: bf16\n";
  const std::string zimage =
      "        name_or_path: Tongyi-MAI/Z-Image-Turbo\n"
      "        arch: \"zimage:turbo\"\n        quantize: true\n";
  const std::string qwen_edit =
      "        name_or_path: Qwen/Qwen-Image-Edit-2509\n"
      "        arch: qwen_image_edit_plus\n        quantize: true\n"
      "        qtype: qfloat8\n";
  const std::string wan =
      "        name_or_path: ai-toolkit/Wan2.2-T2V-A14B\n"
      "        arch: wan22_14b\n        quantize: true\n        qtype: qfloat8\n";
  std::vector<Scenario> s;
  s.push_back({"GC off, OOM at step 2: enable GC first",
               config(gc_off),
               {.step = 2, .figures = figures_24gb()},
               "enable_gradient_checkpointing",
               {},
               {},
               {}});
  s.push_back({"GC off, OOM in the first preview: still GC first, then cheaper previews",
               config(gc_off),
               {.phase = Phase::kSampling, .step = 250},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "cheapen_previews"}},
               {"cheapen_previews"},
               {"lower_batch_size"}});
  s.push_back({"GC on, sampling OOM: cheaper previews, not GC, not batch",
               config(gc_on + "        batch_size: 4\n"),
               {.phase = Phase::kSampling, .step = 500, .figures = figures_24gb()},
               "cheapen_previews",
               {{"cheapen_previews", "disable_sampling"}},
               {"disable_sampling"},
               {"enable_gradient_checkpointing", "lower_batch_size", "drop_top_bucket"}});
  s.push_back(
      {"baseline sample OOM: cheaper previews, then skip the first sample",
       config(gc_on),
       {.phase = Phase::kSampling, .step = 0},
       "cheapen_previews",
       {{"cheapen_previews", "skip_first_sample"}, {"skip_first_sample", "disable_sampling"}},
       {},
       {}});
  s.push_back({"sampling already disabled: no preview fixes",
               config(gc_on + "        disable_sampling: true\n"),
               {.phase = Phase::kSampling, .step = 500},
               "",
               {},
               {},
               {"cheapen_previews", "disable_sampling", "skip_first_sample"}});
  s.push_back({"GC on, random later step, multi-resolution: drop the top bucket first",
               config(gc_on + "        batch_size: 2\n"),
               {.step = 1337, .figures = figures_24gb()},
               "drop_top_bucket",
               {{"drop_top_bucket", "lower_batch_size"}},
               {},
               {"enable_gradient_checkpointing"}});
  s.push_back({"GC on, early OOM, batch 4: lower the batch, keep the effective batch",
               config(gc_on + "        batch_size: 4\n        gradient_accumulation: 1\n"),
               {.step = 1},
               "lower_batch_size",
               {{"lower_batch_size", "drop_top_bucket"}},
               {},
               {}});
  s.push_back({"GC on, early OOM, batch 1, one resolution: lower it, then the low-memory path",
               config(gc_on, "", "          resolution: 1024\n"),
               {.step = 1},
               "lower_resolution",
               {{"lower_resolution", "enable_low_vram"}},
               {"enable_low_vram"},
               {"lower_batch_size", "drop_top_bucket"}});
  s.push_back({"GC on, batch 1, multi-resolution, early: the top bucket first",
               config(gc_on),
               {.step = 2},
               "drop_top_bucket",
               {},
               {},
               {"lower_batch_size"}});
  s.push_back({"a single bucket written twice is one bucket: nothing to drop",
               config(gc_on, "", "          resolution: [1024, 1024]\n"),
               {.step = 900},
               "lower_resolution",
               {},
               {},
               {"drop_top_bucket"}});
  s.push_back({"model load OOM: quantize, low_vram, offloading; never batch or previews",
               config(gc_on + "        batch_size: 4\n",
                      "        name_or_path: Qwen/Qwen-Image\n        arch: qwen_image\n"),
               {.phase = Phase::kModelLoad},
               "quantize_model",
               {{"quantize_model", "enable_low_vram"}, {"enable_low_vram", "layer_offloading"}},
               {"quantize_text_encoder"},
               {"lower_batch_size", "cheapen_previews", "disable_sampling",
                "enable_gradient_checkpointing"}});
  s.push_back({"quantize OOM with qfloat8 already: the low-VRAM path, then a lower qtype",
               config(gc_off, wan),
               {.phase = Phase::kQuantize},
               "enable_low_vram",
               {{"enable_low_vram", "quantize_model"}},
               {},
               {"enable_gradient_checkpointing", "lower_batch_size"}});
  s.push_back({"video family: fewer frames before the buckets",
               config(gc_on, wan, "          resolution: [512, 768]\n          num_frames: 81\n"),
               {.step = 40},
               "reduce_num_frames",
               {{"reduce_num_frames", "drop_top_bucket"}},
               {},
               {}});
  s.push_back({"Qwen-Image-Edit-2509 with control images: match_target_res",
               config(gc_on, qwen_edit,
                      "          resolution: [512, 768, 1024]\n          control_path: /ctrl\n"),
               {.step = 3},
               "match_target_res",
               {},
               {},
               {}});
  s.push_back(
      {"match_target_res already on: not proposed",
       config(gc_on, qwen_edit + "        model_kwargs:\n          match_target_res: true\n",
              "          resolution: [512, 768, 1024]\n          control_path: /ctrl\n"),
       {.step = 3},
       "drop_top_bucket",
       {},
       {},
       {"match_target_res"}});
  {
    // Figures a real 24 GiB card can show: 13 GiB held by others, 8.25 GiB reserved here.
    Incident busy{.step = 10, .figures = figures_24gb()};
    busy.figures.allocated_by_pytorch_bytes = 8 * kGiB;
    busy.figures.other_processes = {{654925, 6 * kGiB}, {706098, 7 * kGiB}};
    s.push_back({"other processes hold the GPU: free it first",
                 config(gc_off),
                 busy,
                 "free_gpu",
                 {{"free_gpu", "enable_gradient_checkpointing"}},
                 {},
                 {}});
  }
  {
    // 19 GiB allocated + 3 GiB reserved in pieces + 0.5 GiB free: the 2 GiB request fits once
    // the pieces can grow.
    Incident fragmented{.step = 10, .figures = figures_24gb(2 * kGiB)};
    fragmented.figures.allocated_by_pytorch_bytes = 19 * kGiB;
    fragmented.figures.reserved_unallocated_bytes = 3 * kGiB;
    s.push_back({"large reserved-but-unallocated: expandable segments early",
                 config(gc_on),
                 fragmented,
                 "expandable_segments",
                 {},
                 {},
                 {}});
  }
  s.push_back({"host OOM kill: host memory, no GPU levers",
               config(gc_off + "        batch_size: 4\n"),
               {.kind = OomKind::kHostKilled, .step = 120},
               "reduce_host_memory",
               {},
               {},
               {"enable_gradient_checkpointing", "lower_batch_size", "cheapen_previews",
                "drop_top_bucket"}});
  s.push_back({"MemoryError is host memory too",
               config(gc_on),
               {.kind = OomKind::kHostMemoryError, .phase = Phase::kModelLoad},
               "reduce_host_memory",
               {},
               {},
               {"quantize_model"}});
  s.push_back({"small /dev/shm: increase it",
               config(gc_off),
               {.kind = OomKind::kShm, .step = 0},
               "increase_shm",
               {},
               {},
               {"enable_gradient_checkpointing"}});
  s.push_back({"fp32 (the default when dtype is absent): bf16 is proposed",
               config("        gradient_checkpointing: true\n"),
               {.step = 1},
               "drop_top_bucket",
               {},
               {"use_bf16"},
               {}});
  s.push_back({"already at batch 1, GC on, low_vram on: neither proposed",
               config(gc_on, zimage + "        low_vram: true\n"),
               {.step = 1},
               "drop_top_bucket",
               {},
               {},
               {"lower_batch_size", "enable_gradient_checkpointing", "enable_low_vram"}});
  // The seed's high-risk table: each family with GC off and its dangerous combination.
  s.push_back(
      {"Z-Image, 1024-1536 buckets, batch 4, GC off: GC first, then batch",
       config(gc_off + "        batch_size: 4\n", zimage, "          resolution: [1024, 1536]\n"),
       {.step = 2},
       "enable_gradient_checkpointing",
       {{"enable_gradient_checkpointing", "lower_batch_size"}},
       {"drop_top_bucket"},
       {}});
  s.push_back({"Qwen-Edit, 1024 with controls, batch 2, GC off: GC first",
               config(gc_off + "        batch_size: 2\n", qwen_edit,
                      "          resolution: 1024\n          control_path: [/c1, /c2]\n"),
               {.step = 3},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "lower_batch_size"}},
               {"match_target_res", "lower_resolution"},
               {}});
  s.push_back({"FLUX, batch 8, GC off: GC first, then batch",
               config(gc_off + "        batch_size: 8\n"),
               {.step = 2},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "lower_batch_size"}},
               {},
               {}});
  s.push_back({"Flex.2, multi-bucket, GC off: GC first",
               config(gc_off, "        name_or_path: ostris/Flex.2-preview\n        arch: flex2\n"),
               {.step = 700},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "drop_top_bucket"}},
               {},
               {}});
  s.push_back({"no config at all: advice on AI Toolkit's defaults, lower confidence",
               "",
               {.phase = Phase::kSampling, .step = 500},
               "cheapen_previews",
               {},
               {},
               {}});

  // The seed guide's checklist (docs/domain.md), one row each, with a crash's figures so that
  // the memory model prices every fix: the rules lead whatever it predicts.
  s.push_back({"seed rule 1: GC off, OOM at the first preview (figures): GC first",
               config(gc_off),
               {.phase = Phase::kSampling, .step = 250, .figures = figures_24gb()},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "cheapen_previews"}},
               {},
               {"lower_batch_size"}});
  s.push_back({"seed rule 1: GC off, OOM at step 3 (figures): GC first, batch after",
               config(gc_off + "        batch_size: 2\n"),
               {.step = 3, .figures = figures_24gb()},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "lower_batch_size"}},
               {},
               {}});
  s.push_back({"seed rule 1: GC off, any later preview: GC back on first, then cheaper previews",
               config(gc_off),
               {.phase = Phase::kSampling, .step = 1000, .figures = figures_24gb()},
               "enable_gradient_checkpointing",
               {{"enable_gradient_checkpointing", "cheapen_previews"}},
               {},
               {}});
  s.push_back({"seed: GC on and still OOM early: batch, then the top bucket, never GC",
               config(gc_on + "        batch_size: 4\n"),
               {.step = 2, .figures = figures_24gb()},
               "",
               {{"lower_batch_size", "drop_top_bucket"}},
               {"lower_batch_size", "drop_top_bucket"},
               {"enable_gradient_checkpointing"}});
  s.push_back({"seed: a preview OOM with GC on: cheaper previews, never GC off or the batch",
               config(gc_on + "        batch_size: 2\n"),
               {.phase = Phase::kSampling, .step = 750, .figures = figures_24gb()},
               "cheapen_previews",
               {},
               {},
               {"enable_gradient_checkpointing", "lower_batch_size"}});
  s.push_back({"quantize OOM: the low-VRAM path (quantizes on the CPU) first, then a lower qtype",
               config(gc_on, wan),
               {.phase = Phase::kQuantize, .figures = figures_24gb()},
               "enable_low_vram",
               {{"enable_low_vram", "quantize_model"}},
               {},
               {"lower_batch_size", "expandable_segments"}});
  s.push_back({"host kill with latents already on disk: host-RAM fixes only",
               config(gc_on, "",
                      "          resolution: [512, 768]\n"
                      "          cache_latents_to_disk: true\n"),
               {.kind = OomKind::kHostKilled, .step = 40},
               "reduce_host_memory",
               {},
               {},
               {"cache_latents_to_disk", "enable_low_vram", "enable_gradient_checkpointing"}});
  s.push_back({"host kill with latents cached in host RAM: to disk after the workers",
               config(gc_on, "",
                      "          resolution: [512, 768]\n"
                      "          cache_latents: true\n"),
               {.kind = OomKind::kHostKilled, .step = 40},
               "reduce_host_memory",
               {{"reduce_host_memory", "cache_latents_to_disk"}},
               {},
               {}});

  // The real example configs, when ../shared has them.
  const fs::path shared =
      fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "configs" / "ai-toolkit";
  if (fs::exists(shared / "train_lora_qwen_image_edit_2509_32gb.yaml")) {
    const std::string qwen = slurp(shared / "train_lora_qwen_image_edit_2509_32gb.yaml");
    s.push_back({"real Qwen-Image-Edit-2509 example, training OOM: match_target_res first",
                 qwen,
                 {.step = 400, .figures = figures_24gb()},
                 "match_target_res",
                 {{"match_target_res", "drop_top_bucket"}},
                 {},
                 {"quantize_model", "cache_text_embeddings", "enable_low_vram"}});
    s.push_back({"real Qwen-Image-Edit-2509 example, GC switched off",
                 replace(qwen, "gradient_checkpointing: true", "gradient_checkpointing: false"),
                 {.step = 2},
                 "enable_gradient_checkpointing",
                 {},
                 {},
                 {}});
  }
  if (fs::exists(shared / "train_lora_wan22_14b_24gb.yaml")) {
    const std::string wan_real = slurp(shared / "train_lora_wan22_14b_24gb.yaml");
    s.push_back({"real Wan 2.2 example with 81-frame clips: fewer frames first",
                 replace(wan_real, "num_frames: 1\n", "num_frames: 81\n"),
                 {.step = 50},
                 "reduce_num_frames",
                 {},
                 {},
                 {"enable_low_vram", "quantize_model"}});
  }
  if (fs::exists(shared / "train_lora_flux_24gb.yaml")) {
    s.push_back({"real FLUX example, baseline sample OOM",
                 slurp(shared / "train_lora_flux_24gb.yaml"),
                 {.phase = Phase::kSampling, .step = 0},
                 "cheapen_previews",
                 {},
                 {},
                 {"enable_gradient_checkpointing"}});
  }
  if (fs::exists(shared / "train_lora_zimage_turbo_32gb.yaml")) {
    s.push_back({"real Z-Image example (batch 2, one bucket), early OOM: lower the batch",
                 slurp(shared / "train_lora_zimage_turbo_32gb.yaml"),
                 {.step = 1},
                 "lower_batch_size",
                 {},
                 {},
                 {"drop_top_bucket"}});
  }
  return s;
}

}  // namespace

TEST_SUITE("triage::ranker") {
  TEST_CASE("the seed guide's rules, scenario by scenario") {
    for (const Scenario& scenario : scenarios()) {
      CAPTURE(scenario.name);
      const auto fixes = rank(scenario.yaml, scenario.incident);
      const std::vector<std::string> order = ids(fixes);
      CAPTURE(fmt::format("{}", fmt::join(order, ", ")));
      std::string estimates;
      for (const auto& fix : fixes) estimates += "\n" + fix.id + ": " + fix.estimate;
      CAPTURE(estimates);
      if (scenario.first.empty()) {
        for (const auto& fix : fixes) CHECK(fix.id != "cheapen_previews");
      } else {
        REQUIRE_FALSE(order.empty());
        CHECK(order.front() == scenario.first);
      }
      const auto position = [&](const std::string& id) {
        return std::find(order.begin(), order.end(), id) - order.begin();
      };
      for (const auto& [a, b] : scenario.before) {
        const std::string ranked_first = a, ranked_after = b;
        CAPTURE(ranked_first);
        CAPTURE(ranked_after);
        CHECK(position(a) < static_cast<long>(order.size()));
        CHECK(position(a) < position(b));
      }
      for (const auto& id : scenario.present) {
        CAPTURE(id);
        CHECK(position(id) < static_cast<long>(order.size()));
      }
      for (const auto& id : scenario.absent) {
        CAPTURE(id);
        CHECK(position(id) == static_cast<long>(order.size()));
      }
    }
  }
  TEST_CASE("a plan when no single fix is enough: FLUX, checkpointing off, batch 4") {
    const std::string yaml = config(
        "        gradient_checkpointing: false\n        dtype: bf16\n        batch_size: 4\n", "",
        "          resolution: 1024\n");
    const auto fixes = rank(yaml, {.step = 2, .figures = figures_24gb()});
    REQUIRE(fixes.size() >= 3);
    std::string estimates;
    for (const auto& fix : fixes) estimates += "\n" + fix.id + ": " + fix.estimate;
    CAPTURE(estimates);
    const triage::Fix& plan = fixes[0];
    REQUIRE(plan.id == "combined_plan");
    CHECK(plan.rank == 1);
    CHECK(plan.fits == true);
    // The seed guide's first lever leads the plan; the batch joins it.
    REQUIRE(plan.parts.size() >= 2);
    CHECK(plan.parts[0] == "enable_gradient_checkpointing");
    CHECK(std::find(plan.parts.begin(), plan.parts.end(), "lower_batch_size") != plan.parts.end());
    CHECK(plan.title.rfind("Plan: turn gradient checkpointing back on + ", 0) == 0);
    CHECK(plan.why.find("No single fix makes every phase fit") == 0);
    // Every single fix after it falls short alone; the plan's changes are its parts' changes.
    size_t changes = 0;
    for (size_t i = 1; i < fixes.size(); ++i) {
      CAPTURE(fixes[i].id);
      CHECK(fixes[i].fits != true);
      CHECK(fixes[i].rank == static_cast<int>(i) + 1);
      if (std::find(plan.parts.begin(), plan.parts.end(), fixes[i].id) != plan.parts.end()) {
        changes += fixes[i].changes.size();
        CHECK(*plan.predicted_peak_bytes < *fixes[i].predicted_peak_bytes);
      }
    }
    CHECK(plan.changes.size() == changes);
    CHECK(triage::resume_safe(plan.id));
    // Applied, the model agrees with the plan: the job fits the card the crash ran on.
    const auto patched = triage::patch_yaml(yaml, plan.changes);
    REQUIRE(patched);
    auto fixed = parsers::parse_job_config(*patched, parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(fixed);
    CHECK(fixed->gradient_checkpointing);
    CHECK(fixed->batch_size == 2);
    const triage::Preflight after =
        triage::preflight_config(*fixed, triage::usable_bytes(24ull << 30));
    CHECK(after.verdict.fit != triage::Fit::kWillNotFit);
  }
  TEST_CASE("no plan when one fix is enough, or when the model cannot price the fixes") {
    const std::string gc_off = "        gradient_checkpointing: false\n        dtype: bf16\n";
    const auto one = rank(config(gc_off), {.step = 2, .figures = figures_24gb()});
    REQUIRE_FALSE(one.empty());
    CHECK(one[0].id == "enable_gradient_checkpointing");
    CHECK(one[0].fits == true);
    for (const auto& fix : one) CHECK(fix.id != "combined_plan");
    // Without the crash's figures there is no usable memory to fit.
    for (const auto& fix : rank(config(gc_off + "        batch_size: 4\n"), {.step = 2})) {
      CHECK(fix.id != "combined_plan");
    }
  }
  TEST_CASE("check speaks in predictions: no crash, no step in a prediction's fixes") {
    const auto config_text = config(
        "        gradient_checkpointing: true\n        dtype: bf16\n        batch_size: 8\n"
        "        steps: 3000\n");
    auto job = parsers::parse_job_config(config_text, parsers::ConfigFormat::kYaml, "c.yaml");
    REQUIRE(job);
    const triage::Preflight p = triage::preflight_config(*job, triage::usable_bytes(16ull << 30));
    REQUIRE_FALSE(p.fixes.empty());
    for (const auto& fix : p.fixes) {
      CAPTURE(fix.id);
      CAPTURE(fix.why);
      CHECK(fix.why.find("ran out of memory") == std::string::npos);
      CHECK(fix.why.find("OOM happened") == std::string::npos);
      CHECK(fix.why.find("at step") == std::string::npos);
      CHECK(fix.why.find("spike") == std::string::npos);
    }
  }
  TEST_CASE(
      "fix wording follows the trainer's default: kohya turns checkpointing on, not back on") {
    const std::string log =
        "Namespace(pretrained_model_name_or_path='sdxl.safetensors', resolution='1024,1024', "
        "train_batch_size=1, gradient_checkpointing=False, output_dir='out')\n"
        "File \"/w/sd-scripts/sdxl_train_network.py\", line 9, in <module>\n"
        "steps:   0%|          | 2/1000 [00:05<40:00,  2.40s/it, avr_loss=0.1]\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n";
    const auto fixes =
        triage::triage_log(parsers::analyze_log(log), {nullptr, "no job config was found"}).fixes;
    REQUIRE_FALSE(fixes.empty());
    CHECK(fixes[0].title == "Turn gradient checkpointing on");
    const auto aitk = rank(config("        gradient_checkpointing: false\n"), {.step = 2});
    REQUIRE_FALSE(aitk.empty());
    CHECK(aitk[0].title == "Turn gradient checkpointing back on");
  }
  TEST_CASE("cheaper previews change only what lowers the peak, and say why steps change") {
    const auto fixes = rank(config("        gradient_checkpointing: true\n"),
                            {.phase = Phase::kSampling, .step = 500});
    const auto at = std::find_if(fixes.begin(), fixes.end(),
                                 [](const triage::Fix& f) { return f.id == "cheapen_previews"; });
    REQUIRE(at != fixes.end());
    for (const auto& change : at->changes)
      CHECK(change.path.find("sample_every") == std::string::npos);
    CHECK(at->why.find("time, not memory") != std::string::npos);
  }
  TEST_CASE("the config the crash ran with explains it, when today's file changed since") {
    const std::string train = "        dtype: bf16\n        batch_size: 4\n";
    auto run = parsers::parse_job_config(config("        gradient_checkpointing: false\n" + train),
                                         parsers::ConfigFormat::kYaml, "config.yaml");
    auto now = parsers::parse_job_config(config("        gradient_checkpointing: true\n" + train),
                                         parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(run);
    REQUIRE(now);
    const triage::RunConfig as_run = triage::as_the_run_had_it(*now, *run);
    REQUIRE(as_run.changed.size() == 1);
    CHECK(as_run.changed[0] == "train.gradient_checkpointing false -> true");
    CHECK_FALSE(as_run.config.gradient_checkpointing);
    CHECK(as_run.config.targets.front().path == now->targets.front().path);
    const parsers::LogAnalysis analysis = analysis_of({.step = 2});
    const auto fixes = triage::triage_log(analysis, {&*now, "", nullptr, &*run}).fixes;
    REQUIRE_FALSE(fixes.empty());
    CHECK(fixes[0].id == "enable_gradient_checkpointing");
    CHECK(fixes[0].why.find("the file changed since: train.gradient_checkpointing false -> true") !=
          std::string::npos);
    for (const auto& fix : fixes) CHECK(fix.why.find("already on") == std::string::npos);
    // The file still says what the run had: nothing to say.
    const auto same = triage::triage_log(analysis, {&*run, "", nullptr, &*run}).fixes;
    REQUIRE_FALSE(same.empty());
    CHECK(same[0].why.find("changed since") == std::string::npos);
  }
  TEST_CASE("the batch fix keeps the effective batch through gradient accumulation") {
    const auto fixes = rank(config("        gradient_checkpointing: true\n        batch_size: 4\n"
                                   "        gradient_accumulation: 2\n"),
                            {.step = 1});
    REQUIRE_FALSE(fixes.empty());
    REQUIRE(fixes[0].id == "lower_batch_size");
    REQUIRE(fixes[0].changes.size() == 2);
    CHECK(fixes[0].changes[0].path == "config.process[0].train.batch_size");
    CHECK(fixes[0].changes[0].to == 2);
    CHECK(fixes[0].changes[1].path == "config.process[0].train.gradient_accumulation");
    CHECK(fixes[0].changes[1].from == 2);
    CHECK(fixes[0].changes[1].to == 4);
  }
  TEST_CASE("the predicted peak is calibrated by the event's figures and says it is an estimate") {
    const auto fixes = rank(config("        gradient_checkpointing: false\n        dtype: bf16\n"),
                            {.step = 2, .figures = figures_24gb()});
    REQUIRE(fixes[0].id == "enable_gradient_checkpointing");
    REQUIRE(fixes[0].predicted_peak_bytes);
    // The model prices FLUX (qfloat8, LoRA 16) with checkpointing at 1024 px.
    CHECK(*fixes[0].predicted_peak_bytes < 20 * kGiB);
    CHECK(fixes[0].fits == true);
    CHECK(fixes[0].estimate.find("estimated by the memory model") == 0);
    // Without figures the model still prices the fix, but the usable memory is unknown.
    const std::string train = "        gradient_checkpointing: false\n        dtype: bf16\n";
    const auto bare = rank(config(train), {.step = 2});
    REQUIRE(bare[0].predicted_peak_bytes);
    CHECK(*bare[0].predicted_peak_bytes == *fixes[0].predicted_peak_bytes);
    CHECK_FALSE(bare[0].fits);
    // A crash that needed more than the model's figure for its phase scales that phase up.
    parsers::MemoryFigures big = figures_24gb();
    big.total_capacity_bytes = 80 * kGiB;
    big.allocated_by_pytorch_bytes = 77 * kGiB;
    const auto scaled = rank(config(train), {.step = 2, .figures = big});
    REQUIRE(scaled[0].id == "enable_gradient_checkpointing");
    CHECK(scaled[0].estimate.find("train_step's working memory scaled x") != std::string::npos);
    CHECK(*scaled[0].predicted_peak_bytes > *bare[0].predicted_peak_bytes);
  }
  TEST_CASE("properties over every scenario, phase and kind") {
    const Phase phases[] = {Phase::kUnknown,
                            Phase::kModelLoad,
                            Phase::kQuantize,
                            Phase::kCacheLatents,
                            Phase::kCacheTextEmbeddings,
                            Phase::kTrainStep,
                            Phase::kSampling,
                            Phase::kSaving};
    const OomKind kinds[] = {OomKind::kCuda, OomKind::kHip, OomKind::kHostKilled, OomKind::kShm};
    const std::set<std::string> booleans = {"enable_gradient_checkpointing",
                                            "disable_sampling",
                                            "skip_first_sample",
                                            "enable_low_vram",
                                            "quantize_text_encoder",
                                            "cache_text_embeddings",
                                            "layer_offloading",
                                            "cache_latents_to_disk",
                                            "use_bf16",
                                            "use_8bit_optimizer",
                                            "match_target_res"};
    int checked = 0;
    int plans = 0;
    for (const Scenario& scenario : scenarios()) {
      if (scenario.yaml.empty()) continue;
      for (Phase phase : phases) {
        for (OomKind kind : kinds) {
          for (std::optional<int64_t> step :
               {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(2),
                std::optional<int64_t>(1500)}) {
            Incident incident = scenario.incident;
            incident.phase = phase;
            incident.kind = kind;
            incident.step = step;
            CAPTURE(scenario.name);
            CAPTURE(static_cast<int>(phase));
            CAPTURE(static_cast<int>(kind));
            const auto fixes = rank(scenario.yaml, incident);
            std::set<std::string> seen;
            for (size_t i = 0; i < fixes.size(); ++i) {
              const triage::Fix& fix = fixes[i];
              CAPTURE(fix.id);
              CHECK(seen.insert(fix.id).second);
              CHECK(fix.rank == static_cast<int>(i) + 1);
              CHECK(triage::is_known_fix_id(fix.id));
              if (fix.id == "combined_plan") {
                // First, fits, two or more resume-safe single fixes proposed below it.
                CHECK(i == 0);
                CHECK(fix.fits == true);
                CHECK(fix.parts.size() >= 2);
                for (const auto& part : fix.parts) {
                  CHECK(triage::resume_safe(part));
                  CHECK(std::any_of(fixes.begin() + 1, fixes.end(),
                                    [&](const triage::Fix& f) { return f.id == part; }));
                }
                ++plans;
              }
              CHECK_FALSE(fix.why.empty());
              CHECK_FALSE(fix.cost.empty());
              CHECK(fix.confidence > 0.0);
              CHECK(fix.confidence <= 1.0);
              for (const auto& change : fix.changes) CHECK(change.from != change.to);
              if (!booleans.count(fix.id) || !fix.changes_config()) continue;
              // Applied to the config text, the fix is not proposed again.
              const auto patched = triage::patch_yaml(scenario.yaml, fix.changes);
              INFO(patched.error().message);
              REQUIRE(patched);
              const auto again = rank(*patched, incident);
              for (const auto& other : again) CHECK(other.id != fix.id);
              ++checked;
            }
          }
        }
      }
    }
    CHECK(checked > 100);
    MESSAGE(plans << " plans among the scenarios' variations");
  }
  TEST_CASE("without a config, the arguments a kohya log prints drive the rules") {
    const std::string log =
        "Namespace(pretrained_model_name_or_path='sdxl.safetensors', resolution='1024,1024', "
        "train_batch_size=4, gradient_checkpointing=False, output_dir='out')\n"
        "  batch size per device / バッチサイズ: 4\n"
        "  gradient accumulation steps / 勾配を合計するステップ数 = 1\n"
        "File \"/w/sd-scripts/sdxl_train_network.py\", line 9, in <module>\n"
        "steps:   0%|          | 2/1000 [00:05<40:00,  2.40s/it, avr_loss=0.1]\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n";
    const parsers::LogAnalysis analysis = parsers::analyze_log(log);
    CHECK(analysis.trainer == parsers::Trainer::kSdScripts);
    CHECK(analysis.arguments.batch_size == 4);
    CHECK(analysis.arguments.gradient_accumulation == 1);
    CHECK(analysis.arguments.resolution == 1024);
    CHECK(analysis.arguments.gradient_checkpointing == false);
    const auto fixes = triage::triage_log(analysis, {nullptr, "no job config was found"}).fixes;
    REQUIRE(fixes.size() >= 2);
    CHECK(fixes[0].id == "enable_gradient_checkpointing");
    REQUIRE(fixes[0].changes.size() == 1);
    // Written for kohya's command line: --flag, and the value the log printed as `from`.
    CHECK(fixes[0].changes[0].path == "--gradient_checkpointing");
    CHECK(fixes[0].changes[0].kind == parsers::TargetKind::kArgs);
    CHECK(fixes[1].id == "lower_batch_size");
    CHECK(fixes[1].changes[0].path == "--train_batch_size");
    CHECK(fixes[1].changes[0].from == 4);
    CHECK(fixes[1].changes[0].to == 2);
    CHECK(fixes[1].changes[1].path == "--gradient_accumulation_steps");
    CHECK(fixes[1].changes[1].to == 2);
    for (const auto& fix : fixes) {
      CHECK(fix.why.find("the training arguments the log prints") != std::string::npos);
      for (const auto& change : fix.changes) CHECK(change.path.rfind("config.", 0) != 0);
    }
  }
}
