// tests/daemon/check_confidence_test.cc
//
// What `oomtriage check` says when it cannot know, and how sure it is when it can: an unknown
// model or a README's `$MODEL_NAME` gets no verdict (exit 4, "fits": null, what to pass) rather
// than a FLUX-sized guess; --model names the model; the confidence block lists the fields read
// and the defaults assumed; a default the verdict turns on is named in the verdict line; --gpu
// takes card names and refuses a number above every card. The real binary on made-up inputs.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "tests/support/check_run.h"

using namespace oomtriage::testing;
using nlohmann::json;

namespace {

bool has(const json& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

TEST_SUITE("daemon::check_confidence") {
  TEST_CASE("a model the table does not know gets no verdict, exit 4, and says what to pass") {
    TempDir dir;
    write_file(dir.path / "spec.json",
               R"({"model_family": "mystery-model", "training_type": "lora",
                   "resolution": [1024, 1024], "batch_size": 1})");
    const CheckRun text = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "24GB"});
    CHECK(text.exit_code == 4);
    CHECK(text.out.rfind("unknown: the model 'mystery-model' is not in the architecture table",
                         0) == 0);
    CHECK(text.out.find("--model") != std::string::npos);
    CHECK(text.out.find("--spec") != std::string::npos);

    const CheckRun json_run =
        run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "80GB", "--json"});
    CHECK(json_run.exit_code == 4);
    const json doc = json_run.doc();
    REQUIRE(doc.is_object());
    CHECK(doc["fits"].is_null());
    CHECK(doc["verdict"] == "unknown");
    CHECK(has(doc["unread"], "model"));
    CHECK(doc["confidence"]["model_known"] == false);
    CHECK(doc["confidence"]["model_unknown"].get<std::string>().find("mystery-model") !=
          std::string::npos);

    // --model answers it: the same spec now gets a verdict.
    const CheckRun named = run_check_in(
        dir.path, {"--spec", "spec.json", "--gpu", "80GB", "--json", "--model", "flux1-dev"});
    CHECK(named.exit_code == 0);
    CHECK(named.doc()["family"] == "flux1-dev");
    CHECK(named.doc()["confidence"]["model_known"] == true);

    const CheckRun typo =
        run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "80GB", "--model", "qwen-imag"});
    CHECK(typo.exit_code == 1);
    CHECK(typo.err.find("did you mean qwen-image") != std::string::npos);
  }

  TEST_CASE("a README command with $MODEL_NAME unexpanded is not guessed as FLUX") {
    TempDir dir;
    const std::vector<std::string> command = {"--gpu",
                                              "24GB",
                                              "--json",
                                              "--",
                                              "accelerate",
                                              "launch",
                                              "train_dreambooth_lora.py",
                                              "--pretrained_model_name_or_path=$MODEL_NAME",
                                              "--resolution=1024",
                                              "--train_batch_size=1",
                                              "--mixed_precision=fp16"};
    const CheckRun run = run_check_in(dir.path, command);
    CHECK(run.exit_code == 4);
    const json doc = run.doc();
    REQUIRE(doc.is_object());
    CHECK(doc["fits"].is_null());
    CHECK(doc["confidence"]["model_unknown"].get<std::string>().find(
              "$MODEL_NAME', a shell variable") != std::string::npos);

    std::vector<std::string> named = command;
    named.insert(named.begin(), {"--model", "sdxl"});
    const CheckRun answered = run_check_in(dir.path, named);
    CHECK(answered.exit_code == 0);
    CHECK(answered.doc()["family"] == "sdxl");
  }

  TEST_CASE("the confidence lists the fields read and the defaults assumed") {
    TempDir dir;
    write_file(dir.path / "spec.json",
               R"({"model_family": "sdxl", "training_type": "lora", "resolution": [1024, 1024],
                   "batch_size": 1, "gradient_checkpointing": true, "dtype": "bf16"})");
    const json doc =
        run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "80GB", "--json"}).doc();
    REQUIRE(doc.is_object());
    const json& c = doc["confidence"];
    CHECK(c["model_known"] == true);
    CHECK(has(c["fields_read"], "batch_size"));
    CHECK(has(c["fields_read"], "resolution"));
    CHECK(has(c["defaults_assumed"], "optimizer"));
    CHECK(has(c["defaults_assumed"], "text_encoder_cached"));
    CHECK_FALSE(has(c["defaults_assumed"], "frames"));  // an image model has no frames
    CHECK(c["deciding"].empty());  // an SDXL LoRA fits 80 GB whatever the defaults
  }

  TEST_CASE("a default the verdict turns on is named in the verdict line") {
    TempDir dir;
    // A FLUX.1 LoRA whose text-encoder caching is not stated: on a card between the cached and
    // the resident peaks, caching decides.
    write_file(dir.path / "spec.json",
               R"({"model_family": "flux1-dev", "training_type": "lora",
                   "resolution": [512, 512], "batch_size": 1, "gradient_checkpointing": true,
                   "dtype": "bf16", "quantization": "none", "optimizer": "adamw8bit",
                   "lora_rank": 16, "sampling": {"enabled": false}})");
    write_file(dir.path / "resident.json",
               R"({"model_family": "flux1-dev", "training_type": "lora",
                   "resolution": [512, 512], "batch_size": 1, "gradient_checkpointing": true,
                   "dtype": "bf16", "quantization": "none", "optimizer": "adamw8bit",
                   "lora_rank": 16, "sampling": {"enabled": false},
                   "text_encoder_cached": false})");
    const json cached =
        run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "80GB", "--json"}).doc();
    const json resident =
        run_check_in(dir.path, {"--spec", "resident.json", "--gpu", "80GB", "--json"}).doc();
    REQUIRE(cached.is_object());
    REQUIRE(resident.is_object());
    const uint64_t low = cached["peak_bytes"];
    const uint64_t high = resident["peak_bytes"];
    REQUIRE(high > low + (1ull << 30));
    // A card whose usable memory (card - 0.5 GiB) lies halfway between the two peaks.
    const double card_gib = (low + high) / 2.0 / double(1ull << 30) + 0.5;
    const std::string card = fmt::format("{:.2f}GiB", card_gib);
    const CheckRun between = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", card});
    INFO(between.out);
    CHECK(between.exit_code == 0);
    CHECK(between.out.find(", if the text encoders are cached (not stated)") != std::string::npos);
    const json doc = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", card, "--json"}).doc();
    CHECK(has(doc["confidence"]["deciding"], "the text encoders are cached"));
  }

  TEST_CASE("--gpu takes card names and sizes in any unit - a number above every card is refused") {
    TempDir dir;
    write_file(dir.path / "spec.json", R"({"model_family": "sdxl", "training_type": "lora"})");
    for (const auto& named : std::vector<std::pair<std::string, uint64_t>>{{"RTX 4090", 24},
                                                                           {"3090", 24},
                                                                           {"24G", 24},
                                                                           {"A100-80GB", 80},
                                                                           {"H100", 80},
                                                                           {"L40S", 48},
                                                                           {"T4", 16}}) {
      const std::string& gpu = named.first;
      const uint64_t gib = named.second;
      const CheckRun run = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", gpu, "--json"});
      INFO(gpu << ": " << run.err);
      CHECK(run.exit_code != 1);
      CHECK(run.doc()["card_bytes"] == gib << 30);
    }
    const CheckRun huge = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "3000"});
    CHECK(huge.exit_code == 1);
    CHECK(huge.err.find("--gpu '3000': no card has that much memory") != std::string::npos);
    const CheckRun ambiguous = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "A100"});
    CHECK(ambiguous.exit_code == 1);
    CHECK(ambiguous.err.find("A100-40GB") != std::string::npos);
  }
}
