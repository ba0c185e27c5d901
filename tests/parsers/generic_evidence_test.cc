// tests/parsers/generic_evidence_test.cc: the evidence any training loop leaves, whatever trainer
// wrote it (docs/detection.md "Evidence any loop leaves"): a bar known by its loss or learning
// rate, a bar open at the error or redrawn after it, LLM trainers' totals and statements,
// notebooks' arrows, logger and rank prefixes, a back-off line that names no OOM, epochs counted
// from 1, host allocation sizes. Each rule with logs made up for it and its near misses.
#include <doctest/doctest.h>

#include <string>

#include "parsers/log_analyzer.h"
#include "parsers/progress.h"

#include "tests/support/log_samples.h"

using namespace oomtriage::parsers;
using namespace oomtriage::test;

namespace {

constexpr const char* kOldFormat =
    "RuntimeError: CUDA out of memory. Tried to allocate 1.53 GiB (GPU 0; 10.76 GiB total "
    "capacity; 7.37 GiB already allocated; 1.22 GiB free; 8.53 GiB reserved in total by PyTorch)";

OomEvent first_event(const std::string& log) {
  const LogAnalysis analysis = analyze_log(log);
  REQUIRE_FALSE(analysis.events.empty());
  return analysis.events.front();
}

}  // namespace

TEST_SUITE("parsers::generic_evidence") {
  TEST_CASE("a postfix that reports a loss or a learning rate makes a bar the training bar") {
    CHECK(has_training_postfix("00:02<00:02, 7.89it/s, loss=1.0172"));
    CHECK(has_training_postfix("00:41<00:00,  1.37s/it, avr_loss=0.108"));
    CHECK(has_training_postfix("01:24<5:21:16,  3.72it/s, lr: 1.0e-04"));
    CHECK(has_training_postfix("00:10<00:12, train/loss_step=0.02"));
    CHECK(has_training_postfix("00:01<00:00, lr_unet=1e-4"));
    CHECK(has_training_postfix("v_num: 0 loss: 2.3"));
    // Near misses: words that hold "lr" or "loss" but are not a key, a time, a rate.
    CHECK_FALSE(has_training_postfix("00:02<00:02, 7.89it/s"));
    CHECK_FALSE(has_training_postfix("00:02<00:02, 7.89it/s, world=3"));
    CHECK_FALSE(has_training_postfix("00:02<00:02, 7.89it/s, psnr=31.2, vram=4867/12288"));
    CHECK_FALSE(has_training_postfix("lossless mode"));

    // Any description: the job's own name, none at all.
    for (const std::string desc : {"my_job", "", "Progress"}) {
      CAPTURE(desc);
      std::string log;
      for (int n = 18; n <= 20; ++n) {
        log += (desc.empty() ? "" : desc + ": ") + "50%|#####     | " + std::to_string(n) +
               "/40 [00:02<00:02,  7.89it/s, loss=1.0172]\r";
      }
      log += "\n" + std::string(kOom) + "\n";
      const OomEvent event = first_event(log);
      CHECK(event.step == 20);
      CHECK(event.phase == Phase::kTrainStep);
    }
  }

  TEST_CASE("a bar that puts its percentage after the bar is read with its description") {
    const auto frame = parse_progress_frame(
        "Progress:|#####     |  0% 1/4700 [00:03<4:00:00,  3.1s/it, loss=0.0911, lr=2e-6]");
    REQUIRE(frame);
    CHECK(frame->desc == "Progress");
    CHECK(frame->n == 1);
    CHECK(frame->total == 4700);
    CHECK(frame->training_postfix);
  }

  TEST_CASE("a bar nothing names gives the step when it is open at the error or redrawn after") {
    // Redrawn once by tqdm's close() while the exception unwinds, after the message.
    CHECK(
        first_event(std::string(kOldFormat) + "\n  0%|   | 99/150000 [01:31<38:27:38,  1.08it/s]\n")
            .step == 99);
    // Open when the traceback came, glued to it.
    CHECK(first_event("0%| | 7/30033 [00:10<?, ?it/s]Traceback (most recent call last):\n"
                      "  File \"train.py\", line 3, in <module>\n    main()\n" +
                      std::string(kOom) + "\n")
              .step == 7);
    // Near misses: a finished bar (a pipeline's 50/50) is no loop the error stopped; a stage
    // marker newer than the bar says what ran; a preview's bar counts no training step.
    CHECK_FALSE(
        first_event("100%|##########| 50/50 [00:10<00:00,  4.9it/s]\n" + std::string(kOom) + "\n")
            .step);
    CHECK_FALSE(
        first_event(" 12%|#         | 6/50 [00:10<00:00,  4.9it/s]\nLoading model weights\n" +
                    std::string(kOom) + "\n")
            .step);
    const OomEvent preview = first_event(
        " 12%|#         | 6/50 [00:10<00:00,  4.9it/s]\nTraceback (most recent call last):\n"
        "  File \"/w/train.py\", line 9, in generate_preview_images\n    pipe(prompt)\n" +
        std::string(kOom) + "\n");
    CHECK(preview.phase == Phase::kSampling);
    CHECK_FALSE(preview.step);
  }

  TEST_CASE("LLM trainers: a printed total, HF's dict lines, generate() and the loading call") {
    const std::string unsloth =
        "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1\n"
        "   \\\\   /|    Num examples = 102 | Num Epochs = 5\n"
        "\\        /    Total batch size = 8 | Total steps = 60\n"
        "  5%|5         | 3/60 [00:21<06:40,  7.02s/it]\n" +
        std::string(kOom) + "\n";
    const OomEvent event = first_event(unsloth);
    CHECK(event.step == 3);
    CHECK(event.total_steps == 60);
    CHECK(event.phase == Phase::kTrainStep);

    const OomEvent rollout = first_event(
        "{'loss': 0.0123, 'learning_rate': 1e-06, 'epoch': 0.02}\n"
        "Traceback (most recent call last):\n"
        "  File \"/usr/lib/python3/site-packages/trl/trainer/grpo_trainer.py\", line 900, in "
        "_generate_and_score_completions\n"
        "    completions = unwrapped_model.generate(prompt_ids)\n" +
        std::string(kOom) + "\n");
    CHECK(rollout.phase == Phase::kSampling);
  }

  TEST_CASE("notebooks: the arrow marks the statement a cell or frame ran") {
    const std::string load =
        "OutOfMemoryError                          Traceback (most recent call last)\n"
        "<ipython-input-4-5d2a1b6c7e8f> in <cell line: 3>()\n"
        "      1 from transformers import AutoModelForCausalLM\n"
        "----> 3 model = AutoModelForCausalLM.from_pretrained(\"m\", device_map=\"auto\")\n\n" +
        std::string(kOldFormat) + "\n";
    CHECK(first_event(load).phase == Phase::kModelLoad);
    const std::string evaluate =
        "OutOfMemoryError                          Traceback (most recent call last)\n"
        "Cell In[7], line 1\n----> 1 trainer.evaluate()\n\n" +
        std::string(kOom) + "\n";
    CHECK(first_event(evaluate).phase == Phase::kSampling);
    // Near miss: an arrow that is not IPython's ("-> int" in a signature) names nothing.
    CHECK(first_event("def f(x) -> int:\n" + std::string(kOom) + "\n").phase == Phase::kUnknown);
  }

  TEST_CASE("a backward call names training where its frame line was cut or wrapped") {
    const std::string cut =
        " return Variable._execution_engine.run_backward(  # Calls into the C++ engine\n"
        "RuntimeError: MPS backend out of memory (MPS allocated: 5.50 GB, other allocations: "
        "14.76 GB, max allowed: 20.40 GB). Tried to allocate 147.24 MB on private pool.\n";
    CHECK(first_event(cut).phase == Phase::kTrainStep);
    const std::string wrapped =
        "[rank1]:   File \"/env/lib/python3.11/site-packages/torch/_tensor.py\",\n"
        " line 525, in backward\n" +
        std::string(kOom) + "\n";
    CHECK(first_event(wrapped).phase == Phase::kTrainStep);
  }

  TEST_CASE("prefixes of loggers and ranks are stripped before every rule") {
    const OomEvent logged = first_event(
        "2021-06-02 15:50:58 host root[14429] INFO Iteration: 15/1184, epoch 0, loss "
        "2.31\n2021-06-02 15:51:03 host root[14429] DEBUG " +
        std::string(kOldFormat).substr(14) + "\n");
    CHECK(logged.step == 15);
    CHECK(logged.figures.tried_to_allocate_bytes == 1642824991);
    // Two ranks' writes on one line are two records: one incident, both ranks.
    const LogAnalysis ranks =
        analyze_log("[rank0]:     loss = model(batch).loss[rank1]: " + std::string(kOom) +
                    "\n[rank0]: " + std::string(kOom) + "\n");
    CHECK(ranks.events.size() == 1);
  }

  TEST_CASE("fairseq: the step through its prefix, one recovered OOM for all its back-off lines") {
    const std::string log =
        "2021-06-02 15:51:01 | INFO | train_inner | epoch 001:     14 / 1184 loss=9.21, "
        "ppl=592.3, wps=1201, lr=1e-05\n"
        "2021-06-02 15:51:03 | WARNING | fairseq.trainer | OOM: Ran out of memory with "
        "exception: " +
        std::string(kOldFormat).substr(14) +
        "\n2021-06-02 15:51:03 | WARNING | fairseq.trainer | attempting to recover from OOM in "
        "forward/backward pass\n"
        "2021-06-02 15:51:03 | WARNING | fairseq.trainer | OOM in all workers, skipping batch\n";
    const LogAnalysis analysis = analyze_log(log);
    REQUIRE(analysis.events.size() == 1);
    CHECK(analysis.events[0].recovered);
    CHECK(analysis.events[0].step == 14);
    CHECK(analysis.events[0].phase == Phase::kTrainStep);
    // fairseq before 0.10: "Skipping batch" alone under the message.
    const LogAnalysis old = analyze_log("| WARNING: ran out of memory with exception: " +
                                        std::string(kOldFormat).substr(14) + "\n Skipping batch\n");
    REQUIRE(old.events.size() == 1);
    CHECK(old.events[0].recovered);
    // Near misses: a batch skipped with no OOM before it is no event; an AI Toolkit banner
    // per skipped batch is an OOM each.
    CHECK(analyze_log("Skipping batch 12: empty caption\n").events.empty());
    CHECK(analyze_log("# OOM during training step, skipping batch 1/3 #\n"
                      "# OOM during training step, skipping batch 2/3 #\n")
              .events.size() == 2);
  }

  TEST_CASE("an epoch 1 with no epoch 0 before it is the first - after an epoch 0 it is not") {
    CHECK(first_event("   [Train] Epoch: [1][371/4899]  Loss:0.564 LR 1.00e-03\n" +
                      std::string(kOom) + "\n")
              .step == 371);
    CHECK_FALSE(first_event("   [Train] Epoch: [0][4899/4899]  Loss:0.564 LR 1.00e-03\n"
                            "   [Train] Epoch: [1][371/4899]  Loss:0.564 LR 1.00e-03\n" +
                            std::string(kOom) + "\n")
                    .step);
    CHECK(first_event("{| Epoch: 1/1 (121/15311) | Loss: 1.719 | 0.73 steps/s | Step: 0k | }" +
                      std::string(kOom) + "\n")
              .step == 121);
  }

  TEST_CASE("a host allocation failure carries the size it asked for") {
    CHECK(first_event("RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. "
                      "DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                      "134217728 bytes. Error code 12 (Cannot allocate memory)\n")
              .figures.tried_to_allocate_bytes == 134217728);
    CHECK(first_event("MemoryError: Unable to allocate 3.66 MiB for an array with shape (1000, "
                      "960) and data type float32\n")
              .figures.tried_to_allocate_bytes == 3837788);
    // Torch7's size is whole gigabytes: no figure.
    CHECK_FALSE(first_event("RuntimeError: $ Torch: not enough memory: you tried to allocate 0GB. "
                            "Buy new RAM!\n")
                    .figures.tried_to_allocate_bytes);
  }

  TEST_CASE("a memory summary that counted an OOM is one when the log shows no other") {
    const std::string summary =
        "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
        "|            CUDA OOMs: 1            |        cudaMalloc retries: 1         |\n";
    CHECK(first_event(summary).kind == OomKind::kCuda);
    // Near misses: a summary that counted none; one beside the message it counts.
    CHECK(analyze_log("|            CUDA OOMs: 0            |        cudaMalloc retries: 0     |\n")
              .events.empty());
    CHECK(analyze_log(std::string(kOom) + "\n" + summary).events.size() == 1);
    CHECK(analyze_log(summary + kOom + "\n").events.size() == 1);
  }

  TEST_CASE("TensorFlow's ROCm allocator line is a HIP OOM with the size it asked for") {
    const OomEvent event = first_event(
        "2021-05-04 10:00:00.000000: E tensorflow/stream_executor/rocm/rocm_driver.cc:600] failed "
        "to allocate 890.06M (933298432 bytes) from device: HIP_ERROR_OutOfMemory\n");
    CHECK(event.kind == OomKind::kHip);
    CHECK(event.figures.tried_to_allocate_bytes == 933298432);
  }

  TEST_CASE("host kills that name themselves: Slurm's memory limit, Colab's notice") {
    CHECK(first_event("slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), "
                      "being killed\n")
              .kind == OomKind::kHostKilled);
    CHECK(first_event("Your session crashed after using all available RAM.\n").kind ==
          OomKind::kHostKilled);
    // Near miss: Slurm's accounting note that kills nothing.
    CHECK(analyze_log("slurmstepd: error: Exceeded step memory limit at some point.\n")
              .events.empty());
  }
}
