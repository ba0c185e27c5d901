// tests/parsers/line_cleaner_test.cc: every prefix shape from docs/formats.md §4 is stripped.
#include "parsers/line_cleaner.h"

#include <doctest/doctest.h>

using namespace oomtriage::parsers;

namespace {

std::string cleaned(std::string_view raw) {
  std::string scratch;
  return std::string(clean_line(raw, scratch).text);
}

}  // namespace

TEST_SUITE("parsers::line_cleaner") {
  TEST_CASE("prefixes seen in real logs are removed, stacked ones too") {
    const char* message = "torch.OutOfMemoryError: CUDA out of memory.";
    const char* prefixes[] = {
        "[rank0]: ",
        "[default1]:",
        "[default0]:[rank0]: ",
        "[80746] [rank0]:",
        "(RayWorkerVllm pid=7009) ",
        "2025-01-21T23:09:55.550258 - ",
        "2026-02-16 08:07:29 ERROR    ",
        "[2025-01-09 02:45:30] [INFO] ",
        "08/23/2026 00:34:28 - ERROR - __main__ - ",
        "[1234567.890123] ",
        "May 01 12:00:00 gpu1 kernel: ",
        "2021-06-02 15:51:03 host root[14429] DEBUG ",
        "INTERNALERROR> ",
        "(pid=3959, ip=172.31.41.219) ",
        "2021-06-02 15:51:03 | WARNING | fairseq.trainer | ",
        "E0705 15:48:23.150000 434379 torch/_inductor/select_algorithm.py:2100] ",
        "[rank0]:[W1004 01:37:03.193503883 ProcessGroupNCCL.cpp:1538] ",
        "ERROR:root:",
        "ERROR    | 2024-08-21 22:56:04 | autotrain.trainers.common:wrapper:121 - ",
        "[INFO|trainer.py:2128] 2026-01-01 12:00:00,123 >> ",
        "2026-01-01T00:00:00.123456789Z stderr F ",
        "`",
        "**",
        "> ",
        "  ",
        "\x1b[31m",
        // stacked several deep, and the prefixes they are made of
        "2026-03-01T10:00:00.123Z [rank1]: [2026-03-01 10:00:00,123] ERROR [trainer.py:88] ",
        "[80746] [rank0]: 10:00:00 | ERROR | ",
        "[2026-08-22 12:19:04,123] [ERROR] [stage3.py:2657:step] ",
        "[ERROR] [rank2]: ",
        "[ERROR rank3] ",
        "[WARNING|rank 1] ",
        "[rank: 0] ",
        "node-3: ",
        "gpu01.cluster.local: ",
        "0: ",
        " 12: [default3]:",
        "2026-01-01T00:00:00.0000000Z ",
        "2026-01-02 10:00:00.123 | INFO     | mod:fn:12 - ",
        "2026-01-02 10:00:00,123 - INFO - trainer - ",
        "[19:27:22] ",
        "- **Exception Type:** ",
        "**Exception Message:** ",
        "Exception Type: ",
        "- ",
    };
    for (const char* prefix : prefixes) {
      CAPTURE(prefix);
      CHECK(cleaned(std::string(prefix) + message) == message);
    }
  }
  TEST_CASE("the rank of a torch.distributed prefix is kept") {
    std::string scratch;
    CHECK(clean_line("[rank3]: RuntimeError: x", scratch).rank == 3);
    CHECK(clean_line("[default2]:x", scratch).rank == 2);
    CHECK_FALSE(clean_line("[80746] x", scratch).rank);
  }
  TEST_CASE("the rank survives stacked prefixes, whichever layer carries it") {
    std::string scratch;
    CHECK(clean_line("2026-03-01T10:00:00.123Z [rank1]: [2026-03-01 10:00:00,123] ERROR "
                     "[trainer.py:88] torch.OutOfMemoryError: x",
                     scratch)
              .rank == 1);
    CHECK(clean_line("[80746] [rank0]: 10:00:00 | ERROR | x", scratch).rank == 0);
    CHECK(clean_line("[ERROR] [rank2]: x", scratch).rank == 2);
    CHECK(clean_line("[ERROR rank3] x", scratch).rank == 3);
    CHECK(clean_line("[rank: 4] x", scratch).rank == 4);
    CHECK(clean_line("[default0]:[rank5]: x", scratch).rank == 0);  // the outer layer names it
    CHECK(clean_line("\x1b[2m2026-01-01T00:00:00Z\x1b[0m [rank6]: x", scratch).rank == 6);
  }
  TEST_CASE("srun's task label is the rank only when no rank prefix names one") {
    std::string scratch;
    CHECK(clean_line("3: torch.OutOfMemoryError: x", scratch).rank == 3);
    CHECK(clean_line("0: [default2]:x", scratch).rank == 2);
    CHECK_FALSE(clean_line("node-3: x", scratch).rank);
  }
  TEST_CASE("words that only look like prefixes stay") {
    CHECK(cleaned("torch.OutOfMemoryError: CUDA out of memory.") ==
          "torch.OutOfMemoryError: CUDA out of memory.");
    CHECK(cleaned("RuntimeError: CUDA error: out of memory") ==
          "RuntimeError: CUDA error: out of memory");
    CHECK(cleaned("python invoked oom-killer: gfp_mask=0x0") ==
          "python invoked oom-killer: gfp_mask=0x0");
    CHECK(cleaned("exitcode  : -9 (pid: 1234)") == "exitcode  : -9 (pid: 1234)");
    CHECK(cleaned("loss: 0.25, step: 10") == "loss: 0.25, step: 10");
    CHECK(cleaned("Exception in main training loop: x") == "Exception in main training loop: x");
    CHECK(cleaned("-9 exit") == "-9 exit");
  }
  TEST_CASE("every RE2 of the cleaner compiled") {
    const auto compiled = line_cleaner_ok();
    CHECK_MESSAGE(compiled, (compiled ? "" : compiled.error().message));
  }
  TEST_CASE("ANSI colours and cursor moves are removed anywhere in the line") {
    CHECK(cleaned("\x1b[1;31mKilled\x1b[0m") == "Killed");
    CHECK(cleaned("\x1b[AHIP out of memory\x1b[K") == "HIP out of memory");
  }
  TEST_CASE("ordinary text is left alone") {
    CHECK(cleaned("Killed") == "Killed");
    CHECK(cleaned("Traceback (most recent call last):") == "Traceback (most recent call last):");
    CHECK(cleaned("allocated; 8.57 GiB free;") == "allocated; 8.57 GiB free;");
    CHECK(cleaned("GiB reserved in total by") == "GiB reserved in total by");
  }
}
