// tests/parsers/live_progress_test.cc: what a training bar says about a running job besides its
// count (its rate and newest loss), and the analyzer's live view of a log whose newest frame is
// still waiting to be parsed.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "parsers/log_analyzer.h"
#include "parsers/progress.h"

namespace oomtriage::parsers {
namespace {

TEST_SUITE("parsers") {
  TEST_CASE("a bar's rate and loss, in every layout trainers print") {
    // kohya sd-scripts (tests/testdata and the shared corpus have such lines).
    BarVitals v = read_bar_vitals(
        "steps:  13%|█████▏      | 440/3300 [21:33<2:20:06,  2.94s/it, avr_loss=0.0911]");
    REQUIRE(v.steps_per_second);
    CHECK(*v.steps_per_second == doctest::Approx(1 / 2.94));
    REQUIRE(v.loss);
    CHECK(*v.loss == doctest::Approx(0.0911));
    // AI Toolkit: "lr: 1.0e-04 loss: 4.763e-01".
    v = read_bar_vitals(
        "my_lora:  17%|█▋   | 500/3000 [12:02<58:09,  1.40it/s, lr: 1.0e-04 loss: 4.763e-01]");
    CHECK(*v.steps_per_second == doctest::Approx(1.40));
    CHECK(*v.loss == doctest::Approx(0.4763));
    // The notebook widget puts a space before the unit; Rich prints columns, then "loss: 2.3".
    v = read_bar_vitals(" [ 501/1500 06:35 < 13:11, 1.26 it/s, Epoch 1/3]");
    CHECK(*v.steps_per_second == doctest::Approx(1.26));
    CHECK_FALSE(v.loss);
    v = read_bar_vitals(
        "Epoch 0/9  ━━━━━━━━╸━━━━━━ 57/400 0:00:50 • 0:05:09 2.31it/s v_num: 0 loss: 2.3");
    CHECK(*v.steps_per_second == doctest::Approx(2.31));
    CHECK(*v.loss == doctest::Approx(2.3));
  }

  TEST_CASE("a bar that has no rate yet, or a loss that is not a number, gives none") {
    BarVitals v = read_bar_vitals("steps:   0%|          | 0/3300 [00:00<?, ?it/s]");
    CHECK_FALSE(v.steps_per_second);
    CHECK_FALSE(v.loss);
    v = read_bar_vitals("steps:  13%|█▏  | 440/3300 [21:33<2:20:06,  2.94s/it, avr_loss=nan]");
    CHECK(v.steps_per_second);
    CHECK_FALSE(v.loss);
    // A learning rate is not a loss; a key made of digits is not a key.
    v = read_bar_vitals("train: 5/10 [00:01<00:01, 3.00it/s, lr=2e-06, 12:00]");
    CHECK_FALSE(v.loss);
    v = read_bar_vitals("x [00:01<00:01, 0.00s/it]");
    CHECK_FALSE(v.steps_per_second);
  }

  TEST_CASE("the live view reads the frame still waiting to be parsed") {
    LogAnalyzer analyzer;
    analyzer.feed("Loading model\n");
    CHECK_FALSE(analyzer.live().step);
    std::string log;
    for (int n = 1; n <= 5; ++n) {
      log += "steps:   " + std::to_string(n) + "%|▏  | " + std::to_string(n) + "/100 [00:0" +
             std::to_string(n) + "<01:40,  1.00it/s, avr_loss=0." + std::to_string(n) + "]\r";
    }
    analyzer.feed(log);
    // The frames of one bar wait (only the last matters), yet the live view has the newest.
    const LogAnalyzer::Live live = analyzer.live();
    REQUIRE(live.step);
    CHECK(*live.step == 5);
    CHECK(live.total == 100);
    CHECK(*live.vitals.loss == doctest::Approx(0.5));
    CHECK(live.phase == Phase::kTrainStep);
    // A sampling bar after it: the step stays, the phase is the bar's.
    analyzer.feed("\nGenerating Images: 50%|█  | 1/2 [00:01<00:01, 1.00it/s]\r");
    const LogAnalyzer::Live sampling = analyzer.live();
    CHECK(sampling.step == 5);
    CHECK(sampling.phase == Phase::kSampling);
  }
}

}  // namespace
}  // namespace oomtriage::parsers
