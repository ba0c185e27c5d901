// tests/parsers/loss_curve_test.cc: the training loss of each trainer's output, left out for
// validation and evaluation, through '\r' frames, ANSI colours, rank prefixes and resumes.
#include "parsers/loss_curve.h"

#include <doctest/doctest.h>

#include <string>

using namespace oomtriage::parsers;

namespace {

std::vector<LossPoint> curve_of(const std::string& log, const std::string& job = "my_lora",
                                Trainer trainer = Trainer::kUnknown, size_t chunk = 7) {
  LossCurveReader reader(job, trainer);
  for (size_t at = 0; at < log.size(); at += chunk)
    reader.feed(std::string_view(log).substr(at, chunk));
  reader.finish();
  return reader.points();
}

}  // namespace

TEST_SUITE("parsers::loss_curve") {
  TEST_CASE("the loss key of each trainer's postfix, and not a validation loss") {
    struct Case {
      const char* text;
      std::optional<double> loss;
    };
    const Case cases[] = {
        {"[12:02<58:09,  1.40s/it, lr: 1.0e-04 loss: 4.523e-01]", 0.4523},   // AI Toolkit
        {"[01:23<10:12,  1.44it/s, avr_loss=0.123]", 0.123},                 // kohya
        {"[01:23<10:12,  1.44it/s, loss=0.0873, lr=0.0001]", 0.0873},        // diffusers
        {"[01:23<10:12,  1.44it/s, lr=0.0001, step_loss=0.0873]", 0.0873},   // SimpleTuner
        {"[01:23<10:12,  1.44it/s, loss=0.123, smooth loss=0.118]", 0.123},  // OneTrainer
        {"{'loss': 2.3456, 'grad_norm': 1.2345, 'learning_rate': 4.9e-05, 'epoch': 0.01}", 2.3456},
        {"{'loss': '2.346', 'grad_norm': '1.234', 'learning_rate': '4.9e-05'}", 2.346},
        {"step 120/1000 | loss 0.12", 0.12},
        {"iter 100: loss 2.31", 2.31},
        {"[01:23<10:12,  1.44it/s, val_avg_loss=0.2, timestep=500]", std::nullopt},
        {"{'eval_loss': 0.51, 'eval_runtime': 12.3}", std::nullopt},
        {"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536", std::nullopt},
        {"[01:23<10:12,  1.44it/s, loss=nan]", std::nullopt},
        {"Training loss became NaN.", std::nullopt},
        {"step 120/1000 | validation loss: 0.4", std::nullopt},
        {"iter 100: val loss 0.5", std::nullopt},
        {"epoch 3 | eval loss=0.61 | loss=0.52", 0.52},
        {"Step 200: train loss 0.33", 0.33},
    };
    for (const Case& c : cases) {
      CAPTURE(c.text);
      const auto loss = loss_in_text(c.text);
      REQUIRE(loss.has_value() == c.loss.has_value());
      if (loss) CHECK(*loss == doctest::Approx(*c.loss));
    }
  }

  TEST_CASE("AI Toolkit's bar, redrawn with '\\r', gives one point per step - previews do not") {
    std::string log = "Running 1 job\n";
    for (int n = 0; n <= 4; ++n) {
      log += "\rmy_lora:   0%|          | " + std::to_string(n) +
             "/3000 [00:01<12:00, 1.40s/it, lr: 1.0e-04 loss: " + std::to_string(0.5 - n * 0.01) +
             "]";
    }
    log += "\nGenerating Images:  50%|█████     | 1/2 [00:12<00:12, 12.1s/it, loss: 9.0]\n";
    const auto points = curve_of(log);
    REQUIRE(points.size() == 5);
    CHECK(points.front().step == 0);
    CHECK(points.back().step == 4);
    CHECK(points.back().loss == doctest::Approx(0.46));
  }

  TEST_CASE("kohya behind ANSI colours and a rank prefix - its validation bar is left out") {
    const std::string log =
        "\x1b[32m[rank0]: steps:  12%|█▏        | 120/1000 [01:23<10:12,  1.44it/s, "
        "avr_loss=0.123]\x1b[0m\r"
        "[rank0]: steps:  12%|█▏        | 121/1000 [01:24<10:11,  1.44it/s, avr_loss=0.121]\n"
        "validation steps: 100%|██████████| 4/4 [00:02<00:00,  1.9it/s, val_avg_loss=0.3]\n";
    const auto points = curve_of(log, "", Trainer::kSdScripts);
    REQUIRE(points.size() == 2);
    CHECK(points[0].step == 120);
    CHECK(points[1].step == 121);
    CHECK(points[1].loss == doctest::Approx(0.121));
  }

  TEST_CASE("HF Trainer's dicts land at the step its bar showed last - eval dicts do not") {
    const std::string log =
        " 10%|█         | 50/500 [00:50<07:30,  1.00it/s]\r"
        "{'loss': 2.3456, 'grad_norm': 1.2345, 'learning_rate': 4.9e-05, 'epoch': 0.1}\n"
        " 20%|██        | 100/500 [01:40<06:40,  1.00it/s]\r"
        "{'loss': '1.987', 'grad_norm': '1.1', 'learning_rate': '4.8e-05', 'epoch': '0.2'}\n"
        "{'eval_loss': 0.51, 'eval_runtime': 12.3}\n";
    const auto points = curve_of(log, "", Trainer::kTransformers);
    REQUIRE(points.size() == 2);
    CHECK(points[0].step == 50);
    CHECK(points[1].step == 100);
    CHECK(points[1].loss == doctest::Approx(1.987));
  }

  TEST_CASE("a resumed run's values replace the first run's at the same steps") {
    std::string log;
    for (int n = 10; n <= 12; ++n) {
      log += "steps:   1%| | " + std::to_string(n) + "/1000 [00:10<10:00, 1.0it/s, avr_loss=0.9]\r";
    }
    log += "\n";
    for (int n = 11; n <= 13; ++n) {
      log += "steps:   1%| | " + std::to_string(n) + "/1000 [00:10<10:00, 1.0it/s, avr_loss=0.5]\r";
    }
    const auto points = curve_of(log, "", Trainer::kSdScripts, 1);
    REQUIRE(points.size() == 4);
    CHECK(points[0].loss == doctest::Approx(0.9));
    CHECK(points[1].loss == doctest::Approx(0.5));
    CHECK(points[3].step == 13);
  }

  TEST_CASE("a long curve is thinned to means of neighbours, a short one kept") {
    std::vector<LossPoint> points;
    for (int i = 0; i < 10000; ++i) points.push_back({i, i % 2 == 0 ? 1.0 : 0.0});
    const auto thin = thin_curve(points, 500);
    REQUIRE(thin.size() == 500);
    CHECK(thin.front().step == 10);  // the mean of 0..19, rounded
    CHECK(thin.front().loss == doctest::Approx(0.5));
    CHECK(thin.back().step == 9990);
    const std::vector<LossPoint> few = {{1, 0.5}, {2, 0.4}};
    CHECK(thin_curve(few, 500).size() == 2);
  }
}
