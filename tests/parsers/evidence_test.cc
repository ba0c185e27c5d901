// tests/parsers/evidence_test.cc: the evidence model on invented logs, one class of log per case
// (issue 10's list): bars redrawn after the crash, steps printed in many shapes, the stage lexicon
// on every source, the precedence between sources, and the invariants that keep a fatal OOM
// fatal. None of these lines comes from a file the rules were written against.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "parsers/log_analyzer.h"
#include "parsers/oom_patterns.h"
#include "tests/support/log_samples.h"

using namespace oomtriage::parsers;
using namespace oomtriage::test;

TEST_SUITE("parsers::evidence") {
  TEST_CASE("a bar redrawn after the crash keeps it fatal, at that bar's step") {
    const LogAnalysis a = analyze_log(traceback("  File \"/w/run.py\", line 9, in main\n") +
                                      bar("train", 0, 1000) + "\n");
    const OomEvent e = only_event(a);
    CHECK_FALSE(e.recovered);
    CHECK(e.step == 0);
    REQUIRE(e.step_evidence);
    CHECK(e.step_evidence->source == EvidenceSource::kBar);
    CHECK(a.outcome == Outcome::kCrashedOom);
  }

  TEST_CASE("nested epoch and step bars redrawn at exit keep the OOM fatal") {
    std::string log;
    for (int n = 0; n <= 7; ++n) log += "\r" + bar("epoch", 0, 3) + "\r" + bar("batch", n, 50);
    log += "\n" + traceback("  File \"/w/t.py\", line 5, in training_step\n");
    log += "\r" + bar("epoch", 0, 3) + "\n\r" + bar("batch", 8, 50) + "\n";
    const LogAnalysis a = analyze_log(log);
    const OomEvent e = only_event(a);
    CHECK_FALSE(e.recovered);
    CHECK(e.phase == Phase::kTrainStep);
    CHECK(e.step == 7);  // the batch bar in the first epoch, as it stood before the error
    CHECK(a.outcome == Outcome::kCrashedOom);
  }

  TEST_CASE("steps printed in many shapes") {
    struct Case {
      std::string line;
      int64_t step;
      EvidenceSource source;
    };
    const Case cases[] = {
        {"iter 340: loss 2.1034, time 95.12ms, mfu 28.40%", 340, EvidenceSource::kCounter},
        {"step 120/1000 | loss 0.1234 | lr 2.0e-05", 120, EvidenceSource::kCounter},
        {"[Epoch 1/5][Iter 77/400] loss_G: 3.2 loss_D: 0.4", 77, EvidenceSource::kCounter},
        {"Epoch: [0][  64/5005]\tTime  0.512 ( 0.600)\tLoss 6.9", 64, EvidenceSource::kCounter},
        {"steps: 215 loss: 0.0812 iter time (s): 1.234 samples/sec: 3.2", 215,
         EvidenceSource::kCounter},
        {"fit:  33%|███▎      | 330/1000 [05:00<10:00,  1.1it/s, global_step=330, loss=0.2]", 330,
         EvidenceSource::kCounter},
        {"Saving model checkpoint to runs/out/checkpoint-500", 500, EvidenceSource::kSaveName},
        {"Saved checkpoint to output/job/job_000000750.safetensors", 750,
         EvidenceSource::kSaveName},
        {"steps:  12%|█▏        | 120/1000 [01:2", 120, EvidenceSource::kBar},  // cut at the width
        // Rich, plain and coloured (the escapes of a terminal that Rich was forced to draw on).
        {"Training ━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━━━━ 57/400 0:00:50 • 0:05:09", 57,
         EvidenceSource::kBar},
        {"Epoch 0/9 \x1b[38;5;237m━━━━━━━━━━━━\x1b[0m\x1b[38;2;249;38;114m╸━━━━━━━━━\x1b[0m "
         "\x1b[37m58/400\x1b[0m \x1b[38;5;245m0:00:51 • 0:05:09\x1b[0m v_num: 0",
         58, EvidenceSource::kBar},
        // Aligned key: value counters, a terse "it", a training-step prefix, minibatches.
        {"step:  130  loss: 2.4612  lr: 1.0e-04", 130, EvidenceSource::kCounter},
        {"2026-01-01 10:00:00 | INFO | step:  131  loss: 2.4612", 131, EvidenceSource::kCounter},
        {"it 132 | loss 0.2041 | 1.21 s/it", 132, EvidenceSource::kCounter},
        {"Train step 133/400 loss=0.3012", 133, EvidenceSource::kCounter},
        {"minibatch 134, loss 0.5213", 134, EvidenceSource::kCounter},
        {"[INFO] minibatch 135 | loss=0.52", 135, EvidenceSource::kCounter},
        {"Saving checkpoint to work_dirs/exp/model_step_136.pt", 136, EvidenceSource::kSaveName},
    };
    for (const Case& c : cases) {
      CAPTURE(c.line);
      const OomEvent e = only_event(analyze_log("some setup\n" + c.line + "\n" + kOom + "\n"));
      CHECK(e.step == c.step);
      REQUIRE(e.step_evidence);
      CHECK(e.step_evidence->source == c.source);
    }
  }

  TEST_CASE("Keras-style steps count within an epoch: a global step in the first only") {
    const std::string steps =
        "120/1000 [==>...........................] - ETA: 1:23 - loss: 0.2345\n";
    CHECK(only_event(analyze_log("Epoch 1/10\n" + steps + kOom + "\n")).step == 120);
    CHECK_FALSE(only_event(analyze_log("Epoch 2/10\n" + steps + kOom + "\n")).step);
  }

  TEST_CASE("a per-epoch bar gives the global step in the first epoch only") {
    CHECK(only_event(analyze_log(bar("Epoch 0", 45, 100) + "\n" + kOom + "\n")).step == 45);
    CHECK_FALSE(only_event(analyze_log(bar("Epoch 3", 45, 100) + "\n" + kOom + "\n")).step);
    CHECK_FALSE(only_event(analyze_log(bar("step", 45, 100) + "\n" + kOom + "\n")).step);
  }

  TEST_CASE("a later epoch makes per-epoch and minibatch counters no global step") {
    const std::string rich_epoch_2 =
        "Epoch 2/9  ━━━━━━━━━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━ 57/400 0:00:50 • 0:05:09\n";
    OomEvent e = only_event(analyze_log(rich_epoch_2 + kOom + "\n"));
    CHECK_FALSE(e.step);
    CHECK(e.phase == Phase::kTrainStep);
    e = only_event(
        analyze_log("epoch 3/10\nminibatch 134, loss 0.5213\n" + std::string(kOom) + "\n"));
    CHECK_FALSE(e.step);
    CHECK(e.phase == Phase::kTrainStep);  // a loss line is still the training step
    e = only_event(
        analyze_log("epoch 1/10\nminibatch 134, loss 0.5213\n" + std::string(kOom) + "\n"));
    CHECK(e.step == 134);
  }

  TEST_CASE("host kills in the shell's locale, pasted with emphasis, and the kernel's words") {
    const std::string training = bar("steps", 120, 1000) + "\n";
    for (const char* line :
         {"Getötet", "**Killed**", "Убито", "已杀死", "強制終了", "Processus arrêté",
          "./train.sh: Zeile 12: 54321 Getötet                 python train.py",
          "run.sh: 第 3 行： 9876 已杀死                 python train.py",
          "zsh: killed     python train.py --config flux.yaml",
          "fish: Job 1, 'python train.py' terminated by signal SIGKILL (Forced quit)",
          "Dec 03 10:00:00 gpu1 kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),"
          "cpuset=/,mems_allowed=0,global_oom,task=python3,pid=4321,uid=1000",
          "Dec 03 10:00:01 gpu1 systemd[1031]: train.service: Failed with result 'oom-kill'."}) {
      CAPTURE(line);
      const OomEvent e = only_event(analyze_log(training + line + "\n"));
      CHECK(e.kind == OomKind::kHostKilled);
      CHECK(e.step == 120);
    }
    for (const char* line :
         {"Morto sul colpo, disse il narratore", "the process was Killed by the user",
          "zsh: killed is not a command"}) {
      CAPTURE(line);
      CHECK(analyze_log(training + line + "\n").events.empty());
    }
  }

  TEST_CASE("ambiguous numbers are no step") {
    for (const char* line :
         {"Train Epoch: 1 [12800/60000 (21%)]\tLoss: 0.298",
          "saving checkpoint: /out/lora-000002.safetensors",
          "Removing old save: output/job/job_000000250.safetensors", "sample_steps: 28"}) {
      CAPTURE(line);
      CHECK_FALSE(only_event(analyze_log(std::string(line) + "\n" + kOom + "\n")).step);
    }
  }

  TEST_CASE("the stage lexicon reads markers, bars, frames, nodes and epilogues of any trainer") {
    struct Case {
      std::string log;
      Phase phase;
      EvidenceSource source;
    };
    const Case cases[] = {
        {"2026-01-02 10:00:00 | INFO | Encoding captions with the text encoder\n" +
             std::string(kOom) + "\n",
         Phase::kCacheTextEmbeddings, EvidenceSource::kMarker},
        {"[RANK 0] Precomputing latents for 412 images\n" + std::string(kOom) + "\n",
         Phase::kCacheLatents, EvidenceSource::kMarker},
        {bar("Sanity Checking DataLoader 0", 1, 2) + "\n" + kOom + "\n", Phase::kSampling,
         EvidenceSource::kBar},
        {traceback("  File \"/w/train.py\", line 80, in main\n"
                   "  File \"/venv/lib/python3.11/site-packages/mylib/calibration/minmax.py\", "
                   "line 7, in forward\n"),
         Phase::kQuantize, EvidenceSource::kFrame},
        {traceback("  File \"/w/train.py\", line 80, in main\n    model.to(device)\n"
                   "  File \"/venv/torch/nn/modules/module.py\", line 1160, in _apply\n"),
         Phase::kModelLoad, EvidenceSource::kFrame},
        {"## Error Details\n- **Node ID:** 12\n- **Node Type:** VAEDecode\n"
         "- **Exception Type:** torch.OutOfMemoryError\n"
         "- **Exception Message:** CUDA out of memory. Tried to allocate 2.00 GiB.\n",
         Phase::kSampling, EvidenceSource::kNode},
        {std::string(kOom) + "\nstage 'latents' failed, see above\n", Phase::kCacheLatents,
         EvidenceSource::kEpilogue},
    };
    for (const Case& c : cases) {
      CAPTURE(c.log);
      const OomEvent e = only_event(analyze_log(c.log));
      CHECK(e.phase == c.phase);
      REQUIRE(e.phase_evidence);
      CHECK(e.phase_evidence->source == c.source);
    }
  }

  TEST_CASE("a log line after a message cut short is not glued to it") {
    const LogAnalysis a = analyze_log(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
        "capacity of 23.55 GiB of which 100.00 MiB is free.\nERROR: stage 'text-encode' failed\n");
    const OomEvent e = only_event(a);
    CHECK(e.message.find("stage") == std::string::npos);
    CHECK(e.phase == Phase::kCacheTextEmbeddings);
    REQUIRE(e.phase_evidence);
    CHECK(e.phase_evidence->source == EvidenceSource::kEpilogue);
  }

  TEST_CASE(
      "precedence: a stage-naming frame beats the marker, and the marker beats an entry point") {
    const std::string marker = "Generating samples for step 200\n";
    // The frames name the stage: they win.
    const OomEvent framed = only_event(
        analyze_log(marker + traceback("  File \"/w/train.py\", line 3, in train\n"
                                       "  File \"/w/lib/vae.py\", line 9, in encode_images\n")));
    CHECK(framed.phase == Phase::kCacheLatents);
    // Only an entry point named "train": the newer marker says more.
    const OomEvent entry =
        only_event(analyze_log(marker + traceback("  File \"/w/train.py\", line 3, in train\n")));
    CHECK(entry.phase == Phase::kSampling);
    REQUIRE(entry.phase_evidence);
    CHECK(entry.phase_evidence->source == EvidenceSource::kMarker);
  }

  TEST_CASE("invariant: after a fatal OOM a bar keeps it fatal unless the same bar rises twice") {
    std::mt19937 random(1234);
    for (int trial = 0; trial < 300; ++trial) {
      CAPTURE(trial);
      const int before = static_cast<int>(random() % 50);
      std::string log = bar("steps", before, 100) + "\n" + kOom + "\n";
      int rises = 0;
      int last = before;
      const int frames = static_cast<int>(random() % 4);
      for (int i = 0; i < frames; ++i) {
        // Other bars (sampling, another training bar) and redraws at the same or a lower n.
        switch (random() % 4) {
          case 0:
            log += bar("Generating Images", static_cast<int>(random() % 10), 10) + "\n";
            break;
          case 1: log += bar("steps", last, 100) + "\n"; break;
          case 2: log += bar("epoch", static_cast<int>(random() % 3), 3) + "\n"; break;
          case 3:
            ++last;
            ++rises;
            log += bar("steps", last, 100) + "\n";
            break;
        }
      }
      const LogAnalysis a = analyze_log(log);
      const OomEvent e = only_event(a);
      CHECK(e.recovered == (rises >= 2));
      CHECK((a.outcome == Outcome::kCrashedOom) == (rises < 2));
    }
  }

  TEST_CASE("a restarted run that trains on leaves the earlier OOM fatal and the log running") {
    std::string log =
        bar("Steps", 500, 1000) + "\n" + traceback("") + bar("Steps", 500, 1000) + "\n";
    log +=
        "The following values were not passed to `accelerate launch` and had defaults used "
        "instead:\n***** Running training *****\n";
    for (int n = 500; n <= 503; ++n) log += "\r" + bar("Steps", n, 1000);
    log += "\n";
    const LogAnalysis a = analyze_log(log);
    const OomEvent e = only_event(a);
    CHECK_FALSE(e.recovered);
    CHECK(e.step == 500);
    CHECK(a.outcome == Outcome::kRunning);
  }

  TEST_CASE("invariant: a recovered banner is never fatal, and the fatal OOM after it is") {
    const std::string log = "# OOM during training step, skipping batch 1/3 #\n" +
                            bar("my_job", 12, 100) + "\n" + traceback("") + bar("my_job", 12, 100) +
                            "\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 2);
    CHECK(a.events[0].recovered);
    CHECK_FALSE(a.events[1].recovered);
    CHECK(a.outcome == Outcome::kCrashedOom);
  }

  TEST_CASE("invariant: the near misses never produce an event, whatever surrounds them") {
    for (std::string_view near_miss : oom_near_misses()) {
      CAPTURE(near_miss);
      const std::string line(near_miss);
      CHECK(analyze_log(line + "\n").events.empty());
      CHECK(analyze_log(bar("steps", 5, 10) + "\n" + line + "\n" + bar("steps", 6, 10) + "\n")
                .events.empty());
      CHECK(analyze_log("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n" +
                        line + "\n")
                .events.empty());
    }
  }

  TEST_CASE("two failures asking the same size but with other figures are two events") {
    const std::string other =
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 23.55 GiB of which 512.00 MiB is free.";
    CHECK(analyze_log(std::string(kOom) + "\n" + other + "\n").events.size() == 2);
    CHECK(analyze_log(std::string(kOom) + "\n" + kOom + "\n").events.size() == 1);
  }

  TEST_CASE("output flushed after a traceback that reached the top level is no recovery") {
    // stdout is block-buffered under "python train.py > log 2>&1": its counters land after the
    // interpreter's traceback, yet the process died.
    std::string log =
        "Traceback (most recent call last):\n"
        "  File \"/w/train.py\", line 188, in <module>\n    main()\n"
        "  File \"/w/train.py\", line 160, in main\n    loss.backward()\n" +
        std::string(kOom) + "\n";
    for (int n = 20; n <= 100; n += 20) {
      log += "step " + std::to_string(n) + "/5000 | loss 2.39 | lr 3.0e-05\n";
    }
    const LogAnalysis a = analyze_log(log);
    const OomEvent e = only_event(a);
    CHECK_FALSE(e.recovered);
    CHECK(a.outcome == Outcome::kCrashedOom);
  }

  TEST_CASE("a back-off line after an OOM message makes that one incident recovered") {
    std::string log = "epoch 001:    400 / 1563 loss=12.5, num_updates=400, lr=1.25e-05\n";
    log += "WARNING | fairseq.trainer | OOM: Ran out of memory with exception: " +
           std::string(kOom).substr(24) + "\n";
    for (int i = 0; i < 12; ++i) log += "|   memory summary row " + std::to_string(i) + " |\n";
    log += "WARNING | fairseq.trainer | attempting to recover from OOM in forward/backward pass\n";
    log += "epoch 001:    500 / 1563 loss=12.4, num_updates=500, lr=1.25e-05\n";
    log += "epoch 001:    600 / 1563 loss=12.3, num_updates=600, lr=1.25e-05\n";
    const LogAnalysis a = analyze_log(log);
    const OomEvent e = only_event(a);
    CHECK(e.recovered);
    CHECK(e.step == 400);
    CHECK(e.figures.tried_to_allocate_bytes);  // the figures of the message it recovered from
    CHECK(a.outcome == Outcome::kRunning);
  }

  TEST_CASE("OOM words in advice, conditions, comments and help text are no event") {
    for (const char* line :
         {"WARNING: batch 64 at 1024px may OOM on 24 GB cards; the trainer will retry with a "
          "smaller batch",
          "auto_batch: true  # on CUDA OOM, halve the batch and retry",
          "  --retry-on-oom        retry the step with a smaller batch when CUDA runs out of "
          "memory",
          "Set max_retries to enable retry when the task crashes due to OOM."}) {
      CAPTURE(line);
      CHECK(analyze_log(std::string(line) + "\n").events.empty());
    }
  }

  TEST_CASE("a training bar that ran to its total and starts again counts an epoch's batches") {
    std::string log;
    for (int n = 0; n <= 30; n += 10) log += "\r" + bar("Steps", n, 30);
    for (int n = 0; n <= 17; n += 1) log += "\r" + bar("Steps", n, 30);
    log += "\n" + std::string(kOom) + "\n";
    CHECK_FALSE(only_event(analyze_log(log)).step);  // the second epoch: no global step
    // "gs=" in the postfix says the global step outright.
    const OomEvent gs = only_event(
        analyze_log("Steps:  57%|█████▋    | 17/30 [00:41<00:30,  1.37s/it, gs=1517, loss=0.1]\n" +
                    std::string(kOom) + "\n"));
    CHECK(gs.step == 1517);
  }

  TEST_CASE("after a crash that is no OOM, one redraw of a bar leaves the log crashed") {
    std::string log = bar("train", 40, 100) + "\n";
    log += "Traceback (most recent call last):\n  File \"/w/t.py\", line 3, in <module>\n";
    log += "RuntimeError: CUDA error: an illegal memory access was encountered\n";
    log += bar("train", 41, 100) + "\n";
    CHECK(analyze_log(log).outcome == Outcome::kCrashedOther);
    CHECK(analyze_log(bar("train", 40, 100) + "\nterminate called after throwing an instance of "
                                              "'c10::DistBackendError'\n")
              .outcome == Outcome::kCrashedOther);
  }

  TEST_CASE("a printed counter that reaches its total completes the run") {
    CHECK(analyze_log("step 4990/5000 | loss 0.1 | lr 1e-5\nstep 5000/5000 | loss 0.1 | lr 1e-5\n")
              .outcome == Outcome::kCompleted);
  }

  TEST_CASE("every parser regex compiles") {
    const auto compiled = parser_patterns_ok();
    CHECK_MESSAGE(compiled, (compiled ? "" : compiled.error().message));
  }
}
