// tests/parsers/native_config_test.cc
//
// Each trainer's own config read into the neutral view (fixtures in tests/testdata/configs, one
// per format, written like the trainers write them): values, the table and file each came from,
// the trainer's defaults for a full file, unknowns for what a partial print leaves out, and a bad
// value that costs only its own knob. Also the printed arguments the analyzer collects.
#include "parsers/native_config.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "parsers/log_analyzer.h"
#include "parsers/printed_arguments.h"
#include "tests/support/files.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage::parsers;

namespace {

const fs::path kConfigs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "configs";

NativeFile file(TargetKind kind, const std::string& name) {
  return {kind, (kConfigs / name).string(), slurp(kConfigs / name)};
}

}  // namespace

TEST_SUITE("parsers::native_config") {
  TEST_CASE("kohya: a grouped --config_file and its --dataset_config") {
    const auto load =
        read_native_config(Trainer::kSdScripts, {file(TargetKind::kToml, "kohya_flux_lora.toml"),
                                                 file(TargetKind::kToml, "kohya_dataset.toml")});
    REQUIRE(load);
    const JobConfig& c = *load;
    CHECK(c.problems.empty());
    CHECK(c.trainer == Trainer::kSdScripts);
    CHECK(c.family == ModelFamily::kFlux1);
    CHECK(c.name == "flux_lora");
    // Not in the file: kohya's argparse default, off.
    CHECK(c.knows(Knob::kGradientCheckpointing));
    CHECK_FALSE(c.gradient_checkpointing);
    CHECK_FALSE(c.gradient_checkpointing_explicit);
    CHECK(c.batch_size == 2);
    CHECK(c.dtype == "bf16");
    CHECK(c.optimizer == "adamw8bit");
    CHECK_FALSE(c.disable_sampling);
    CHECK(c.sample.every == 250);
    // Two datasets: [general]'s batch for the first, its own for the second; [w, h] is 768.
    REQUIRE(c.datasets.size() == 2);
    CHECK(c.datasets[0].resolutions == std::vector<int>{1024});
    CHECK(c.datasets[0].batch_size == 2);
    CHECK(c.datasets[1].resolutions == std::vector<int>{768});
    CHECK(c.datasets[1].batch_size == 4);
    CHECK(c.effective_batch_size() == 4);
    // Where each value lives, for the edit.
    REQUIRE(c.slots.count("train.batch_size"));
    CHECK(c.slots.at("train.batch_size").target == 0);
    CHECK(c.slots.at("train.batch_size").table == "training_arguments");
    REQUIRE(c.slots.count("datasets[1].resolution"));
    CHECK(c.slots.at("datasets[1].resolution").target == 1);
    CHECK(c.slots.at("datasets[1].resolution").table == "datasets[1]");
    CHECK(c.slots.at("datasets[0].batch_size").table == "general");
    // kohya has no preview-size setting in its config: that knob is unknown.
    CHECK_FALSE(c.knows(Knob::kPreviewSize));
    CHECK_FALSE(c.knows(Knob::kLowVram));
  }

  TEST_CASE("kohya: a bad value is one problem with file and line, and the rest stays") {
    const auto load = read_native_config(Trainer::kSdScripts,
                                         {{TargetKind::kToml, "job.toml",
                                           "pretrained_model_name_or_path = \"sdxl.safetensors\"\n"
                                           "train_batch_size = \"two\"\n"
                                           "gradient_checkpointing = true\n"}});
    REQUIRE(load);
    REQUIRE(load->problems.size() == 1);
    CHECK(load->problems[0] ==
          "job.toml:2: train_batch_size has a value this trainer does not take, got \"two\"; the "
          "rest of the config is used");
    CHECK_FALSE(load->knows(Knob::kBatchSize));
    CHECK(load->gradient_checkpointing);
    CHECK(load->family == ModelFamily::kSdxl);
  }

  TEST_CASE("a TOML syntax error names the file and line") {
    const auto load = read_native_config(Trainer::kSdScripts,
                                         {{TargetKind::kToml, "job.toml", "a = 1\nb = [\n"}});
    CHECK_FALSE(load);
    CHECK(load.error().message.rfind("job.toml:", 0) == 0);
  }

  TEST_CASE("SimpleTuner: config.json with dashed keys, and its checkpointing default is on") {
    const auto load = read_native_config(Trainer::kSimpleTuner,
                                         {file(TargetKind::kJson, "simpletuner_config.json")});
    REQUIRE(load);
    const JobConfig& c = *load;
    CHECK(c.problems.empty());
    CHECK(c.targets.at(0).key_prefix == "--");
    CHECK(c.gradient_checkpointing);
    CHECK(c.batch_size == 1);
    CHECK(c.gradient_accumulation == 2);
    CHECK(c.quantize);
    CHECK(c.sample.width == 1024);
    CHECK(c.sample.steps == 28);
    CHECK(c.slots.at("sample.sample_steps").key == "--validation_num_inference_steps");
    CHECK(c.family == ModelFamily::kFlux1);
  }

  TEST_CASE("OneTrainer: ON/OFF checkpointing, string resolution, nested optimizer") {
    const auto load = read_native_config(Trainer::kOneTrainer,
                                         {file(TargetKind::kJson, "onetrainer_config.json")});
    REQUIRE(load);
    const JobConfig& c = *load;
    CHECK(c.problems.empty());
    CHECK(c.knows(Knob::kGradientCheckpointing));
    CHECK_FALSE(c.gradient_checkpointing);
    CHECK(c.batch_size == 2);
    CHECK(c.dtype == "bf16");
    CHECK(c.optimizer == "adamw");
    CHECK(c.slots.at("train.optimizer").table == "optimizer");
    REQUIRE(c.datasets.size() == 1);
    CHECK(c.datasets[0].resolutions == std::vector<int>{1024});
    CHECK_FALSE(c.disable_sampling);

    // Since v11 checkpointing is set per model part.
    const auto v11 = read_native_config(
        Trainer::kOneTrainer,
        {{TargetKind::kJson, "c.json",
          R"({"__version": 11, "transformer": {"gradient_checkpointing": false}, "batch_size": 1})"}});
    REQUIRE(v11);
    CHECK(v11->knows(Knob::kGradientCheckpointing));
    CHECK_FALSE(v11->gradient_checkpointing);
    CHECK(v11->slots.at("train.gradient_checkpointing").table == "transformer");
  }

  TEST_CASE("HF Trainer: training_args.json") {
    const auto load = read_native_config(Trainer::kTransformers,
                                         {file(TargetKind::kJson, "hf_training_args.json")});
    REQUIRE(load);
    const JobConfig& c = *load;
    CHECK(c.gradient_checkpointing);
    CHECK(c.batch_size == 4);
    CHECK(c.sample.batch_size == 16);
    CHECK(c.dtype == "bf16");
    CHECK(c.optimizer == "adamw");
    CHECK_FALSE(c.disable_sampling);
    REQUIRE(c.datasets.size() == 1);
    CHECK(c.datasets[0].num_workers == 4);
    CHECK_FALSE(c.knows(Knob::kResolution));
  }

  TEST_CASE("printed arguments: a whole Namespace takes defaults, and a partial print does not") {
    const Arguments args = parse_namespace(printed_argument_samples()[0]);
    REQUIRE(args.size() == 8);
    CHECK(args[4].first == "validation_prompt");
    CHECK(args[4].second == "'a photo, of sks'");  // the comma inside quotes does not split
    const auto full = config_from_printed_arguments(Trainer::kDiffusers, args, true, "train.log");
    REQUIRE(full);
    CHECK(full->targets.at(0).kind == TargetKind::kArgs);
    CHECK(full->batch_size == 4);
    CHECK(full->knows(Knob::kGradientCheckpointing));
    CHECK_FALSE(full->gradient_checkpointing);
    CHECK(full->datasets.at(0).resolutions == std::vector<int>{1024});
    CHECK(full->knows(Knob::kGradientAccumulation));  // left out: diffusers' default, 1
    CHECK(full->gradient_accumulation == 1);
    CHECK(full->optimizer == "adamw");
    CHECK_FALSE(full->disable_sampling);

    const auto partial = config_from_printed_arguments(
        Trainer::kDiffusers, {{"train_batch_size", "2"}}, false, "train.log");
    REQUIRE(partial);
    CHECK(partial->knows(Knob::kBatchSize));
    CHECK_FALSE(partial->knows(Knob::kGradientCheckpointing));
    CHECK_FALSE(partial->knows(Knob::kGradientAccumulation));
  }

  TEST_CASE("the analyzer collects what a log prints about its job") {
    const std::string log =
        "2025-01-04 10:21:33 INFO     Loading settings from /cfg/flux_lora.toml...   "
        "train_util.py:4618\n"
        "INFO     Load dataset config from /cfg/dataset.toml\n"
        "Training/evaluation parameters TrainingArguments(\n"
        "_n_gpu=1,\n"
        "per_device_train_batch_size=8,\n"
        "gradient_checkpointing=False,\n"
        ")\n"
        "steps:   0%|          | 0/100 [00:00<?, ?it/s]\n";
    LogAnalyzer analyzer;
    // Any chunking gives the same facts.
    for (size_t i = 0; i < log.size(); i += 7) analyzer.feed(std::string_view(log).substr(i, 7));
    const LogAnalysis facts = analyzer.job_facts();
    CHECK(facts.named_config == "/cfg/flux_lora.toml");
    CHECK(facts.named_dataset_config == "/cfg/dataset.toml");
    REQUIRE(facts.printed_arguments.size() == 3);
    CHECK(facts.printed_arguments[1] ==
          std::pair<std::string, std::string>{"per_device_train_batch_size", "8"});
    CHECK(parse_field_line("per_device_train_batch_size=8,")->second == "8");
    CHECK_FALSE(parse_field_line("steps:   0%|  | 0/100"));
    CHECK_FALSE(named_config_file("Loading model from /x.safetensors"));
  }
}
