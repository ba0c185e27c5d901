// tests/parsers/progress_test.cc: tqdm frames of every trainer, and what each bar counts.
#include "parsers/progress.h"

#include <doctest/doctest.h>

using namespace oomtriage::parsers;

TEST_SUITE("parsers::progress") {
  TEST_CASE("AI Toolkit's training bar") {
    const auto f = parse_progress_frame(
        "my_lora:  17%|█▋        | 500/3000 [12:02<58:09,  1.40s/it, lr: 1.0e-04 loss: 4.020e-01]");
    REQUIRE(f);
    CHECK(f->desc == "my_lora");
    CHECK(f->n == 500);
    CHECK(f->total == 3000);
  }
  TEST_CASE("frames of other trainers and tqdm layouts") {
    struct Case {
      const char* line;
      const char* desc;
      int64_t n;
    };
    const Case cases[] = {
        {"steps:  12%|█▏        | 120/1000 [01:23<10:12,  1.44it/s, avr_loss=0.123]", "steps", 120},
        {"Steps:  12%|#2        | 120/1000 [01:23<10:12,  1.44it/s, loss=0.0873, lr=0.0001]",
         "Steps", 120},
        {"Epoch 1/10 Steps:  12%|█▏  | 120/1000 [01:23<10:12,  1.44it/s, lr=0.0001]",
         "Epoch 1/10 Steps", 120},
        {"steps:  12% 120/1000 [01:23<10:12,  1.44it/s]", "steps", 120},
        {"0/10 * Epoch (valid):   3% 1/32 [00:01<00:46,  1.50s/it, _fps=21.531, loss=1.656]",
         "0/10 * Epoch (valid)", 1},
        {" 12%|█▏        | 120/1000 [01:23<10:12,  1.44it/s]", "", 120},
        {"0it [00:00, ?it/s]", "", 0},
        {"Generating Samples:  33%|███▎      | 1/3 [00:12<00:24, 12.1s/it]", "Generating Samples",
         1},
        {"SS:   0%|          | 0/5000 [00:00<?, ?it/s]", "SS", 0},
    };
    for (const Case& c : cases) {
      CAPTURE(c.line);
      const auto f = parse_progress_frame(c.line);
      REQUIRE(f);
      CHECK(f->desc == c.desc);
      CHECK(f->n == c.n);
    }
  }
  TEST_CASE("output glued after the frame is left for the caller") {
    const std::string line =
        "Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]Killed";
    const auto f = parse_progress_frame(line);
    REQUIRE(f);
    CHECK(line.substr(f->end) == "Killed");
  }
  TEST_CASE("the HF notebook widget counts global steps") {
    const auto f = parse_progress_frame(" [ 501/1500 06:35 < 13:11, 1.26 it/s, Epoch 1/3]");
    REQUIRE(f);
    CHECK(f->notebook);
    CHECK(f->n == 501);
    CHECK(f->total == 1500);
  }
  TEST_CASE("Rich's bars: the count among the columns beside the bar, the text before it") {
    // PyTorch Lightning's RichProgressBar, a custom Progress with MofNCompleteColumn, and the
    // default columns (no count: a frame without a step).
    auto f = parse_progress_frame(
        "Epoch 0/9  ━━━━━━━━━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━ 57/400 0:00:50 • 0:05:09 2.31it/s "
        "v_num: 0 train_loss: 2.310");
    REQUIRE(f);
    CHECK(f->desc == "Epoch 0/9");
    CHECK(f->n == 57);
    CHECK(f->total == 400);
    f = parse_progress_frame(
        "Training: ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╺━━━━━━━━━━  73% 0:00:12 730/1000");
    REQUIRE(f);
    CHECK(f->desc == "Training");
    CHECK(f->n == 730);
    f = parse_progress_frame(
        "Caching latents ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 100% 0:00:00");
    REQUIRE(f);
    CHECK(f->desc == "Caching latents");
    CHECK_FALSE(f->n);
    f = parse_progress_frame(" 57/400 ━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━━━━━━ 14% 0:00:50");
    REQUIRE(f);
    CHECK(f->desc.empty());
    CHECK(f->n == 57);
  }
  TEST_CASE("box-drawing that is no Rich bar") {
    // A rule under a heading, a table border, metrics after the bar are not its count.
    CHECK_FALSE(parse_progress_frame("━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━"));
    CHECK_FALSE(parse_progress_frame("━━━━━━━━━━━━ Model summary ━━━━━━━━━━━━"));
    CHECK_FALSE(parse_progress_frame("step ━ 3/4 done"));
    const auto f = parse_progress_frame(
        "Validation ━━━━━━━━━━━━━━━━━━━━━━ 0:00:03 • 0:00:00 v_num: 0 acc: 3/4");
    REQUIRE(f);
    CHECK_FALSE(f->n);  // "3/4" is a metric's value, after a column that is none of Rich's
  }
  TEST_CASE("lines that only look like frames are not frames") {
    CHECK_FALSE(parse_progress_frame("[2025-01-09 02:45:30] [INFO] trainer.train(args)"));
    CHECK_FALSE(parse_progress_frame("Epoch 0:   4%|█████▎"));
    CHECK_FALSE(parse_progress_frame("| 58%   70C    P2    67W / 200W |   1906MiB /  8111MiB |"));
    CHECK_FALSE(parse_progress_frame("Traceback (most recent call last):......]  2.37%"));
  }
  TEST_CASE("bar descriptions say what is counted") {
    const auto role = [](std::string_view desc, std::string_view job = "",
                         Trainer trainer = Trainer::kUnknown) {
      return classify_bar(desc, job, trainer);
    };
    CHECK(role("my_lora", "my_lora").role == BarRole::kTrainingSteps);
    CHECK(role("my_lora", "", Trainer::kAiToolkit).role == BarRole::kTrainingSteps);
    CHECK(role("my_lora").role == BarRole::kOther);
    CHECK(role("Generating Samples").phase == Phase::kSampling);
    CHECK(role("Generating Images").phase == Phase::kSampling);
    CHECK(role("validation steps").phase == Phase::kSampling);
    CHECK(role("Valid (loss 53.34) epoch 1").phase == Phase::kSampling);
    CHECK(role("VAE tiled decode").phase == Phase::kSampling);
    CHECK(role("Caching latents to disk").phase == Phase::kCacheLatents);
    CHECK(role("Caching text embeddings to disk").phase == Phase::kCacheTextEmbeddings);
    CHECK(role("Loading checkpoint shards").phase == Phase::kModelLoad);
    CHECK(role("Quantizing model.layers.13").phase == Phase::kQuantize);
    CHECK(role("steps").role == BarRole::kTrainingSteps);
    CHECK(role("Epoch 1/134 - steps").role == BarRole::kTrainingSteps);
    CHECK(role("0/10 * Epoch (train)").role == BarRole::kTrainingPerEpoch);
    CHECK(role("step").role == BarRole::kTrainingPerEpoch);  // OneTrainer counts per epoch
    CHECK(role("", "", Trainer::kTransformers).role == BarRole::kTrainingSteps);
    CHECK(role("").role == BarRole::kOther);
  }
}
