// tests/triage/heal_plan_test.cc
//
// The pure half of `run --heal`: when it stops, which fix comes next, and the command line of
// the next attempt for each trainer.
#include <doctest/doctest.h>

#include "triage/heal_plan.h"

using namespace oomtriage;
using parsers::Trainer;
using Args = std::vector<std::string>;

namespace {

triage::Fix fix(const std::string& id) {
  triage::Fix f;
  f.id = id;
  f.changes.push_back({"x", 1, 2, parsers::TargetKind::kYaml, "job.yaml"});
  return f;
}

parsers::LogAnalysis crashed(parsers::OomKind kind) {
  parsers::LogAnalysis analysis;
  analysis.outcome = parsers::Outcome::kCrashedOom;
  parsers::OomEvent event;
  event.kind = kind;
  event.phase = parsers::Phase::kTrainStep;
  analysis.events.push_back(event);
  return analysis;
}

triage::ConfigChange arg(const std::string& flag, nlohmann::json from, nlohmann::json to) {
  return {flag, from, to, parsers::TargetKind::kArgs};
}

}  // namespace

TEST_SUITE("triage::heal plan") {
  TEST_CASE("the next fix is the best resume-safe one not tried yet") {
    const std::vector<triage::Fix> ranked = {fix("use_8bit_optimizer"), fix("cheapen_previews"),
                                             fix("lower_batch_size")};
    const auto analysis = crashed(parsers::OomKind::kCuda);
    auto step = triage::next_heal_step(analysis, ranked, {});
    REQUIRE(step.fix != nullptr);
    CHECK(step.fix->id == "cheapen_previews");  // an optimizer change would drop its state
    step = triage::next_heal_step(analysis, ranked, {"cheapen_previews"});
    REQUIRE(step.fix != nullptr);
    CHECK(step.fix->id == "lower_batch_size");
    step = triage::next_heal_step(analysis, ranked, {"cheapen_previews", "lower_batch_size"});
    CHECK(step.fix == nullptr);
    CHECK(step.stop_reason.find("every resume-safe fix") != std::string::npos);
  }

  TEST_CASE("a fix predicted to make every phase fit comes before one predicted not to") {
    std::vector<triage::Fix> ranked = {fix("cheapen_previews"), fix("quantize_model"),
                                       fix("drop_top_bucket")};
    ranked[0].fits = false;
    ranked[1].fits = true;
    const auto analysis = crashed(parsers::OomKind::kCuda);
    auto step = triage::next_heal_step(analysis, ranked, {});
    REQUIRE(step.fix != nullptr);
    CHECK(step.fix->id == "quantize_model");
    // Tried already: with nothing else predicted to fit, the rank order decides.
    step = triage::next_heal_step(analysis, ranked, {"quantize_model"});
    REQUIRE(step.fix != nullptr);
    CHECK(step.fix->id == "cheapen_previews");
  }

  TEST_CASE("no healing for a completed job, another crash, host memory or another process") {
    const std::vector<triage::Fix> ranked = {fix("lower_batch_size")};
    parsers::LogAnalysis completed;
    completed.outcome = parsers::Outcome::kCompleted;
    CHECK(triage::next_heal_step(completed, ranked, {}).fix == nullptr);
    parsers::LogAnalysis other;
    other.outcome = parsers::Outcome::kCrashedOther;
    CHECK(triage::next_heal_step(other, ranked, {}).stop_reason.find("not retried") !=
          std::string::npos);
    CHECK(triage::next_heal_step(crashed(parsers::OomKind::kHostKilled), ranked, {}).fix ==
          nullptr);
    auto shared_gpu = crashed(parsers::OomKind::kCuda);
    shared_gpu.events[0].figures.other_processes.push_back({4242, 8ull << 30});
    const auto step = triage::next_heal_step(shared_gpu, ranked, {});
    CHECK(step.fix == nullptr);
    CHECK(step.stop_reason.find("another process") != std::string::npos);
  }

  TEST_CASE("resume-safe fixes are the ones that keep the checkpoint and optimizer state") {
    for (const char* id : {"lower_batch_size", "drop_top_bucket", "cheapen_previews",
                           "enable_gradient_checkpointing", "enable_low_vram", "quantize_model",
                           "layer_offloading", "expandable_segments"}) {
      CHECK_MESSAGE(triage::resume_safe(id), id);
    }
    for (const char* id :
         {"use_8bit_optimizer", "use_bf16", "free_gpu", "reduce_host_memory", "increase_shm"}) {
      CHECK_MESSAGE(!triage::resume_safe(id), id);
    }
  }

  TEST_CASE("argument changes: replaced in either spelling, switches added and removed") {
    const Args argv = {"accelerate",
                       "launch",
                       "train.py",
                       "--train_batch_size",
                       "4",
                       "--resolution=1024",
                       "--gradient_checkpointing",
                       "--output_dir",
                       "out"};
    const Args changed = triage::apply_argument_changes(
        argv, {arg("--train_batch_size", 4, 2), arg("--resolution", 1024, 768),
               arg("--gradient_checkpointing", true, false), arg("--use_8bit_adam", nullptr, true),
               arg("--mixed_precision", nullptr, "bf16")});
    CHECK(changed == Args{"accelerate", "launch", "train.py", "--train_batch_size", "2",
                          "--resolution=768", "--output_dir", "out", "--use_8bit_adam",
                          "--mixed_precision", "bf16"});
    CHECK(triage::apply_argument_changes({"t.py", "--resolution", "1024,1024"},
                                         {arg("--resolution", nlohmann::json::array({1024, 1024}),
                                              nlohmann::json::array({768, 768}))}) ==
          Args{"t.py", "--resolution", "768,768"});
  }

  TEST_CASE("the config path is replaced as it was spelled") {
    CHECK(triage::replace_path_argument({"python", "run.py", "cfg/job.yaml"}, "cfg/job.yaml",
                                        "cfg/job.oomtriage-2.yaml") ==
          Args{"python", "run.py", "cfg/job.oomtriage-2.yaml"});
    CHECK(triage::replace_path_argument({"train.py", "--config_file=a.toml"}, "a.toml", "b.toml") ==
          Args{"train.py", "--config_file=b.toml"});
    CHECK(triage::argument_value({"x", "--output_dir=o"}, "--output_dir") == "o");
    CHECK(triage::argument_value({"x", "--output_dir", "o"}, "--output_dir") == "o");
    CHECK_FALSE(triage::argument_value({"x", "--output_dir"}, "--output_dir").has_value());
  }

  TEST_CASE("each trainer's resume option, added once") {
    const Args base = {"python", "train.py"};
    CHECK(triage::with_resume(Trainer::kAiToolkit, base, std::nullopt).argv == base);
    auto diffusers = triage::with_resume(Trainer::kDiffusers, base, std::nullopt).argv;
    CHECK(diffusers == Args{"python", "train.py", "--resume_from_checkpoint", "latest"});
    CHECK(triage::with_resume(Trainer::kDiffusers, diffusers, std::nullopt).argv == diffusers);
    CHECK(triage::with_resume(Trainer::kSimpleTuner, base, std::nullopt).argv ==
          Args{"python", "train.py", "--resume_from_checkpoint=latest"});
    auto onetrainer = triage::with_resume(Trainer::kOneTrainer, base, std::nullopt).argv;
    CHECK(triage::with_resume(Trainer::kOneTrainer, onetrainer, std::nullopt).argv ==
          Args{"python", "train.py", "--config-value", "continue_last_backup=true"});
    const auto kohya_none = triage::with_resume(Trainer::kSdScripts, base, std::nullopt);
    CHECK_FALSE(kohya_none.missing.empty());
    CHECK(
        triage::with_resume(Trainer::kSdScripts, base, std::string("out/lora-000002-state")).argv ==
        Args{"python", "train.py", "--resume", "out/lora-000002-state",
             "--skip_until_initial_step"});
    CHECK(triage::prepare_first_attempt(Trainer::kSdScripts, base) ==
          Args{"python", "train.py", "--save_state"});
    CHECK(
        triage::with_resume(Trainer::kTransformers, base, std::string("out/checkpoint-750")).argv ==
        Args{"python", "train.py", "--resume_from_checkpoint", "out/checkpoint-750"});
    CHECK_FALSE(triage::with_resume(Trainer::kUnknown, base, std::nullopt).missing.empty());
  }
}
