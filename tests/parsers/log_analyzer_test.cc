// tests/parsers/log_analyzer_test.cc: the analyzer's behaviour on the shapes real logs take:
// glued output, hard wraps, fragments, rank copies, and any byte sequence at all.
#include "parsers/log_analyzer.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

using namespace oomtriage::parsers;

namespace {

const char* kOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 812.00 MiB is free. Of the allocated memory 21.00 GiB is "
    "allocated by PyTorch, and 200.00 MiB is reserved by PyTorch but unallocated.";

}  // namespace

TEST_SUITE("parsers::log_analyzer") {
  TEST_CASE("an OOM the scheduler reports is placed where the log stopped, and stays a crash") {
    std::string log = "Running 1 job\n# Running job: my_lora\n";
    for (int n = 0; n <= 300; n += 50) {
      log += "\rmy_lora:  10%|#         | " + std::to_string(n) +
             "/3000 [00:10<01:30, 1.40s/it, lr: 1.0e-04 loss: 4.1e-01]";
    }
    LogAnalyzer analyzer;
    analyzer.feed(log);
    CHECK(analyzer.take_events().empty());
    CHECK(analyzer.outcome_so_far() == Outcome::kRunning);
    analyzer.add_reported_event(OomKind::kHostKilled, "Slurm job 7 ended OUT_OF_MEMORY");
    const std::vector<OomEvent> events = analyzer.take_events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == OomKind::kHostKilled);
    CHECK(events[0].phase == Phase::kTrainStep);
    CHECK(events[0].step == 300);
    CHECK(events[0].total_steps == 3000);
    CHECK_FALSE(events[0].recovered);
    CHECK(events[0].message == "Slurm job 7 ended OUT_OF_MEMORY");
    CHECK(analyzer.outcome_so_far() == Outcome::kCrashedOom);
    // A daemon that restarts from the checkpoint still knows the run crashed.
    LogAnalyzer resumed({}, analyzer.checkpoint(), analyzer.resume_offset(),
                        analyzer.resume_line());
    CHECK(resumed.outcome_so_far() == Outcome::kCrashedOom);
  }

  TEST_CASE("an error glued to the end of a sampling frame is sampling at the training step") {
    const std::string log =
        "# Running job: my_lora\n"
        "\rmy_lora:  17%|█▋        | 499/3000 [12:01<58:10,  1.40s/it, lr: 1.0e-04 loss: 3.9e-01]"
        "\rmy_lora:  17%|█▋        | 500/3000 [12:02<58:09,  1.40s/it, lr: 1.0e-04 loss: 4.0e-01]"
        "\rGenerating Samples:  10%|█         | 1/10 [00:31<04:39, 31.0s/it]Error running job: "
        "CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.55 GiB "
        "of which 812.00 MiB is free.\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].phase == Phase::kSampling);
    CHECK(a.events[0].step == 500);
    CHECK(a.events[0].total_steps == 3000);
    CHECK(a.events[0].line == 2);
    CHECK(a.events[0].figures.free_bytes == 851443712u);
    CHECK(a.outcome == Outcome::kCrashedOom);
    CHECK(a.job_name == "my_lora");
  }
  TEST_CASE("the byte offset points at the message, after prefixes") {
    const std::string log = "hello\n[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK(log.substr(a.events[0].offset, 18) == "CUDA out of memory");
  }
  TEST_CASE("a message hard-wrapped mid-word is joined before its figures are read") {
    const std::string log =
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a "
        "total capacity of 79.32 GiB of which 6.88 MiB is free. Process 11 has 9.89 GiB memory in "
        "use. Includ\ning non-PyTorch memory, this process has 10.58 GiB memory in use. Of the "
        "allocated memory 9.56 GiB is allocated by PyTorch, and 534.22 MiB is reserved by PyTorch "
        "but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:T\nrue to avoid fragmentation.  See "
        "documentation for Memory Management  (https://pytorch.o\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].figures.this_process_in_use_bytes == 11360188498u);
    CHECK(a.events[0].figures.reserved_unallocated_bytes == 560170271u);
    CHECK(a.events[0].figures.other_processes.size() == 1);
  }
  TEST_CASE("the same crash printed by two ranks, or twice by a tee, is one event") {
    std::string log;
    log += std::string("[rank0]: ") + kOom + "\n";
    log +=
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
        "has a total capacity of 23.55 GiB of which 1.00 GiB is free.\n";
    log += std::string(kOom) + "\n" + kOom + "\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].figures.gpu_index == 0);
  }
  TEST_CASE("two different failed allocations far apart are two events") {
    std::string log = std::string(kOom) + "\n";
    for (int i = 0; i < 500; ++i) log += "some unrelated line " + std::to_string(i) + "\n";
    log += std::string(kOom) + "\n";
    CHECK(analyze_log(log).events.size() == 2);
  }
  TEST_CASE("training that goes on after an OOM marks it recovered") {
    std::string log = "steps:   1%|          | 10/1000 [00:10<10:00,  1.00it/s]\n";
    log += std::string(kOom) + "\n";
    log += "steps:   1%|          | 11/1000 [00:11<10:00,  1.00it/s]\n";
    log += "steps:   1%|          | 12/1000 [00:12<10:00,  1.00it/s]\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].recovered);
    CHECK(a.events[0].step == 10);
    CHECK(a.outcome == Outcome::kRunning);
  }
  TEST_CASE("one redraw of the bar after the error is tqdm's close(), not training going on") {
    // close() at interpreter exit redraws the bar with its true n, which the last frame before
    // the error may lag (mininterval): one rise proves nothing.
    std::string log = "steps:   1%|          | 10/1000 [00:10<10:00,  1.00it/s]\n";
    log += std::string(kOom) + "\n";
    log += "steps:   1%|          | 11/1000 [00:11<10:00,  1.00it/s]\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK_FALSE(a.events[0].recovered);
    CHECK(a.events[0].step == 10);
    CHECK(a.outcome == Outcome::kCrashedOom);
  }
  TEST_CASE("a fragment that starts mid-traceback still yields the event and its phase") {
    const std::string log =
        "le \"/x/toolkit/models/base_model.py\", line 512, in generate_images\n"
        "    img = pipeline(**extra)\n"
        "  File \"/x/torch/nn/modules/module.py\", line 1773, in _wrapped_call_impl\n" +
        std::string(kOom) + "\n";
    const LogAnalysis a = analyze_log(log);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].phase == Phase::kUnknown);  // the cut frame line names no function we trust
  }
  TEST_CASE("Python logging, loguru and markdown residue around the message") {
    for (const char* line :
         {"ERROR:root:Failed to execute the training process: CUDA out of memory. Tried to "
          "allocate 2.00 MiB (GPU 0; 1.00 GiB total capacity; 1.00 MiB already allocated)",
          "**torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 28.00 MiB. GPU 1 has a",
          "`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.06 GiB.`",
          "> ERROR    | 2024-08-21 22:56:04 | a.b:wrapper:121 - HIP out of memory. Tried to "
          "allocate 124.00 MiB."}) {
      CAPTURE(line);
      CHECK(analyze_log(line).events.size() == 1);
    }
  }
  TEST_CASE("host kills: kernel line, shell, SIGKILL exit, dataloader") {
    for (const char* log :
         {"[1234.5] Out of memory: Killed process 4321 (python) total-vm:1kB, anon-rss:1kB\n",
          "epoch 1\nKilled\n", "./train.sh: line 12: 54321 Killed                  python t.py\n",
          "  exitcode  : -9 (pid: 1234)\n  traceback : Signal 9 (SIGKILL) received by PID 1234\n",
          "Job process terminated with signal SIGKILL.\n"}) {
      CAPTURE(log);
      const LogAnalysis a = analyze_log(log);
      REQUIRE(a.events.size() == 1);
      CHECK(a.events[0].kind == OomKind::kHostKilled);
      CHECK(a.outcome == Outcome::kCrashedOom);
    }
    CHECK(analyze_log("MemoryError\n").events.at(0).kind == OomKind::kHostMemoryError);
    CHECK(analyze_log("Bus error (core dumped)\n").events.at(0).kind == OomKind::kShm);
  }
  TEST_CASE("near misses produce no event") {
    for (const char* log :
         {"RuntimeError: CUDA error: an illegal memory access was encountered\n",
          "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n",
          "torch.OutOfMemoryError: out of resource: triton_poi Required: 147456 Hardware "
          "limit:101376\n",
          "Error running job: Job stopped\n", "Peak memory: 21.3 GiB reserved\n"}) {
      CAPTURE(log);
      CHECK(analyze_log(log).events.empty());
    }
  }
  TEST_CASE("outcomes: completed, stopped, running, unknown") {
    CHECK(analyze_log("steps: 100%|██████████| 10/10 [00:10<00:00,  1.00it/s]\n").outcome ==
          Outcome::kCompleted);
    CHECK(analyze_log("Error running job: Job stopped\n").outcome == Outcome::kStopped);
    CHECK(analyze_log("steps:  50%|█████     | 5/10 [00:05<00:05,  1.00it/s]").outcome ==
          Outcome::kRunning);
    CHECK(analyze_log("").outcome == Outcome::kUnknown);
  }
  TEST_CASE("a 100 MiB line without a newline is cut and counted") {
    LogAnalyzer analyzer;
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 100; ++i) analyzer.feed(block);
    analyzer.feed("\nKilled\n");
    const LogAnalysis a = analyzer.finish();
    CHECK(a.truncated_records == 1);
    CHECK(a.lines == 3);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].line == 2);
  }
  TEST_CASE("any byte sequence, in any chunking, is analysed without a crash and the same way") {
    std::mt19937 rng(20261130);
    const std::string alphabet = std::string("\r\n\t \x1b[]|%/:0123456789.") + "GiBMiB" +
                                 "CUDA out of memory. Tried to allocate Killed" +
                                 std::string("\0\xff\xfe\x80", 4);
    for (int round = 0; round < 200; ++round) {
      std::string bytes(rng() % 4000, '\0');
      for (char& c : bytes) {
        c = (rng() % 4 == 0) ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
      }
      const LogAnalysis whole = analyze_log(bytes);
      LogAnalyzer chunked;
      for (size_t i = 0; i < bytes.size();) {
        const size_t n = 1 + rng() % 97;
        chunked.feed(std::string_view(bytes).substr(i, n));
        i += n;
      }
      const LogAnalysis split = chunked.finish();
      REQUIRE(split.events.size() == whole.events.size());
      for (size_t i = 0; i < whole.events.size(); ++i) {
        CHECK(split.events[i].line == whole.events[i].line);
        CHECK(split.events[i].offset == whole.events[i].offset);
        CHECK(split.events[i].message == whole.events[i].message);
      }
      CHECK(split.outcome == whole.outcome);
      CHECK(split.lines == whole.lines);
    }
  }
  TEST_CASE("a checkpoint and resume offset reproduce the uninterrupted analysis") {
    // Stop anywhere, resume from the saved offset with the saved context: the events (unique by
    // offset, as the store keeps them) are the same as in one pass.
    std::string log = "# Running job: my_lora\n";
    for (int n = 0; n <= 40; ++n) {
      log += "\rmy_lora:   1%|          | " + std::to_string(n) +
             "/3000 [00:10<10:00,  1.00s/it, lr: 1.0e-04 loss: 4.1e-01]";
    }
    log +=
        "\n\n################################################\n"
        "# OOM during training step, skipping batch 1/3 #\n"
        "################################################\n\n";
    for (int n = 41; n <= 60; ++n) {
      log += "\rmy_lora:   2%|          | " + std::to_string(n) +
             "/3000 [00:10<10:00,  1.00s/it, lr: 1.0e-04 loss: 4.1e-01]";
    }
    log += "\rGenerating Samples:   0%|          | 0/3 [00:00<?, ?it/s]Error running job: ";
    log += std::string(kOom).substr(24) + "\n\nTraceback (most recent call last):\n";
    log += "  File \"/a/toolkit/models/base_model.py\", line 5, in generate_images\n";
    log += std::string(kOom) + "\n";
    const LogAnalysis whole = analyze_log(log);
    REQUIRE(whole.events.size() == 2);
    for (size_t cut = 1; cut < log.size(); cut += 37) {
      CAPTURE(cut);
      LogAnalyzer first;
      first.feed(std::string_view(log).substr(0, cut));
      std::vector<OomEvent> events = first.take_events();
      const uint64_t offset = first.resume_offset();
      REQUIRE(offset <= cut);
      LogAnalyzer second({}, first.checkpoint(), offset, first.resume_line());
      second.feed(std::string_view(log).substr(offset));
      for (OomEvent& e : second.finish().events) {
        const bool seen = std::any_of(events.begin(), events.end(),
                                      [&](const OomEvent& x) { return x.offset == e.offset; });
        if (!seen) events.push_back(std::move(e));
      }
      REQUIRE(events.size() == whole.events.size());
      for (size_t i = 0; i < events.size(); ++i) {
        CHECK(events[i].offset == whole.events[i].offset);
        CHECK(events[i].line == whole.events[i].line);
        CHECK(events[i].step == whole.events[i].step);
        CHECK(events[i].phase == whole.events[i].phase);
        CHECK(events[i].kind == whole.events[i].kind);
      }
    }
  }
  TEST_CASE("settle reports an open incident now and amends it with the rest of it") {
    LogAnalyzer analyzer;
    analyzer.feed("Error running job: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
    CHECK(analyzer.take_events().empty());  // still open: its traceback may follow
    CHECK(analyzer.has_open_incident());
    analyzer.settle();
    const auto first = analyzer.take_events();
    REQUIRE(first.size() == 1);
    CHECK(first[0].revision == 0);
    CHECK_FALSE(first[0].exception);
    CHECK_FALSE(analyzer.has_open_incident());
    analyzer.settle();  // nothing new: nothing again
    CHECK(analyzer.take_events().empty());
    analyzer.feed(
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in run\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
    CHECK(analyzer.has_open_incident());  // records arrived since: they may amend it
    analyzer.settle();
    const auto amended = analyzer.take_events();
    REQUIRE(amended.size() == 1);  // the traceback's last line is the same incident
    CHECK(amended[0].revision == 1);
    CHECK(amended[0].offset == first[0].offset);
    CHECK(amended[0].exception == "torch.OutOfMemoryError");
    CHECK(analyzer.finish().events.empty());  // closing it changes nothing more
  }
}
