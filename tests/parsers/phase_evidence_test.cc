// tests/parsers/phase_evidence_test.cc: the phase of an OOM on invented logs of trainers and
// frameworks nobody wrote rules for, one class per case (docs/detection.md "Phase precedence"):
// moving a model onto the device is model loading whoever called it; words in the user's paths
// are no evidence; quantization libraries and UI runtimes speak their own vocabulary; and the
// precedence table, every source drawn beside every other.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "parsers/context_patterns.h"
#include "parsers/log_analyzer.h"
#include "tests/support/log_samples.h"

using namespace oomtriage::parsers;
using namespace oomtriage::test;

namespace {

constexpr const char* kSite = "/opt/venv/lib/python3.11/site-packages/";

std::string frame(const std::string& path, int line, const std::string& function,
                  const std::string& source = "") {
  std::string out = "  File \"" + path + "\", line " + std::to_string(line) + ", in " + function;
  out += "\n";
  if (!source.empty()) out += "    " + source + "\n";
  return out;
}

std::string torch_frame(const std::string& module, int line, const std::string& function) {
  return frame(std::string(kSite) + "torch/" + module + ".py", line, function);
}

// A training bar before the error: the training step is the baseline every case must beat.
std::string training_first() { return bar("Training", 40, 1000) + "\n"; }

Phase phase_of(const std::string& log) { return only_event(analyze_log(log)).phase; }

}  // namespace

TEST_SUITE("parsers::phase evidence") {
  TEST_CASE("moving a model onto the device is model loading, whatever called it") {
    const std::string apply = torch_frame("nn/modules/module", 1340, "to") +
                              torch_frame("nn/modules/module", 900, "_apply") +
                              torch_frame("nn/modules/module", 927, "_apply");
    struct Case {
      const char* name;
      std::string log;
    };
    const Case cases[] = {
        {"a sampler brings the text encoder back (AI Toolkit-like)",
         training_first() + traceback(frame("/app/trainer/sd_trainer.py", 310, "sample_images") +
                                      frame("/app/trainer/sd_trainer.py", 402, "generate_images",
                                            "self.text_encoder.to(self.device_torch)") +
                                      apply)},
        {"an inference script's pipe.to(\"cuda\") (diffusers)",
         traceback(frame("/home/me/infer.py", 40, "infer", "pipe = pipe.to(\"cuda\")") +
                   frame(std::string(kSite) + "diffusers/pipelines/pipeline_utils.py", 481, "to") +
                   apply)},
        {"accelerator.prepare inside a training entry point",
         traceback(frame("/w/finetune.py", 700, "train",
                         "unet, optimizer = accelerator.prepare(unet, optimizer)") +
                   frame(std::string(kSite) + "accelerate/accelerator.py", 1292, "prepare") +
                   frame(std::string(kSite) + "accelerate/accelerator.py", 1426, "prepare_model") +
                   apply)},
        {"DistributedDataParallel's constructor and its reducer",
         traceback(frame("/w/train_ddp.py", 88, "main") +
                   torch_frame("nn/parallel/distributed", 795, "__init__") +
                   torch_frame("nn/parallel/distributed", 1140, "_ddp_init_helper"))},
        {"diffusers' enable_model_cpu_offload in a generate function",
         traceback(frame("/w/gen.py", 12, "generate", "pipe.enable_model_cpu_offload()") +
                   frame(std::string(kSite) + "diffusers/pipelines/pipeline_utils.py", 1020,
                         "enable_model_cpu_offload") +
                   apply)},
        {"a .cuda() call in a Lightning-style training step",
         training_first() +
             traceback(frame("/w/lit.py", 50, "training_step", "self.ema = self.ema.cuda()") +
                       torch_frame("nn/modules/module", 1050, "cuda") +
                       torch_frame("nn/modules/module", 900, "_apply"))},
        {"a UI's loader node (InvokeAI)",
         "[2026-11-02 10:00:01,123]::[InvokeAI]::ERROR --> Error while invoking session "
         "5f3c2a, invocation 9a1b7c (flux_model_loader): CUDA out of memory. Tried to allocate "
         "90.00 MiB. GPU 0 has a total capacity of 11.99 GiB of which 0 bytes is free.\n"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      CHECK(phase_of(c.log) == Phase::kModelLoad);
    }
    // Near miss: latents moved inside a sampling loop are a tensor, not a model (no Module frame).
    CHECK(phase_of(training_first() +
                   traceback(frame("/app/trainer/sd_trainer.py", 402, "generate_images") +
                             frame("/app/trainer/sampler.py", 77, "denoise",
                                   "latents = latents.to(device)"))) == Phase::kSampling);
    // Near miss: a model's forward inside the training step is the training step.
    CHECK(phase_of(training_first() + traceback(frame("/w/lit.py", 50, "training_step") +
                                                torch_frame("nn/modules/module", 1501,
                                                            "_call_impl"))) == Phase::kTrainStep);
  }

  TEST_CASE("words in the user's paths are no stage evidence") {
    // A project folder named after samples: the training frames and bar decide.
    CHECK(phase_of(training_first() +
                   traceback(frame("/home/me/Sample Training/lora/trainer.py", 200, "train") +
                             frame("/home/me/Sample Training/lora/net.py", 31, "forward"))) ==
          Phase::kTrainStep);
    CHECK(phase_of(training_first() + traceback(frame("/data/samples/cache/run.py", 9, "main") +
                                                frame("/data/samples/cache/model.py", 51,
                                                      "forward"))) == Phase::kTrainStep);
    // A config printed with a "sample_every" key says nothing about where the job is.
    CHECK(phase_of("sample_every: 250\nsample_steps: 20\n" + training_first() +
                   traceback(frame("/w/train.py", 3, "main",
                                   "if step % args.sample_every == 0: pass"))) ==
          Phase::kTrainStep);
    // A marker's path is the user's; its words before the path speak.
    CHECK(announced_stage("Loading model from /home/me/Sample Training/flux.safetensors") ==
          Phase::kModelLoad);
    CHECK(announced_stage("Writing logs to /home/me/samples/logs") == Phase::kUnknown);
    CHECK(failed_stage("ERROR: could not open /srv/cache/latents/x.npz") == Phase::kUnknown);
    // Inside an installed package the folders are the package's modules and do speak.
    CHECK(phase_of(training_first() +
                   traceback(frame("/w/t.py", 1, "main") +
                             frame(std::string(kSite) + "diffusers/pipelines/flux/pipeline_flux.py",
                                   700, "__call__"))) == Phase::kSampling);
  }

  TEST_CASE("quantization libraries, caching programs and UI runtimes name their stages") {
    // optimum-quanto: freeze() quantizes; a quantized layer's forward runs in every stage.
    CHECK(phase_of(traceback(frame("/w/run.py", 5, "main") +
                             frame(std::string(kSite) + "optimum/quanto/quantize.py", 120,
                                   "freeze"))) == Phase::kQuantize);
    CHECK(phase_of(
              training_first() +
              traceback(frame("/w/run.py", 5, "training_step") +
                        frame(std::string(kSite) + "optimum/quanto/nn/qlinear.py", 40, "forward") +
                        frame(std::string(kSite) + "optimum/quanto/tensor/qbytes.py", 90,
                              "__torch_dispatch__"))) == Phase::kTrainStep);
    // torchao and bitsandbytes at training time: their dispatch and matmul are the step.
    CHECK(phase_of(training_first() +
                   traceback(frame("/w/run.py", 5, "training_step") +
                             frame(std::string(kSite) +
                                       "torchao/quantization/linear_activation_quantized_tensor.py",
                                   140, "__torch_function__"))) == Phase::kTrainStep);
    CHECK(phase_of(training_first() +
                   traceback(frame("/w/run.py", 5, "training_step") +
                             frame(std::string(kSite) + "bitsandbytes/autograd/_functions.py", 574,
                                   "matmul_4bit"))) == Phase::kTrainStep);
    // bitsandbytes quantizing a layer as it moves to the GPU.
    CHECK(phase_of(traceback(frame("/w/load.py", 5, "main") +
                             frame(std::string(kSite) + "bitsandbytes/nn/modules.py", 331,
                                   "_quantize"))) == Phase::kQuantize);
    // llm-compressor's calibration pipelines are quantizing, though their folder says pipelines.
    CHECK(phase_of(
              traceback(frame("/w/compress.py", 30, "main", "oneshot(model=model)") +
                        frame(std::string(kSite) + "llmcompressor/pipelines/sequential/pipeline.py",
                              104, "__call__"))) == Phase::kQuantize);
    // GPTQModel and AutoGPTQ solvers.
    CHECK(phase_of(traceback(
              frame(std::string(kSite) + "gptqmodel/looper/module_looper.py", 300, "loop") +
              frame(std::string(kSite) + "gptqmodel/quantization/gptq.py", 250, "add_batch"))) ==
          Phase::kQuantize);
    // AMD Quark.
    CHECK(phase_of(traceback(frame(std::string(kSite) + "quark/torch/quantization/api.py", 160,
                                   "quantize_model"))) == Phase::kQuantize);
    // A caching program of its own (a musubi-tuner-like src layout; a kohya-like tools script).
    CHECK(phase_of(traceback(
              frame("/w/musubi/src/musubi_tuner/cache_text_encoder_outputs.py", 180, "main") +
              frame("/w/musubi/src/musubi_tuner/qwen_image/encoders.py", 60, "forward"))) ==
          Phase::kCacheTextEmbeddings);
    CHECK(phase_of(traceback(frame("/w/sd-scripts/tools/cache_latents.py", 150, "main") +
                             frame("/w/sd-scripts/library/model.py", 60, "forward"))) ==
          Phase::kCacheLatents);
    // A UI runtime's error line names the node that ran.
    CHECK(phase_of("[InvokeAI]::ERROR --> Error while invoking session 1a2b, invocation 3c4d "
                   "(flux_denoise): CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a "
                   "total capacity of 23.64 GiB of which 410.00 MiB is free.\n") ==
          Phase::kSampling);
  }

  TEST_CASE("caching announced without saying what is cached ends the stage before it") {
    // musubi-tuner's latent and text-encoder caching programs both say "Encoding dataset [0]"
    // after loading their models, and both call encode_and_save_batch(): neither line says which
    // caching, the program's frames do.
    const std::string loaded =
        "INFO:__main__:Loading VAE model from /models/vae.pth\n"
        "INFO:__main__:Encoding dataset [0]\n" +
        bar("", 12, 40) + "\n";
    CHECK(
        phase_of(loaded +
                 traceback(frame("/w/musubi/wan_cache_latents.py", 183, "<module>", "main(args)") +
                           frame("/w/musubi/cache_latents.py", 226, "encode_datasets") +
                           frame("/w/musubi/wan_cache_latents.py", 51, "encode_and_save_batch",
                                 "latent = vae.encode(contents)") +
                           frame("/w/musubi/wan/modules/vae.py", 702, "encode") +
                           torch_frame("nn/modules/conv", 720, "_conv_forward"))) ==
        Phase::kCacheLatents);
    CHECK(phase_of("INFO:__main__:Loading T5 model from /models/umt5.pth\n"
                   "2026-03-01 10:00:00 INFO Caching outputs for dataset 0\n" +
                   traceback(frame("/w/musubi/cache_text_encoder_outputs.py", 180, "main") +
                             frame("/w/musubi/cache_text_encoder_outputs.py", 90,
                                   "encode_and_save_batch") +
                             torch_frame("nn/functional", 2500, "linear"))) ==
          Phase::kCacheTextEmbeddings);
    // Without a program's name the caching stays unknown: never the model load before it.
    CHECK(phase_of(loaded + traceback(frame("/w/tool/run.py", 40, "encode_and_save_batch") +
                                      torch_frame("nn/modules/conv", 720, "_conv_forward"))) ==
          Phase::kUnknown);
    // Near misses: a batch that is trained on, an encoding that names what it encodes.
    CHECK(phase_of(training_first() +
                   traceback(frame("/w/train.py", 40, "train_batch") +
                             torch_frame("nn/modules/conv", 720, "_conv_forward"))) ==
          Phase::kTrainStep);
    CHECK(announced_stage("Encoding images for the latent cache") == Phase::kCacheLatents);
    CHECK_FALSE(announces_unnamed_caching("Encoding images for the latent cache"));
    CHECK_FALSE(announces_unnamed_caching("Dataset encoding: utf-8"));
    CHECK(announces_unnamed_caching("Encoding dataset [0]"));
    CHECK(announces_unnamed_caching("Caching outputs for dataset 0"));
  }

  TEST_CASE("precedence: each source beside each lower one, and conflicting weak hints") {
    // Each source of evidence, in the order docs/detection.md "Phase precedence" gives, with a
    // way to write it for each phase it can name. Lines go where the source lives: before the
    // error, in its traceback, or after it.
    struct Piece {
      std::string before, frames, after;
      std::string oom = kOom;  // the error line that ends the traceback
    };
    struct Source {
      const char* name;
      EvidenceSource source;
      std::vector<std::pair<Phase, Piece>> ways;
    };
    const std::vector<Source> sources = {
        {"the OOM line itself",
         EvidenceSource::kMarker,
         {{Phase::kTrainStep,
           {"", "", "",
            "RuntimeError: OOM during training step 3 times in a row, aborting training"}}}},
        {"a frame that names a stage",
         EvidenceSource::kFrame,
         {{Phase::kSampling, {"", frame("/w/lib/gen.py", 9, "generate_images"), ""}},
          {Phase::kCacheLatents, {"", frame("/w/lib/vae.py", 9, "encode_images"), ""}},
          {Phase::kModelLoad, {"", torch_frame("nn/modules/module", 900, "_apply"), ""}}}},
        {"a UI node type",
         EvidenceSource::kNode,
         {{Phase::kSampling, {"- **Node Type:** KSampler\n", "", ""}},
          {Phase::kModelLoad, {"- **Node Type:** UNETLoader\n", "", ""}}}},
        {"a failure line after the error",
         EvidenceSource::kEpilogue,
         {{Phase::kCacheLatents, {"", "", "stage 'latents' failed, see above\n"}},
          {Phase::kSampling, {"", "", "ERROR: validation failed at step 40\n"}}}},
        {"a marker before the error",
         EvidenceSource::kMarker,
         {{Phase::kModelLoad, {"Loading Flux model\n", "", ""}},
          {Phase::kSampling, {"Generating samples for step 200\n", "", ""}}}},
        {"an entry point's name",
         EvidenceSource::kFrame,
         {{Phase::kTrainStep, {"", frame("/w/x/run.py", 3, "train"), ""}}}},
        {"a training bar after the error",
         EvidenceSource::kBar,
         {{Phase::kTrainStep, {"", "", bar("Training", 12, 100) + "\n"}}}},
    };
    int drawn = 0;
    for (size_t hi = 0; hi < sources.size(); ++hi) {
      for (size_t lo = hi + 1; lo < sources.size(); ++lo) {
        for (const auto& [high_phase, high] : sources[hi].ways) {
          for (const auto& [low_phase, low] : sources[lo].ways) {
            if (high_phase == low_phase) continue;
            CAPTURE(sources[hi].name);
            CAPTURE(sources[lo].name);
            // The error's traceback lists the outer frames first: the lower source's frame
            // outside the higher one's, so depth cannot be what decided.
            const std::string frames =
                "  File \"/w/main.py\", line 1, in main\n" + low.frames + high.frames;
            const std::string oom = high.oom != kOom ? high.oom : low.oom;
            const std::string log = high.before + low.before +
                                    "Traceback (most recent call last):\n" + frames + oom + "\n" +
                                    high.after + low.after;
            CAPTURE(log);
            const LogAnalysis a = analyze_log(log);
            REQUIRE(!a.events.empty());
            const OomEvent& e = a.events.back();
            CHECK(e.phase == high_phase);
            REQUIRE(e.phase_evidence);
            CHECK(e.phase_evidence->source == sources[hi].source);
            ++drawn;
          }
        }
      }
    }
    CHECK(drawn > 40);
    // Weak hints that disagree (a script named for samples, an entry point named "train"), with
    // nothing stronger: unknown, not a guess.
    CHECK(phase_of(traceback(frame("/w/x/sample_images.py", 3, "main") +
                             frame("/w/x/run.py", 9, "train"))) == Phase::kUnknown);
    CHECK(phase_of(traceback(frame("/w/x/sample_images.py", 3, "main"))) == Phase::kSampling);
  }
}
