// tests/triage/config_patch_test.cc: golden diffs of `fix` edits. YAML keeps comments, key order,
// quoting and formatting outside the changed lines; JSON keeps its key order and indentation.
#include "triage/config_patch.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "parsers/job_config.h"

#include "tests/support/files.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage;
using triage::ConfigChange;

namespace {

const char* kYaml = R"(---
job: extension
config:
  # this name will be the folder and filename name
  name: "my_lora"
  process:
    - type: 'diffusion_trainer'
      datasets:
        - folder_path: "/data"  # images and captions
          resolution:
            - 512
            - 768
            - 1024
      train:
        batch_size: 4
        gradient_checkpointing: false  # need the on unless you have a ton of vram
        # uncomment this to skip the pre training sample
        # skip_first_sample: true
        dtype: bf16

      model:
        name_or_path: "Qwen/Qwen-Image-Edit-2509"
        qtype: "qfloat8"  # 8-bit
      sample:
        width: 1024
meta:
  name: "[name]"
)";

std::string patch(const std::vector<ConfigChange>& changes) {
  const auto result = triage::patch_yaml(kYaml, changes);
  INFO(result.error);
  REQUIRE(result.text);
  return triage::unified_diff(kYaml, *result.text, "a/config.yaml", "b/config.yaml");
}


}  // namespace

TEST_SUITE("triage::config_patch") {
  TEST_CASE("a value is replaced in place, its comment kept") {
    CHECK(patch({{"config.process[0].train.gradient_checkpointing", "false", "true"}}) ==
          "--- a/config.yaml\n+++ b/config.yaml\n"
          "@@ -13,7 +13,7 @@\n"
          "             - 1024\n"
          "       train:\n"
          "         batch_size: 4\n"
          "-        gradient_checkpointing: false  # need the on unless you have a ton of vram\n"
          "+        gradient_checkpointing: true  # need the on unless you have a ton of vram\n"
          "         # uncomment this to skip the pre training sample\n"
          "         # skip_first_sample: true\n"
          "         dtype: bf16\n");
  }
  TEST_CASE("a missing key goes at the end of its section, with the section's indentation") {
    CHECK(patch({{"config.process[0].train.skip_first_sample", "false", "true"}}) ==
          "--- a/config.yaml\n+++ b/config.yaml\n"
          "@@ -17,6 +17,7 @@\n"
          "         # uncomment this to skip the pre training sample\n"
          "         # skip_first_sample: true\n"
          "         dtype: bf16\n"
          "+        skip_first_sample: true\n"
          " \n"
          "       model:\n"
          "         name_or_path: \"Qwen/Qwen-Image-Edit-2509\"\n");
  }
  TEST_CASE("a missing parent section is created") {
    CHECK(patch({{"config.process[0].model.model_kwargs.match_target_res", "false", "true"}}) ==
          "--- a/config.yaml\n+++ b/config.yaml\n"
          "@@ -21,6 +21,8 @@\n"
          "       model:\n"
          "         name_or_path: \"Qwen/Qwen-Image-Edit-2509\"\n"
          "         qtype: \"qfloat8\"  # 8-bit\n"
          "+        model_kwargs:\n"
          "+          match_target_res: true\n"
          "       sample:\n"
          "         width: 1024\n"
          " meta:\n");
  }
  TEST_CASE("quoted strings keep their quotes, and a block list stays a block list") {
    CHECK(patch({{"config.process[0].model.qtype", "\"qfloat8\"", "\"uint4\""},
                 {"config.process[0].datasets[0].resolution", "[512,768,1024]", "[512,768]"}}) ==
          "--- a/config.yaml\n+++ b/config.yaml\n"
          "@@ -10,7 +10,6 @@\n"
          "           resolution:\n"
          "             - 512\n"
          "             - 768\n"
          "-            - 1024\n"
          "       train:\n"
          "         batch_size: 4\n"
          "         gradient_checkpointing: false  # need the on unless you have a ton of vram\n"
          "@@ -20,7 +19,7 @@\n"
          " \n"
          "       model:\n"
          "         name_or_path: \"Qwen/Qwen-Image-Edit-2509\"\n"
          "-        qtype: \"qfloat8\"  # 8-bit\n"
          "+        qtype: \"uint4\"  # 8-bit\n"
          "       sample:\n"
          "         width: 1024\n"
          " meta:\n");
  }
  TEST_CASE("environment changes are not written into the config") {
    const auto result =
        triage::patch_yaml(kYaml, {{"env.PYTORCH_CUDA_ALLOC_CONF", "null", "\"expandable_segments:True\""}});
    REQUIRE(result.text);
    CHECK(*result.text == kYaml);
  }
  TEST_CASE("a list item that does not exist is an error, not a guess") {
    const auto result = triage::patch_yaml(kYaml, {{"config.process[0].datasets[3].num_workers", "2", "1"}});
    CHECK_FALSE(result.text);
    CHECK(result.error.find("list item") != std::string::npos);
  }
  TEST_CASE("JSON keeps key order and indentation") {
    const std::string json =
        "{\n  \"job\": \"extension\",\n  \"config\": {\n    \"name\": \"j\",\n    \"process\": [\n"
        "      {\n        \"type\": \"diffusion_trainer\",\n        \"train\": {\n"
        "          \"gradient_checkpointing\": false,\n          \"batch_size\": 1\n        }\n"
        "      }\n    ]\n  }\n}\n";
    const auto result = triage::patch_json(
        json, {{"config.process[0].train.gradient_checkpointing", "false", "true"},
               {"config.process[0].model.low_vram", "false", "true"}});
    REQUIRE(result.text);
    CHECK(triage::unified_diff(json, *result.text, "a/.job_config.json", "b/.job_config.json") ==
          "--- a/.job_config.json\n+++ b/.job_config.json\n"
          "@@ -6,8 +6,11 @@\n"
          "       {\n"
          "         \"type\": \"diffusion_trainer\",\n"
          "         \"train\": {\n"
          "-          \"gradient_checkpointing\": false,\n"
          "+          \"gradient_checkpointing\": true,\n"
          "           \"batch_size\": 1\n"
          "+        },\n"
          "+        \"model\": {\n"
          "+          \"low_vram\": true\n"
          "         }\n"
          "       }\n"
          "     ]\n");
  }
  TEST_CASE("the real Qwen-Image-Edit-2509 example: one added line, comments intact") {
    const fs::path path = fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "configs" /
                          "ai-toolkit" / "train_lora_qwen_image_edit_2509_32gb.yaml";
    if (!fs::exists(path)) {
      MESSAGE("skipped: " << path.string() << " is absent");
      return;
    }
    const std::string original = slurp(path);
    const auto result = triage::patch_yaml(
        original, {{"config.process[0].model.model_kwargs.match_target_res", "false", "true"},
                   {"config.process[0].train.gradient_checkpointing", "true", "false"}});
    REQUIRE(result.text);
    const std::string diff = triage::unified_diff(original, *result.text, "a", "b");
    CHECK(diff.find("-        gradient_checkpointing: true  # need the on unless you have a ton "
                    "of vram\n+        gradient_checkpointing: false  # need the on unless you "
                    "have a ton of vram\n") != std::string::npos);
    CHECK(diff.find("+        model_kwargs:\n+          match_target_res: true\n") !=
          std::string::npos);
    CHECK(result.text->find("# 3bit is required for 32GB") != std::string::npos);
    const auto load = parsers::parse_job_config(*result.text, parsers::ConfigFormat::kYaml, "x");
    REQUIRE(load.config);
    CHECK(load.config->match_target_res);
    CHECK_FALSE(load.config->gradient_checkpointing);
    CHECK(load.config->qtype.rfind("uint3|", 0) == 0);
  }
}
