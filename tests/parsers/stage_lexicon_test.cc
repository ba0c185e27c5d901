// tests/parsers/stage_lexicon_test.cc: the shared stage vocabulary on every kind of text it is
// applied to — marker lines, bar descriptions, frame functions, module paths, UI node types and
// failure lines — including texts of trainers no rule was written for.
#include "parsers/stage_lexicon.h"

#include <doctest/doctest.h>

#include <string>

#include "parsers/context_patterns.h"

using namespace oomtriage::parsers;

TEST_SUITE("parsers::stage_lexicon") {
  TEST_CASE(
      "tokens split camelCase, snake_case and punctuation, and a data loader stays one word") {
    CHECK(stage_tokens("CheckpointLoaderSimple") == "checkpoint loader simple");
    CHECK(stage_tokens("VAEDecodeTiled") == "vae decode tiled");
    CHECK(stage_tokens("cache_text_encoder_outputs") == "cache text encoder outputs");
    CHECK(stage_tokens("Epoch 1/10 Steps:") == "epoch 1 10 steps");
    CHECK(stage_tokens("Validation DataLoader 0") == "validation dataloader 0");
    CHECK(stage_tokens("") == "");
    CHECK(stage_tokens(std::string(2000, 'a')).size() == 512);  // bounded
  }

  TEST_CASE("each stage from texts of many trainers") {
    struct Case {
      const char* text;
      Phase phase;
    };
    const Case cases[] = {
        // marker lines
        {"Caching latents for /data/images", Phase::kCacheLatents},
        {"Caching text_embeddings for /data/images", Phase::kCacheTextEmbeddings},
        {"Encoding prompts with T5", Phase::kCacheTextEmbeddings},
        {"Precomputing validation prompt embeddings", Phase::kCacheTextEmbeddings},
        {"Loading Flux model", Phase::kModelLoad},
        {"Loading UMT5EncoderModel", Phase::kModelLoad},
        {"Moving model to GPU", Phase::kModelLoad},
        {"Quantizing Transformer", Phase::kQuantize},
        {"Running calibration for fp8 weights", Phase::kQuantize},
        {"Generating baseline samples before training", Phase::kSampling},
        {"Running validation... ", Phase::kSampling},
        {"Saving at step 250", Phase::kSaving},
        {"saving checkpoint: /out/lora-000002.safetensors", Phase::kSaving},
        {"Starting training", Phase::kTrainStep},
        // bar descriptions
        {"Generating Images", Phase::kSampling},
        {"validation steps", Phase::kSampling},
        {"Epoch (valid)", Phase::kSampling},
        {"Sanity Checking DataLoader 0", Phase::kSampling},
        {"Calculate validation loss (ALL)", Phase::kSampling},
        {"Loading checkpoint shards", Phase::kModelLoad},
        {"Caching latents to disk", Phase::kCacheLatents},
        {"Epoch 0", Phase::kTrainStep},
        {"train", Phase::kTrainStep},
        // frame functions and module paths
        {"generate_images", Phase::kSampling},
        {"log_validation", Phase::kSampling},
        {"_cache_one_latent", Phase::kCacheLatents},
        {"encode_prompt", Phase::kCacheTextEmbeddings},
        {"load_state_dict", Phase::kModelLoad},
        {"from_pretrained", Phase::kModelLoad},
        {"save_pretrained", Phase::kSaving},
        {"predict_noise", Phase::kTrainStep},
        {"prediction_step", Phase::kSampling},
        {"calibration/minmax", Phase::kQuantize},
        {"pipelines/flux/pipeline_flux", Phase::kSampling},
        {"mgds/pipelineModules/EncodeVAE", Phase::kCacheLatents},
        // UI node types
        {"KSampler", Phase::kSampling},
        {"SamplerCustomAdvanced", Phase::kSampling},
        {"VAEDecode", Phase::kSampling},
        {"UNETLoader", Phase::kModelLoad},
        {"DualCLIPLoader", Phase::kModelLoad},
        {"CLIPTextEncode", Phase::kCacheTextEmbeddings},
        {"VAEEncode", Phase::kCacheLatents},
        {"FluxTrainLoop", Phase::kTrainStep},
        {"FluxTrainValidate", Phase::kSampling},
        {"FluxTrainSave", Phase::kSaving},
        // failure lines
        {"stage 'latents' failed, see above", Phase::kCacheLatents},
        {"Validation run failed at step 500: CUDA error", Phase::kSampling},
    };
    for (const Case& c : cases) {
      CAPTURE(std::string(c.text));
      CHECK(stage_of(c.text) == c.phase);
    }
  }

  TEST_CASE("the more specific phrase wins over the words it contains") {
    CHECK(stage_of("latents = vae.encode(pixels).latent_dist.sample()") == Phase::kCacheLatents);
    CHECK(stage_of("Loading text encoder") == Phase::kModelLoad);
    CHECK(stage_of("Caching text encoder outputs") == Phase::kCacheTextEmbeddings);
    CHECK(stage_of("UNLOADING TEXT ENCODER") == Phase::kUnknown);
    CHECK(stage_of("Saving batch to exp/batch-0f12.pt") != Phase::kSaving);  // a debug dump
    CHECK(stage_of("Loading 40 images") == Phase::kUnknown);
    CHECK(stage_of("next(iter(dataloader))") == Phase::kTrainStep);  // "iter", not a load
    CHECK(stage_of("latents", false) == Phase::kUnknown);  // a lone word only where allowed
    CHECK(stage_of("latents") == Phase::kCacheLatents);
  }

  TEST_CASE("frames: function first, then module path, then the source line") {
    auto frame = [](const char* line) { return traceback_frame(line).value_or(FrameEvidence{}); };
    const char* calibration =
        "File \"/venv/lib/python3.11/site-packages/mylib/calibration/minmax.py\", line 7, in "
        "forward";
    CHECK(frame(calibration).phase == Phase::kQuantize);
    CHECK(frame(calibration).strong);
    // The same module in the user's own folder: its folders are no stage evidence.
    CHECK(frame("File \"/w/mylib/calibration/minmax.py\", line 7, in forward").phase ==
          Phase::kUnknown);
    const FrameEvidence apply = frame(
        "File \"/venv/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1160, "
        "in _apply");
    CHECK(apply.phase == Phase::kModelLoad);
    CHECK(apply.strong);
    // Entry points name no stage: "train" is weak evidence, "main" none.
    const FrameEvidence train =
        frame("File \"/w/sd-scripts/train_network.py\", line 1045, in train");
    CHECK(train.phase == Phase::kTrainStep);
    CHECK_FALSE(train.strong);
    CHECK(frame("File \"/w/x/run.py\", line 3, in main").phase == Phase::kUnknown);
    CHECK(frame("File \"/w/x/run.py\", line 3, in main").wants_source_line);
    CHECK(frame("File \"/w/diffusers/pipelines/pipeline_utils.py\", line 9, in from_pretrained")
              .phase == Phase::kModelLoad);  // the function wins over the "pipeline" folder
    CHECK(frame("│ /w/sd-scripts/library/train_util.py:2211 in cache_latents").phase ==
          Phase::kCacheLatents);
    CHECK(source_line_phase("self.transformer = quantize(self.transformer, weights=qfloat8)") ==
          Phase::kQuantize);
    CHECK(source_line_phase("model_pred = unet(noisy_latents, timesteps).sample") ==
          Phase::kUnknown);  // ".sample" in a training step is no sampling
  }

  TEST_CASE("node types, announcements and failure lines") {
    CHECK(node_type("- **Node Type:** KSampler") == "KSampler");
    CHECK(node_type("Exception in node 12 (VAEDecode)") == "VAEDecode");
    CHECK(node_type("got prompt") == "");
    CHECK(announced_stage("Caching latents for /data") == Phase::kCacheLatents);
    CHECK(announced_stage("Evaluating the model on 200 prompts") == Phase::kSampling);
    CHECK(announced_stage("Using 8-bit Adam") == Phase::kUnknown);
    CHECK(announced_stage("stage 1/4: encoding captions") == Phase::kCacheTextEmbeddings);
    CHECK(announced_stage("Step 2: Loading the base model") == Phase::kModelLoad);
    CHECK(failed_stage("ERROR: stage 'text-encode' failed") == Phase::kCacheTextEmbeddings);
    CHECK(announced_stage("the model is loading") == Phase::kUnknown);  // no gerund first
    CHECK(failed_stage("stage 'latents' failed, see above") == Phase::kCacheLatents);
    CHECK(failed_stage("Caching latents") == Phase::kUnknown);  // no failure word
    CHECK(failed_stage("subprocess.CalledProcessError: Command '['python', 'train.py']' returned "
                       "non-zero exit status 1.") == Phase::kUnknown);  // a script, not a stage
  }

  TEST_CASE("every lexicon rule compiles") {
    const auto compiled = stage_lexicon_ok();
    CHECK_MESSAGE(compiled, (compiled ? "" : compiled.error().message));
  }
}
