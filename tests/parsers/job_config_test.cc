// tests/parsers/job_config_test.cc: AI Toolkit configs into the typed view, defaults applied,
// every real example loading, and broken configs named by file, line and reason.
#include "parsers/job_config.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/files.h"
#include "tests/support/skip.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage::parsers;

namespace {

JobConfig load_yaml(const std::string& text) {
  auto load = parse_job_config(text, ConfigFormat::kYaml, "config.yaml");
  INFO(load.error().message);
  REQUIRE(load);
  return *load;
}

}  // namespace

TEST_SUITE("parsers::job_config") {
  TEST_CASE("absent keys take AI Toolkit's class defaults") {
    const JobConfig c = load_yaml(
        "job: extension\nconfig:\n  name: bare\n  process:\n    - type: sd_trainer\n"
        "      model:\n        name_or_path: black-forest-labs/FLUX.1-dev\n        is_flux: "
        "true\n");
    CHECK(c.name == "bare");
    CHECK(c.gradient_checkpointing);
    CHECK_FALSE(c.gradient_checkpointing_explicit);
    CHECK(c.dtype == "fp32");
    CHECK(c.optimizer == "adamw");
    CHECK(c.batch_size == 1);
    CHECK(c.steps == 1000);
    CHECK(c.sample.every == 100);
    CHECK_FALSE(c.quantize);
    CHECK(c.family == ModelFamily::kFlux1);
  }
  TEST_CASE("train, model, datasets and sample sections are read") {
    const JobConfig c = load_yaml(R"(job: extension
config:
  name: zimg
  process:
    - type: diffusion_trainer
      datasets:
        - folder_path: /a
          resolution: [1536, 512, 1024, 1024]
          batch_size: 4
          cache_latents_to_disk: true
        - folder_path: /b
          resolution: 768
          num_frames: 41
          control_path: [/c1, /c2]
      train:
        batch_size: 2
        gradient_accumulation_steps: 3
        gradient_checkpointing: false  # explicitly off
        dtype: bf16
        optimizer: adamw8bit
        skip_first_sample: true
        cache_text_embeddings: true
      model:
        name_or_path: Tongyi-MAI/Z-Image-Turbo
        arch: "zimage:turbo"
        quantize: true
        qtype: "uint4|ostris/ara.safetensors"
        low_vram: true
        layer_offloading: true
        layer_offloading_transformer_percent: 0.5
        model_kwargs:
          match_target_res: true
      sample:
        sample_every: 250
        width: 1024
        height: 1024
        sample_steps: 8
        num_frames: 41
        prompts:
          - a cat --w 1536 --h 768 --s 30
          - a dog --frames 81
)");
    CHECK(c.family == ModelFamily::kZImage);
    CHECK(c.arch == "zimage:turbo");
    CHECK_FALSE(c.gradient_checkpointing);
    CHECK(c.gradient_checkpointing_explicit);
    CHECK(c.gradient_accumulation == 3);
    CHECK(c.gradient_accumulation_key == "gradient_accumulation_steps");
    CHECK(c.effective_batch_size() == 4);
    REQUIRE(c.datasets.size() == 2);
    CHECK(c.datasets[0].resolutions == std::vector<int>{512, 1024, 1536});
    CHECK(c.datasets[0].resolution_is_list);
    CHECK_FALSE(c.datasets[1].resolution_is_list);
    CHECK(c.all_resolutions() == std::vector<int>{512, 768, 1024, 1536});
    CHECK(c.max_num_frames() == 41);
    CHECK(c.has_control_images());
    CHECK(c.quantize);
    CHECK(c.qtype == "uint4|ostris/ara.safetensors");
    CHECK(c.quantize_te);  // defaults to quantize
    CHECK(c.low_vram);
    CHECK(c.layer_offloading);
    CHECK(c.layer_offloading_transformer_percent == doctest::Approx(0.5));
    CHECK(c.match_target_res);
    CHECK(c.skip_first_sample);
    CHECK(c.cache_text_embeddings);
    CHECK(c.sample.count == 2);
    CHECK(c.sample.max_width == 1536);
    CHECK(c.sample.max_steps == 30);
    CHECK(c.sample.max_frames == 81);
  }
  TEST_CASE("families from arch, legacy flags and model names") {
    const auto family = [](const std::string& model) {
      return load_yaml("config:\n  name: x\n  process:\n    - model:\n" + model).family;
    };
    CHECK(family("        arch: qwen_image_edit_plus\n") == ModelFamily::kQwenImageEditPlus);
    CHECK(family("        arch: \"qwen_image_edit_plus:2511\"\n") ==
          ModelFamily::kQwenImageEditPlus);
    CHECK(family("        arch: qwen_image_edit\n") == ModelFamily::kQwenImageEdit);
    CHECK(family("        arch: qwen_image\n") == ModelFamily::kQwenImage);
    CHECK(family("        arch: flex2\n") == ModelFamily::kFlex2);
    CHECK(family("        arch: flex1\n") == ModelFamily::kFlex1);
    CHECK(family("        arch: flux2_klein_9b\n") == ModelFamily::kFlux2);
    CHECK(family("        arch: chroma\n") == ModelFamily::kChroma);
    CHECK(family("        arch: \"wan21:14b\"\n") == ModelFamily::kWan21);
    CHECK(family("        arch: wan22_14b\n") == ModelFamily::kWan22);
    CHECK(family("        arch: ltx2.3\n") == ModelFamily::kLtx);
    CHECK(family("        arch: sdxl\n") == ModelFamily::kSdxl);
    CHECK(family("        is_flux: true\n        name_or_path: ostris/Flex.1-alpha\n") ==
          ModelFamily::kFlex1);
    CHECK(family("        is_xl: true\n") == ModelFamily::kSdxl);
    CHECK(family("        name_or_path: Qwen/Qwen-Image-Edit-2509\n") ==
          ModelFamily::kQwenImageEditPlus);
    CHECK(family("        name_or_path: runwayml/stable-diffusion-v1-5\n") == ModelFamily::kSd1);
    CHECK(is_video_family(ModelFamily::kWan22));
    CHECK_FALSE(is_video_family(ModelFamily::kFlux1));
  }
  TEST_CASE("samples[] items override the section, and control images are seen") {
    const JobConfig c = load_yaml(R"(config:
  name: q
  process:
    - sample:
        width: 1024
        height: 1024
        samples:
          - prompt: "edit --w 1280"
            ctrl_img_1: /x.png
          - prompt: plain
            height: 1536
)");
    CHECK(c.sample.uses_samples_list);
    CHECK(c.sample.count == 2);
    CHECK(c.sample.max_width == 1280);
    CHECK(c.sample.max_height == 1536);
    CHECK(c.sample.has_control_images);
  }
  TEST_CASE("JSON job configs and the process config printed in log.txt") {
    auto json = parse_job_config(
        R"({"job":"extension","config":{"name":"j","process":[{"type":"diffusion_trainer",
        "train":{"batch_size":2,"gradient_checkpointing":true},"model":{"arch":"wan22_14b"}}]}})",
        ConfigFormat::kJson, ".job_config.json");
    REQUIRE(json);
    CHECK(json->batch_size == 2);
    CHECK(json->family == ModelFamily::kWan22);
    auto printed = parse_job_config(
        "{\n    \"type\": \"sd_trainer\",\n    \"train\": {\"batch_size\": 3}\n}\n",
        ConfigFormat::kPrintedProcess, "log.txt");
    REQUIRE(printed);
    CHECK(printed->batch_size == 3);
    CHECK(printed->process_path == "config.process[0]");
  }
  TEST_CASE("broken configs give one line with file, line and reason") {
    CHECK(parse_job_config("config:\n  name: [unclosed\n", ConfigFormat::kYaml, "c.yaml")
              .error()
              .message == "c.yaml:3: end of sequence flow not found");
    {
      // A bad field is a problem; the rest of the config stands and only its knob is unknown.
      const auto load = parse_job_config(
          "config:\n  name: x\n  process:\n    - train:\n        batch_size: two\n"
          "        gradient_checkpointing: false\n",
          ConfigFormat::kYaml, "c.yaml");
      CHECK_MESSAGE(load, (load ? "" : load.error().message));
      REQUIRE(load);
      REQUIRE(load->problems.size() == 1);
      CHECK(load->problems[0] ==
            "c.yaml:5: train.batch_size must be a non-negative integer, got \"two\"; the rest of "
            "the config is used");
      CHECK_FALSE(load->knows(Knob::kBatchSize));
      CHECK(load->knows(Knob::kGradientCheckpointing));
      CHECK(load->gradient_checkpointing == false);
    }
    CHECK(parse_job_config("job: extension\nconfig:\n  name: x\n", ConfigFormat::kYaml, "c.yaml")
              .error()
              .message == "c.yaml:2: config.process is missing or empty");
    CHECK(parse_job_config("job: extension\n", ConfigFormat::kYaml, "c.yaml").error().message ==
          "c.yaml: the config has no `config` section");
    CHECK(parse_job_config("{nope", ConfigFormat::kJson, "j.json").error().message ==
          "j.json: not valid JSON");
    {
      const auto load = parse_job_config(
          "config:\n  process:\n    - datasets:\n        - resolution: [512, big]\n",
          ConfigFormat::kYaml, "c.yaml");
      REQUIRE(load);
      REQUIRE(load->problems.size() == 1);
      CHECK(load->problems[0].find("datasets[0].resolution[1] must be a positive integer") !=
            std::string::npos);
      CHECK_FALSE(load->knows(Knob::kResolution));
    }
  }
  TEST_CASE("every real AI Toolkit example config loads") {
    const fs::path dir =
        fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "configs" / "ai-toolkit";
    if (!fs::is_directory(dir)) {
      OOMTRIAGE_SKIP(dir.string() + " is absent");
    }
    int loaded = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") continue;
      CAPTURE(entry.path().filename().string());
      auto load = parse_job_config(slurp(entry.path()), ConfigFormat::kYaml,
                                   entry.path().filename().string());
      CHECK_MESSAGE(load, (load ? "" : load.error().message));
      REQUIRE(load);
      const JobConfig& c = *load;
      CHECK_FALSE(c.name.empty());
      CHECK(c.family != ModelFamily::kOther);
      CHECK(c.gradient_checkpointing);
      CHECK_FALSE(c.datasets.empty());
      const std::string file = entry.path().filename().string();
      if (file == "train_lora_qwen_image_edit_2509_32gb.yaml") {
        CHECK(c.family == ModelFamily::kQwenImageEditPlus);
        CHECK(c.has_control_images());
        CHECK(c.cache_text_embeddings);
        CHECK(c.qtype.rfind("uint3|", 0) == 0);
        CHECK(c.sample.count == 5);
      }
      if (file == "train_lora_zimage_turbo_32gb.yaml") {
        CHECK(c.family == ModelFamily::kZImage);
        CHECK(c.all_resolutions() == std::vector<int>{1024});  // [1024, 1024] is one bucket
        CHECK(c.batch_size == 2);
      }
      if (file == "train_lora_flux_24gb.yaml") {
        CHECK(c.family == ModelFamily::kFlux1);
        CHECK(c.gradient_accumulation_key == "gradient_accumulation_steps");
      }
      if (file == "train_lora_wan22_14b_24gb.yaml") CHECK(c.family == ModelFamily::kWan22);
      if (file == "train_lora_flex2_24gb.yaml") CHECK(c.family == ModelFamily::kFlex2);
      ++loaded;
    }
    CHECK(loaded >= 6);
  }
  TEST_CASE(
      "regression (fuzz): a wrong-typed value with invalid UTF-8 is a problem line, not a throw") {
    const std::string yaml =
        "config:\n  process:\n    - datasets:\n        - resolution: \"a\xff\"\n";
    auto load = parse_job_config(yaml, ConfigFormat::kYaml, "c.yaml");
    // A problem line (the bytes replaced), the rest of the config kept, the knob unknown.
    REQUIRE(load);
    REQUIRE(load->problems.size() == 1);
    CHECK(load->problems[0].find("c.yaml:4: datasets[0].resolution must be an integer") == 0);
    CHECK_FALSE(load->knows(Knob::kResolution));
  }
}
