// tests/parsers/context_patterns_test.cc: every marker row matches its samples; traceback frames
// give the phase.
#include "parsers/context_patterns.h"

#include <doctest/doctest.h>

#include <set>

using namespace oomtriage::parsers;

TEST_SUITE("parsers::context_patterns") {
  TEST_CASE("every marker has samples and each sample matches its row") {
    std::set<std::string_view> names;
    for (const ContextPattern& pattern : context_patterns()) {
      CAPTURE(pattern.name);
      CHECK(names.insert(pattern.name).second);
      REQUIRE_FALSE(pattern.samples.empty());
      for (std::string_view sample : pattern.samples) {
        CAPTURE(sample);
        CHECK(may_be_context(sample));
        std::vector<ContextMatch> matches;
        match_context(sample, matches);
        bool found = false;
        for (const auto& m : matches) found |= m.pattern == &pattern;
        CHECK(found);
      }
    }
  }
  TEST_CASE("numbers and job names are captured") {
    std::vector<ContextMatch> matches;
    match_context("Saving at step 250", matches);
    REQUIRE(matches.size() == 1);
    CHECK(matches[0].n == 250);
    matches.clear();
    match_context("# Running job: my_first_lora_v1", matches);
    REQUIRE(matches.size() == 1);
    CHECK(matches[0].job == "my_first_lora_v1");
    matches.clear();
    match_context("  Total optimization steps = 1,500", matches);
    REQUIRE(matches.size() == 1);
    CHECK(matches[0].n == 1500);
  }
  TEST_CASE("a user stop is a stop, not a crash") {
    std::vector<ContextMatch> matches;
    match_context("Error running job: Job stopped", matches);
    bool stop = false;
    for (const auto& m : matches) stop |= m.pattern->effect == MarkerEffect::kStop;
    CHECK(stop);
  }
  TEST_CASE("traceback frames name the phase") {
    CHECK(traceback_frame_phase("File \"/app/ai-toolkit/toolkit/models/base_model.py\", line 512, "
                                "in generate_images") == Phase::kSampling);
    CHECK(traceback_frame_phase("File \"train.py\", line 282, in validate") == Phase::kSampling);
    CHECK(traceback_frame_phase("File \"x/quantize.py\", line 461, in quantize_model") ==
          Phase::kQuantize);
    CHECK(
        traceback_frame_phase("File \"x/data_loader.py\", line 9, in cache_latents_all_latents") ==
        Phase::kCacheLatents);
    CHECK(traceback_frame_phase("File \"x/_tensor.py\", line 581, in backward") ==
          Phase::kTrainStep);
    CHECK(traceback_frame_phase("File ~/env/site-packages/transformers/trainer.py:1979, in "
                                "Trainer._inner_training_loop(self, batch_size)") ==
          Phase::kTrainStep);
    CHECK(traceback_frame_phase(
              "frame #4: at::native::(anonymous namespace)::slow_conv_transpose3d_backward_out_"
              "cuda_template(at::Tensor const&) + 0x15ef") == Phase::kTrainStep);
    CHECK(traceback_frame_phase("File \"x.py\", line 3, in forward") == Phase::kUnknown);
    CHECK_FALSE(traceback_frame_phase("self.sd.generate_images(gen_img_config_list)"));
  }
  TEST_CASE("exception lines end a traceback") {
    CHECK(is_exception_line("torch.OutOfMemoryError: CUDA out of memory."));
    CHECK(is_exception_line("KeyboardInterrupt"));
    CHECK(is_exception_line("RuntimeError: x"));
    CHECK_FALSE(is_exception_line("Error running job: x"));
  }
}
