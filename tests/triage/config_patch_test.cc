// tests/triage/config_patch_test.cc: golden diffs of `fix` edits. YAML keeps comments, key order,
// quoting and formatting outside the changed lines; JSON keeps its key order and indentation.
#include "triage/config_patch.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>

#include "parsers/job_config.h"
#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/skip.h"

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
  INFO(result.error().message);
  REQUIRE(result);
  return triage::unified_diff(kYaml, *result, "a/config.yaml", "b/config.yaml");
}

}  // namespace

TEST_SUITE("triage::config_patch") {
  TEST_CASE("a value is replaced in place, its comment kept") {
    CHECK(patch({{"config.process[0].train.gradient_checkpointing", false, true}}) ==
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
    CHECK(patch({{"config.process[0].train.skip_first_sample", false, true}}) ==
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
    CHECK(patch({{"config.process[0].model.model_kwargs.match_target_res", false, true}}) ==
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
    CHECK(patch({{"config.process[0].model.qtype", "qfloat8", "uint4"},
                 {"config.process[0].datasets[0].resolution",
                  nlohmann::json::array({512, 768, 1024}), nlohmann::json::array({512, 768})}}) ==
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
    const auto result = triage::patch_yaml(
        kYaml, {{"env.PYTORCH_CUDA_ALLOC_CONF", nullptr, "expandable_segments:True"}});
    REQUIRE(result);
    CHECK(*result == kYaml);
  }
  TEST_CASE("a list item that does not exist is an error, not a guess") {
    const auto result =
        triage::patch_yaml(kYaml, {{"config.process[0].datasets[3].num_workers", 2, 1}});
    CHECK_FALSE(result);
    CHECK(result.error().message.find("list item") != std::string::npos);
  }
  TEST_CASE("JSON keeps key order and indentation") {
    const std::string json =
        "{\n  \"job\": \"extension\",\n  \"config\": {\n    \"name\": \"j\",\n    \"process\": [\n"
        "      {\n        \"type\": \"diffusion_trainer\",\n        \"train\": {\n"
        "          \"gradient_checkpointing\": false,\n          \"batch_size\": 1\n        }\n"
        "      }\n    ]\n  }\n}\n";
    const auto result =
        triage::patch_json(json, {{"config.process[0].train.gradient_checkpointing", false, true},
                                  {"config.process[0].model.low_vram", false, true}});
    REQUIRE(result);
    CHECK(triage::unified_diff(json, *result, "a/.job_config.json", "b/.job_config.json") ==
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
      OOMTRIAGE_SKIP(path.string() + " is absent");
    }
    const std::string original = slurp(path);
    const auto result = triage::patch_yaml(
        original, {{"config.process[0].model.model_kwargs.match_target_res", false, true},
                   {"config.process[0].train.gradient_checkpointing", true, false}});
    REQUIRE(result);
    const std::string diff = triage::unified_diff(original, *result, "a", "b");
    CHECK(diff.find("-        gradient_checkpointing: true  # need the on unless you have a ton "
                    "of vram\n+        gradient_checkpointing: false  # need the on unless you "
                    "have a ton of vram\n") != std::string::npos);
    CHECK(diff.find("+        model_kwargs:\n+          match_target_res: true\n") !=
          std::string::npos);
    CHECK(result->find("# 3bit is required for 32GB") != std::string::npos);
    const auto load = parsers::parse_job_config(*result, parsers::ConfigFormat::kYaml, "x");
    REQUIRE(load);
    CHECK(load->match_target_res);
    CHECK_FALSE(load->gradient_checkpointing);
    CHECK(load->qtype.rfind("uint3|", 0) == 0);
  }

  TEST_CASE("property: every scalar and list of the example configs, patched, reads back") {
    // Each leaf gets a new value of its type (a string with a quote, a colon and a brace); the
    // patch must either hold exactly that value at its path with every other leaf unchanged,
    // or refuse with a reason.
    std::vector<fs::path> files;
    for (const fs::path& dir :
         {fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "configs" / "ai-toolkit",
          fs::path(OOMTRIAGE_SOURCE_DIR) / "examples" / "training_folder"}) {
      if (!fs::is_directory(dir)) continue;
      for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (entry.path().extension() == ".yaml") files.push_back(entry.path());
      }
    }
    REQUIRE(!files.empty());  // the project's own examples are always there
    size_t patched = 0, refused = 0;
    for (const fs::path& path : files) {
      const std::string text = slurp(path);
      std::string error;
      const auto doc = parsers::yaml_to_json(text, "config.yaml");
      REQUIRE(doc);
      const nlohmann::json original = nlohmann::json::parse(doc->dump());
      const nlohmann::json flat = original.flatten();
      std::set<std::string> lists;
      for (const auto& [pointer, value] : flat.items()) {
        // "/config/process/0/datasets/0/resolution/2" -> the list "/.../resolution"
        const size_t slash = pointer.rfind('/');
        const std::string last = pointer.substr(slash + 1);
        if (!last.empty() && last.find_first_not_of("0123456789") == std::string::npos) {
          lists.insert(pointer.substr(0, slash));
        }
      }
      std::vector<std::pair<std::string, nlohmann::json>> targets;
      for (const auto& [pointer, value] : flat.items()) {
        if (lists.count(pointer.substr(0, pointer.rfind('/')))) continue;  // list items: below
        nlohmann::json next;
        if (value.is_boolean())
          next = !value.get<bool>();
        else if (value.is_number_integer())
          next = value.get<int64_t>() + 1;
        else if (value.is_number_float())
          next = value.get<double>() + 0.5;
        else if (value.is_string())
          next = "it's: {new} # not a comment";
        else
          continue;
        targets.emplace_back(pointer, next);
      }
      for (const std::string& list : lists) {
        const nlohmann::json& value = original.at(nlohmann::json::json_pointer(list));
        if (!value.is_array() || value.size() < 2 || value[0].is_object() || value[0].is_array()) {
          continue;
        }
        targets.emplace_back(list, nlohmann::json(value.begin(), value.end() - 1));
      }
      for (const auto& [pointer, next] : targets) {
        // JSON pointer -> the patch's path: /config/process/0/train -> config.process[0].train
        std::string dotted;
        std::stringstream parts(pointer.substr(1));
        for (std::string part; std::getline(parts, part, '/');) {
          if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
            dotted += "[" + part + "]";
          } else {
            dotted += (dotted.empty() ? "" : ".") + part;
          }
        }
        if (dotted.find('~') != std::string::npos) continue;  // escaped keys: not config paths
        CAPTURE(path.filename().string());
        CAPTURE(dotted);
        const ConfigChange change{dotted, nullptr, next};
        const auto result = triage::patch_file(parsers::TargetKind::kYaml, text, {change});
        if (!result) {
          CHECK(!result.error().message.empty());
          ++refused;
          continue;
        }
        ++patched;
        const auto after = parsers::yaml_to_json(*result, "config.yaml");
        REQUIRE(after);
        nlohmann::json expected = original;
        expected[nlohmann::json::json_pointer(pointer)] = next;
        CHECK(nlohmann::json::parse(after->dump()) == expected);
      }
    }
    CHECK(patched > 50);
    CHECK(refused * 10 < patched);  // refusals are the rare shapes (lists of mappings, ...)
  }

  TEST_CASE("values and comments holding colons, braces and quotes are edited in place") {
    const std::string yaml =
        "config:\n"
        "  process:\n"
        "    - train:  # defaults: {batch: 1}\n"
        "        batch_size: 2  # was: {4}\n"
        "      sample:\n"
        "        prompts:\n"
        "          - 'a photo: of {sks}'\n"
        "        neg: 'don''t'\n";
    const auto result =
        triage::patch_file(parsers::TargetKind::kYaml, yaml,
                           {{"config.process[0].train.gradient_checkpointing", nullptr, true},
                            {"config.process[0].train.batch_size", 2, 1},
                            {"config.process[0].sample.neg", "don't", "it's"}});
    INFO(result.error().message);
    REQUIRE(result);
    CHECK(result->find("        batch_size: 1  # was: {4}\n") != std::string::npos);
    CHECK(result->find("        gradient_checkpointing: true\n") != std::string::npos);
    CHECK(result->find("        neg: 'it''s'\n") != std::string::npos);
  }

  TEST_CASE("TOML: a value replaced in its table, a key added to a table, a key removed") {
    const std::string toml =
        "# kohya config\n"
        "[training_arguments]\n"
        "train_batch_size = 4   # per GPU\n"
        "sample_prompts = \"/p.txt\"\n"
        "\n"
        "[[datasets]]\n"
        "resolution = [1024, 768]\n"
        "[[datasets]]\n"
        "resolution = 512\n";
    const auto result = triage::patch_file(
        parsers::TargetKind::kToml, toml,
        {{"train_batch_size", 4, 2, parsers::TargetKind::kToml, "", "training_arguments"},
         {"gradient_accumulation_steps", nullptr, 2, parsers::TargetKind::kToml, "",
          "training_arguments"},
         {"sample_prompts", "/p.txt", nullptr, parsers::TargetKind::kToml, "",
          "training_arguments"},
         {"resolution", nlohmann::json::array({1024, 768}), nlohmann::json::array({768, 576}),
          parsers::TargetKind::kToml, "", "datasets[0]"}});
    INFO(result.error().message);
    REQUIRE(result);
    CHECK(*result ==
          "# kohya config\n"
          "[training_arguments]\n"
          "train_batch_size = 2   # per GPU\n"
          "gradient_accumulation_steps = 2\n"
          "\n"
          "[[datasets]]\n"
          "resolution = [768, 576]\n"
          "[[datasets]]\n"
          "resolution = 512\n");
    // A table that is not there is refused, not invented.
    const auto missing =
        triage::patch_file(parsers::TargetKind::kToml, toml,
                           {{"batch_size", nullptr, 1, parsers::TargetKind::kToml, "", "general"}});
    CHECK_FALSE(missing);
    CHECK(missing.error().message.find("[general]") != std::string::npos);
  }
  TEST_CASE(
      "regression (fuzz): a patched config holding invalid UTF-8 is read back, not thrown on") {
    const std::string yaml =
        "config:\n  process:\n    - train:\n        note: \"\xff\xfe\"\n"
        "        batch_size: 2\n";
    Result<std::string> result = std::string();
    CHECK_NOTHROW(result = triage::patch_file(parsers::TargetKind::kYaml, yaml,
                                              {{"config.process[0].train.batch_size", 2, 1}}));
    REQUIRE(result);
    CHECK(result->find("batch_size: 1") != std::string::npos);
  }
}
