// tests/parsers/trainer_readers_test.cc
//
// The readers take what each trainer takes (issue 44), on made-up configs and command lines of
// every class: SimpleTuner's model_family/flavour, precise base_model_precision words, LyCORIS
// and the data-backend JSON; kohya/musubi block swap, fp8, full fine-tune scripts, --task and the
// dataset TOML beside a command; OneTrainer's training_method, component weight_dtype and
// offloading; diffusers' scripts, prior preservation, EMA, fp32.
#include <doctest/doctest.h>

#include <tuple>

#include "parsers/job_config.h"
#include "parsers/native_config.h"
#include "parsers/trainer_words.h"

using namespace oomtriage::parsers;

namespace {

JobConfig native(Trainer trainer, std::vector<NativeFile> files) {
  oomtriage::Result<JobConfig> read = read_native_config(trainer, files);
  REQUIRE(read);
  return *read;
}

JobConfig command(Trainer trainer,
                  const std::vector<std::pair<std::string, std::string>>& arguments,
                  const std::vector<NativeFile>& beside = {}) {
  std::optional<JobConfig> read =
      config_from_printed_arguments(trainer, arguments, true, "the command line", beside);
  REQUIRE(read);
  return *read;
}

}  // namespace

TEST_SUITE("trainer readers") {
  TEST_CASE("SimpleTuner: family and flavour, precise precision words, LyCORIS, data backends") {
    const JobConfig c =
        native(Trainer::kSimpleTuner,
               {{TargetKind::kJson, "config.json",
                 R"({"--model_family": "wan", "--model_flavour": "t2v-480p-1.3b-2.1",
              "--model_type": "lora", "--lora_type": "lycoris",
              "--base_model_precision": "int4-quanto", "--train_batch_size": 1})"},
                {TargetKind::kJson, "lycoris.json", R"({"algo": "loha", "factor": 16})"}});
    CHECK(c.family_id == "wan21-t2v-1.3b");
    CHECK(c.network_type == "loha");
    CHECK(c.quantize);
    CHECK(c.qtype == "int4");

    for (const auto& [word, expected] :
         std::vector<std::pair<std::string, std::string>>{{"int2-quanto", "int2"},
                                                          {"nf4-bnb", "nf4"},
                                                          {"fp8-torchao", "fp8"},
                                                          {"int8-torchao", "int8"},
                                                          {"no_change", "none"}}) {
      const std::string written = word;
      CAPTURE(written);
      CHECK(quantization_word(word) == expected);
    }

    const JobConfig video =
        native(Trainer::kSimpleTuner,
               {{TargetKind::kJson, "config.json",
                 R"({"model_family": "sdxl", "model_type": "full", "lora_type": "standard",
              "use_ema": true, "ema_device": "accelerator", "train_batch_size": 2})"},
                {TargetKind::kJson, "multidatabackend.json",
                 R"([{"id": "clips", "type": "local", "dataset_type": "video", "resolution": 0.5,
               "resolution_type": "area", "video": {"num_frames": 61}},
              {"id": "embeds", "dataset_type": "text_embeds"}])"}});
    CHECK(video.family_id == "sdxl");
    CHECK(video.network_type == "full");  // lora_type beside a full fine-tune says nothing
    CHECK(video.ema == true);
    REQUIRE(video.datasets.size() == 1);
    CHECK(video.max_num_frames() == 61);
    CHECK(video.max_resolution() == 704);  // 0.5 megapixels: a side of ~724, in 64s
    CHECK(video.effective_batch_size() == 2);
  }

  TEST_CASE("SimpleTuner: EMA kept on the CPU by default costs no GPU copy") {
    const JobConfig c = native(
        Trainer::kSimpleTuner,
        {{TargetKind::kJson, "config.json", R"({"--model_family": "flux", "--use_ema": true})"}});
    CHECK(c.family_id == "flux1-dev");
    CHECK(c.ema == false);
  }

  TEST_CASE("kohya: block swap, fp8, fused backward, full_bf16, network_args algo") {
    const JobConfig c = native(Trainer::kSdScripts, {{TargetKind::kToml, "config.toml", R"(
pretrained_model_name_or_path = "/models/flux1-dev.safetensors"
network_module = "lycoris.kohya"
network_args = ["algo=lokr", "factor=8"]
fp8_base = true
fp8_scaled = false
blocks_to_swap = 18
cache_text_encoder_outputs_to_disk = true
)"}});
    CHECK(c.network_type == "lokr");
    CHECK(c.quantize);
    CHECK(c.qtype == "fp8");
    CHECK(c.blocks_to_swap == 18);
    CHECK(c.cache_text_embeddings);

    const JobConfig full = command(
        Trainer::kSdScripts,
        {{"fused_backward_pass", "True"}, {"full_bf16", "True"}, {"optimizer_type", "adafactor"}});
    CHECK(full.fused_backward_pass == true);
    CHECK(full.weight_dtype == "bf16");
  }

  TEST_CASE("kohya and musubi scripts say the family and the training type") {
    for (const auto& [script, type, family] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"sdxl_train.py", "full", "sdxl"},
             {"/x/sd-scripts/flux_train.py", "full", "flux1-dev"},
             {"train_db.py", "full", ""},
             {"sdxl_train_network.py", "lora", "sdxl"},
             {"src/musubi_tuner/qwen_image_train_network.py", "lora", "qwen-image"},
             {"fpack_train_network.py", "lora", "hunyuan-video"},
             {"hv_train_network.py", "lora", "hunyuan-video"},
             {"train_controlnet_sdxl.py", "controlnet", "sdxl"},
             {"train_dreambooth.py", "full", ""},
             {"train_text_to_image_lora_sdxl.py", "lora", "sdxl"},
             {"train_dreambooth_lora_flux_kontext.py", "lora", "flux1-kontext"}}) {
      const std::string named = script;
      CAPTURE(named);
      const auto facts = script_facts(script);
      REQUIRE(facts);
      CHECK(facts->training_type == type);
      CHECK(facts->family == family);
    }
    CHECK_FALSE(script_facts("my_own_trainer.py"));
    CHECK(script_in({"accelerate", "launch", "--num_processes", "1", "wan_train_network.py",
                     "--task", "t2v-1.3B"}) == "wan_train_network.py");
  }

  TEST_CASE("musubi: --task names Wan's size, the dataset TOML beside the command its frames") {
    const JobConfig c = command(
        Trainer::kSdScripts,
        {{"task", "t2v-A14B"}, {"dit", "/m/low.safetensors"}, {"dataset_config", "ds.toml"}},
        {{TargetKind::kToml, "ds.toml", R"(
[general]
resolution = [960, 544]
batch_size = 1
[[datasets]]
video_directory = "/v"
target_frames = [1, 25, 45]
frame_extraction = "head"
)"}});
    CHECK(c.family_id == "wan22-14b");
    REQUIRE(c.datasets.size() == 1);
    CHECK(c.datasets[0].width == 960);
    CHECK(c.datasets[0].height == 544);
    CHECK(c.max_num_frames() == 45);
    CHECK(musubi_task_family("i2v-14B") == "wan21-i2v-14b");
    CHECK(musubi_task_family("t2v-1.3B") == "wan21-t2v-1.3b");
    CHECK(musubi_task_family("ti2v-5B") == "wan22-ti2v-5b");
  }

  TEST_CASE("OneTrainer: training method, component weight dtypes, offloading, model type") {
    const JobConfig c = native(Trainer::kOneTrainer, {{TargetKind::kJson, "ot.json", R"({
  "__version": 10, "model_type": "QWEN", "training_method": "LORA", "batch_size": 2,
  "resolution": "512", "gradient_checkpointing": "CPU_OFFLOADED",
  "transformer": {"train": true, "weight_dtype": "FLOAT_8", "offload_fraction": 0.5},
  "text_encoder": {"train": false, "weight_dtype": "NFLOAT_4"}
})"}});
    CHECK(c.family_id == "qwen-image");
    CHECK(c.network_type == "lora");
    CHECK(c.qtype == "fp8");
    CHECK(c.qtype_te == "nf4");
    CHECK(c.layer_offload_fraction == doctest::Approx(0.5));
    CHECK(c.activation_offload);

    const JobConfig full = native(Trainer::kOneTrainer, {{TargetKind::kJson, "ot.json", R"({
  "__version": 10, "model_type": "STABLE_DIFFUSION_XL_10_BASE",
  "unet": {"weight_dtype": "BFLOAT_16"}, "ema": "GPU"
})"}});
    CHECK(full.family_id == "sdxl");
    CHECK(full.network_type == "full");  // OneTrainer's default training_method is FINE_TUNE
    CHECK_FALSE(full.quantize);
    CHECK(full.weight_dtype == "bf16");
    CHECK(full.ema == true);
    CHECK(onetrainer_family("FLUX_DEV_1") == "flux1-dev");
    CHECK(onetrainer_family("SOMETHING_NEW") == "");
    CHECK(training_word("EMBEDDING") == "embedding");
  }

  TEST_CASE("diffusers: fp32 without --mixed_precision, prior preservation, EMA, 8-bit Adam") {
    const JobConfig c = command(Trainer::kDiffusers, {{"pretrained_model_name_or_path", "$MODEL"},
                                                      {"with_prior_preservation", "True"},
                                                      {"use_ema", "True"},
                                                      {"use_8bit_adam", "True"},
                                                      {"optimizer", "AdamW"}});
    CHECK(c.dtype == "fp32");
    CHECK(c.prior_preservation);
    CHECK(c.ema == true);
    CHECK(c.optimizer == "adamw8bit");
    CHECK(c.name_or_path == "$MODEL");  // kept raw: an unexpanded variable is not a model
    CHECK(c.family == ModelFamily::kOther);
  }
}
