// tests/triage/native_fixes_test.cc
//
// Fixes for every trainer, in its own syntax: the neutral ranking written as a kohya TOML key in
// its table (or its dataset config), a OneTrainer/HF/SimpleTuner JSON key, a command-line flag;
// no fix claims a value the job does not show (it says what to check); a fix the memory model
// says cannot fit never outranks one that can; a "process" that is the job itself is not an
// other process; and the ranking table in docs/ranking.md is the code's.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "parsers/native_config.h"
#include "parsers/printed_arguments.h"
#include "triage/config_patch.h"
#include "triage/ranker.h"
#include "triage/triage_job.h"
#include "tests/support/files.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage;
using parsers::Knob;
using parsers::OomKind;
using parsers::Phase;
using parsers::TargetKind;
using parsers::Trainer;

namespace {

constexpr uint64_t kGiB = 1ull << 30;
const fs::path kConfigs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "configs";

parsers::NativeFile file(TargetKind kind, const std::string& name) {
  return {kind, (kConfigs / name).string(), slurp(kConfigs / name)};
}

parsers::LogAnalysis incident(Trainer trainer, Phase phase, std::optional<int64_t> step,
                              parsers::MemoryFigures figures = {}) {
  parsers::LogAnalysis analysis;
  analysis.trainer = trainer;
  parsers::OomEvent event;
  event.phase = phase;
  event.step = step;
  event.figures = figures;
  analysis.events.push_back(event);
  return analysis;
}

const triage::Fix* find(const std::vector<triage::Fix>& fixes, const std::string& id) {
  for (const auto& fix : fixes) {
    if (fix.id == id) return &fix;
  }
  return nullptr;
}

}  // namespace

TEST_SUITE("triage::native fixes") {
  TEST_CASE("kohya: checkpointing left out is off (kohya's default), and the fix is a TOML key") {
    const auto load = parsers::read_native_config(Trainer::kSdScripts,
                                                  {file(TargetKind::kToml, "kohya_flux_lora.toml"),
                                                   file(TargetKind::kToml, "kohya_dataset.toml")});
    REQUIRE(load);
    const auto analysis = incident(Trainer::kSdScripts, Phase::kTrainStep, 2);
    const auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    REQUIRE(!fixes.empty());
    const triage::Fix& gc = fixes.front();
    CHECK(gc.id == "enable_gradient_checkpointing");
    CHECK(gc.why.find("gradient_checkpointing (left out: the trainer's default is off)") !=
          std::string::npos);
    REQUIRE(gc.changes.size() == 1);
    CHECK(gc.changes[0].path == "gradient_checkpointing");
    CHECK(gc.changes[0].kind == TargetKind::kToml);
    CHECK(gc.target().path == (kConfigs / "kohya_flux_lora.toml").string());
    CHECK(gc.changes[0].to == true);
    // Batch: the datasets' own batch sizes, in the dataset config, in their tables.
    const triage::Fix* batch = find(fixes, "lower_batch_size");
    REQUIRE(batch);
    bool general = false, second = false;
    for (const auto& change : batch->changes) {
      if (change.table == "general") general = change.path == "batch_size" && change.to == 1;
      if (change.table == "datasets[1]") second = change.path == "batch_size" && change.to == 2;
    }
    CHECK(general);
    CHECK(second);
    // Nothing kohya cannot express: no low_vram, no AI Toolkit paths.
    for (const auto& fix : fixes) {
      CHECK(fix.id != "enable_low_vram");
      for (const auto& change : fix.changes) CHECK(change.path.rfind("config.", 0) != 0);
    }
    // Applied to the files, each patch reads back with the new values, comments kept.
    for (const auto& fix : fixes) {
      for (const auto& source : {file(TargetKind::kToml, "kohya_flux_lora.toml"),
                                 file(TargetKind::kToml, "kohya_dataset.toml")}) {
        std::vector<triage::ConfigChange> mine;
        for (const auto& change : fix.changes) {
          if (change.file == source.path) mine.push_back(change);
        }
        if (mine.empty()) continue;
        CAPTURE(fix.id);
        const auto patched = triage::patch_file(TargetKind::kToml, source.text, mine);
        INFO(patched.error().message);
        REQUIRE(patched);
        const bool comments_kept = patched->find("# the top bucket") != std::string::npos ||
                                   patched->find("# also: fp16, no") != std::string::npos;
        CHECK(comments_kept);
      }
    }
  }

  TEST_CASE("kohya sampling OOM: the prompt file is what to check, sampling off is a TOML edit") {
    const auto load = parsers::read_native_config(
        Trainer::kSdScripts, {file(TargetKind::kToml, "kohya_flux_lora.toml")});
    REQUIRE(load);
    const auto analysis = incident(Trainer::kSdScripts, Phase::kSampling, 250);
    const auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    const triage::Fix* previews = find(fixes, "cheapen_previews");
    REQUIRE(previews);
    CHECK(previews->changes.empty());
    CHECK(previews->check.find("--w") != std::string::npos);
    const triage::Fix* off = find(fixes, "disable_sampling");
    REQUIRE(off);
    REQUIRE(off->changes.size() == 1);
    CHECK(off->changes[0].path == "sample_prompts");
    CHECK(off->changes[0].to.is_null());  // the key goes
    const auto patched = triage::patch_file(
        TargetKind::kToml, load->targets[0].path.empty() ? "" : slurp(load->targets[0].path),
        off->changes);
    REQUIRE(patched);
    CHECK(patched->find("sample_prompts") == std::string::npos);
    CHECK(patched->find("sample_every_n_steps = 250") != std::string::npos);
  }

  TEST_CASE("a kohya log without config: unknowns are checks, nothing is claimed") {
    const auto analysis = incident(Trainer::kSdScripts, Phase::kTrainStep, 2);
    const auto fixes = triage::triage_log(analysis, {nullptr, "no job config was found"}).fixes;
    REQUIRE(fixes.size() >= 2);
    CHECK(fixes[0].id == "enable_gradient_checkpointing");  // an early OOM: check GC first
    CHECK(fixes[0].check.find("--gradient_checkpointing") != std::string::npos);
    CHECK(fixes[0].changes.at(0).path == "--gradient_checkpointing");
    const triage::Fix* batch = find(fixes, "lower_batch_size");
    REQUIRE(batch);
    CHECK(batch->changes.empty());
    CHECK(batch->check.find("--train_batch_size") != std::string::npos);
    for (const auto& fix : fixes) {
      CAPTURE(fix.id);
      CHECK(fix.why.find("already on") == std::string::npos);
      CHECK(fix.id != "use_bf16");
      CHECK(fix.id != "enable_low_vram");
      CHECK(fix.id != "quantize_model");
      const bool says_something = !fix.changes.empty() || !fix.check.empty();
      CHECK(says_something);
    }
  }

  TEST_CASE("OneTrainer: OFF becomes ON in its JSON") {
    const auto load = parsers::read_native_config(
        Trainer::kOneTrainer, {file(TargetKind::kJson, "onetrainer_config.json")});
    REQUIRE(load);
    const auto analysis = incident(Trainer::kOneTrainer, Phase::kTrainStep, 3);
    const auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    REQUIRE(!fixes.empty());
    CHECK(fixes[0].id == "enable_gradient_checkpointing");
    CHECK(fixes[0].changes.at(0).to == "ON");
    const auto patched = triage::patch_file(
        TargetKind::kJson, slurp(kConfigs / "onetrainer_config.json"), fixes[0].changes);
    REQUIRE(patched);
    CHECK(nlohmann::json::parse(*patched)["gradient_checkpointing"] == "ON");
    const triage::Fix* optimizer = find(fixes, "use_8bit_optimizer");
    REQUIRE(optimizer);
    CHECK(optimizer->changes.at(0).table == "optimizer");
    CHECK(optimizer->changes.at(0).to == "ADAMW_8BIT");
  }

  TEST_CASE("HF evaluation OOM: a smaller eval batch in training_args.json") {
    const auto load = parsers::read_native_config(
        Trainer::kTransformers, {file(TargetKind::kJson, "hf_training_args.json")});
    REQUIRE(load);
    const auto analysis = incident(Trainer::kTransformers, Phase::kSampling, 200);
    const auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    REQUIRE(!fixes.empty());
    CHECK(fixes[0].id == "cheapen_previews");
    REQUIRE(fixes[0].changes.size() == 1);
    CHECK(fixes[0].changes[0].path == "per_device_eval_batch_size");
    CHECK(fixes[0].changes[0].to == 8);
    const triage::Fix* off = find(fixes, "disable_sampling");
    REQUIRE(off);
    CHECK(off->changes.at(0).path == "eval_strategy");
    CHECK(off->changes.at(0).to == "no");
  }

  TEST_CASE("SimpleTuner validation OOM: its own keys, with their dashes") {
    const auto load = parsers::read_native_config(
        Trainer::kSimpleTuner, {file(TargetKind::kJson, "simpletuner_config.json")});
    REQUIRE(load);
    const auto analysis = incident(Trainer::kSimpleTuner, Phase::kSampling, 100);
    const auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    REQUIRE(!fixes.empty());
    CHECK(fixes[0].id == "cheapen_previews");
    std::set<std::string> paths;
    for (const auto& change : fixes[0].changes) paths.insert(change.path);
    CHECK(paths.count("--validation_resolution"));
    CHECK(paths.count("--validation_num_inference_steps"));
    const auto patched = triage::patch_file(
        TargetKind::kJson, slurp(kConfigs / "simpletuner_config.json"), fixes[0].changes);
    INFO(patched.error().message);
    REQUIRE(patched);
    const auto doc = nlohmann::json::parse(*patched);
    CHECK(doc["--validation_num_inference_steps"] == 20);
    CHECK(doc["--validation_resolution"] == "768x768");
  }

  TEST_CASE("diffusers from its printed Namespace: command-line flags") {
    const auto args = parsers::parse_namespace(
        "Namespace(pretrained_model_name_or_path='runwayml/stable-diffusion-v1-5', "
        "resolution=768, train_batch_size=4, gradient_accumulation_steps=1, "
        "gradient_checkpointing=True, mixed_precision='fp16', use_8bit_adam=False, "
        "validation_prompt=None)");
    const auto config =
        parsers::config_from_printed_arguments(Trainer::kDiffusers, args, true, "log");
    REQUIRE(config);
    const auto analysis = incident(Trainer::kDiffusers, Phase::kTrainStep, 3);
    const auto fixes = triage::triage_log(analysis, {&*config, ""}).fixes;
    REQUIRE(!fixes.empty());
    CHECK(fixes[0].id == "lower_batch_size");
    CHECK(fixes[0].why.find("with gradient checkpointing already on") != std::string::npos);
    CHECK(fixes[0].changes.at(0).path == "--train_batch_size");
    CHECK(fixes[0].changes.at(0).kind == TargetKind::kArgs);
    CHECK(fixes[0].changes.at(1).path == "--gradient_accumulation_steps");
    CHECK(find(fixes, "enable_gradient_checkpointing") == nullptr);
    CHECK(find(fixes, "use_bf16") == nullptr);  // fp16 is already half precision
    const triage::Fix* eight = find(fixes, "use_8bit_optimizer");
    REQUIRE(eight);
    CHECK(eight->changes.at(0).path == "--use_8bit_adam");
  }

  TEST_CASE("a fix that cannot fit never outranks one that can") {
    // Quantizing on a 24 GiB card: 6 GiB reserved in pieces but 10 GiB missing.
    parsers::MemoryFigures f;
    f.total_capacity_bytes = 24 * kGiB;
    f.free_bytes = kGiB / 2;
    f.tried_to_allocate_bytes = 10 * kGiB;
    f.allocated_by_pytorch_bytes = 16 * kGiB;
    f.reserved_unallocated_bytes = 6 * kGiB;
    const auto analysis = incident(Trainer::kAiToolkit, Phase::kQuantize, std::nullopt, f);
    auto load = parsers::parse_job_config(
        "config:\n  process:\n    - model:\n        name_or_path: black-forest-labs/FLUX.1-dev\n"
        "        is_flux: true\n      train:\n        dtype: bf16\n",
        parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(load);
    const auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    REQUIRE(!fixes.empty());
    const triage::Fix* expandable = find(fixes, "expandable_segments");
    REQUIRE(expandable);
    CHECK(fixes.front().id != "expandable_segments");
    CHECK(expandable->why.find("would not cover the shortfall") != std::string::npos);
    bool seen_not_fitting = false;
    for (const auto& fix : fixes) {
      const bool fits = fix.fits && *fix.fits;
      if (!fits) seen_not_fitting = true;
      if (seen_not_fitting) CHECK_FALSE(fits);
    }
  }

  TEST_CASE("a lone process holding this job's own memory is the job, not another process") {
    parsers::MemoryFigures f;
    f.total_capacity_bytes = 24 * kGiB;
    f.free_bytes = kGiB / 4;
    f.tried_to_allocate_bytes = kGiB;
    f.allocated_by_pytorch_bytes = 21 * kGiB;
    f.reserved_unallocated_bytes = kGiB / 2;
    f.other_processes = {{654925, 22 * kGiB}};  // 21.5 GiB reserved + a CUDA context
    const auto analysis = incident(Trainer::kAiToolkit, Phase::kTrainStep, 40, f);
    auto load =
        parsers::parse_job_config("config:\n  process:\n    - train:\n        batch_size: 2\n",
                                  parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(load);
    auto fixes = triage::triage_log(analysis, {&*load, ""}).fixes;
    CHECK(find(fixes, "free_gpu") == nullptr);
    // Two processes: they are others.
    auto busy = analysis;
    busy.events[0].figures.other_processes.push_back({700000, 6 * kGiB});
    fixes = triage::triage_log(busy, {&*load, ""}).fixes;
    REQUIRE(find(fixes, "free_gpu"));
  }

  TEST_CASE("docs/ranking.md's ranking table is the code's table") {
    const std::string doc = slurp(fs::path(OOMTRIAGE_SOURCE_DIR) / "docs" / "ranking.md");
    CHECK(doc.find(triage::ranking_table_markdown()) != std::string::npos);
  }
}
