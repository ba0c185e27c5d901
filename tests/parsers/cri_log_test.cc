// tests/parsers/cri_log_test.cc
//
// Container logs in kubelet's CRI format: the line parser on the lines kubelet's own tests and
// docs show, and the decoder on logs written by a CRI writer (tests/support/cri_writer.h) from
// every golden log: the decoded content is the plain log, byte for byte, however the file is
// cut into chunks and wherever a checkpoint restores it; stdout and stderr interleaved inside a
// tqdm bar give the OOM's step and figures whole.
#include "parsers/cri_log.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <random>

#include "parsers/log_analyzer.h"
#include "tests/support/cri_writer.h"
#include "tests/support/files.h"

using namespace oomtriage;
using parsers::CriDecoder;
namespace fs = std::filesystem;

namespace {

const fs::path kGoldenLogs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "logs";

// Decodes `log` fed in chunks of random size (1..max_chunk bytes).
std::string decode(std::string_view log, std::mt19937& random, size_t max_chunk) {
  CriDecoder decoder;
  std::string out;
  std::uniform_int_distribution<size_t> size(1, max_chunk);
  for (size_t at = 0; at < log.size();) {
    const size_t n = std::min(log.size() - at, size(random));
    decoder.feed(log.substr(at, n), out);
    at += n;
  }
  decoder.finish(out);
  return out;
}

std::string with_final_newline(std::string text) {
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  return text;
}

}  // namespace

TEST_SUITE("parsers::cri log") {
  TEST_CASE("CRI lines as kubelet writes them parse, other log lines do not") {
    // kubelet pkg/kubelet/kuberuntime/logs/logs_test.go and the CRI design doc.
    auto line = parsers::parse_cri_line("2016-10-06T00:17:09.669794202Z stdout P log content 1");
    REQUIRE(line);
    CHECK_FALSE(line->stderr_stream);
    CHECK(line->partial);
    CHECK(line->content == "log content 1");
    line = parsers::parse_cri_line("2016-10-06T00:17:09.669794203Z stderr F log content 2");
    REQUIRE(line);
    CHECK(line->stderr_stream);
    CHECK_FALSE(line->partial);
    CHECK(line->content == "log content 2");
    line = parsers::parse_cri_line("2016-10-06T00:17:10.113242941+08:00 stderr F:x  two spaces");
    REQUIRE(line);
    CHECK(line->content == " two spaces");
    line = parsers::parse_cri_line("2026-11-30T10:15:00.000000001Z stdout F ");
    REQUIRE(line);
    CHECK(line->content.empty());
    line = parsers::parse_cri_line("2026-11-30T10:15:00.000000001Z stdout F");
    REQUIRE(line);
    CHECK(line->content.empty());

    for (const char* other : {
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.",
             "2026-11-30 10:15:00 stdout F text",                                        // no 'T'
             R"({"log":"Killed\n","stream":"stderr","time":"2026-11-30T10:15:00.1Z"})",  // docker
             "2026-11-30T10:15:00.000000001Z stdin F text",
             "2026-11-30T10:15:00.000000001Z stdout X text",
             "2026-11-30T10:15:00.000000001Z",
             "",
         }) {
      CAPTURE(other);
      CHECK_FALSE(parsers::parse_cri_line(other));
    }
    CHECK(parsers::looks_like_cri("2016-10-06T00:17:09.669794202Z stdout F Running 1 job\nrest"));
    CHECK_FALSE(parsers::looks_like_cri("Running 1 job\n2016-10-06T00:17:09.669794202Z stdout F"));
    CHECK_FALSE(parsers::looks_like_cri("2016-10-06T00:17:09.669794202Z stdout F no newline yet"));
  }

  TEST_CASE("every golden log written by the runtime decodes to itself, in any chunks") {
    size_t checked = 0;
    std::mt19937 random(3);
    for (const auto& entry : fs::directory_iterator(kGoldenLogs)) {
      if (entry.path().extension() != ".log") continue;
      const std::string plain = testing::slurp(entry.path());
      // 16 KiB as containerd cuts, and 37 bytes so that every frame and message is cut in P
      // fragments, '\r' and "\r\n" at their ends among them.
      for (size_t max_line : {size_t{16384}, size_t{37}}) {
        testing::CriWriter writer(max_line);
        // The process writes in pieces of any size, as Python flushes.
        for (size_t at = 0; at < plain.size();) {
          const size_t n = std::min<size_t>(plain.size() - at, 1 + random() % 3000);
          writer.write(true, std::string_view(plain).substr(at, n));
          at += n;
        }
        writer.close();
        INFO(entry.path().filename().string() << " cut at " << max_line);
        CHECK(decode(writer.log(), random, 5000) == with_final_newline(plain));
      }
      ++checked;
    }
    CHECK(checked > 10);
  }

  TEST_CASE("a decoder restored at any line boundary of a checkpoint hands on the same content") {
    const std::string plain = testing::slurp(kGoldenLogs / "aitk_completed.log");
    testing::CriWriter writer(53);
    writer.write(true, plain);
    writer.close();
    const std::string& log = writer.log();
    std::mt19937 random(9);
    const std::string whole = decode(log, random, 4096);
    for (int round = 0; round < 200; ++round) {
      // Read up to a random point, checkpoint, and go on with a new decoder from the state.
      CriDecoder first;
      std::string out;
      const size_t stop = random() % log.size();
      first.feed(std::string_view(log).substr(0, stop), out);
      const uint64_t resume = first.raw_offset();
      REQUIRE(resume <= stop);
      REQUIRE((resume == 0 || log[resume - 1] == '\n'));
      CriDecoder second;
      REQUIRE(second.restore(first.state(), resume));
      second.feed(std::string_view(log).substr(resume), out);
      second.finish(out);
      INFO("checkpoint at raw byte " << resume);
      REQUIRE(out == whole);
    }
    CriDecoder broken;
    CHECK_FALSE(broken.restore("{\"stdout\": \"zz\"}", 10));
    CHECK_FALSE(broken.restore("not json", 10));
    CHECK(broken.raw_offset() == 10);
  }

  TEST_CASE("a tqdm bar on stderr with prints on stdout between its frames: the OOM whole") {
    const std::string oom =
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a "
        "total capacity of 23.55 GiB of which 812.00 MiB is free. Of the allocated memory 21.87 "
        "GiB is allocated by PyTorch, and 301.45 MiB is reserved by PyTorch but unallocated.\n";
    testing::CriWriter writer;
    writer.write(false, "Running 1 job\n# Running job: pod_lora\nLoading Flux model\n");
    for (int step = 1; step <= 1234; ++step) {
      writer.write(true, fmt::format("\rpod_lora:  {:2}%|#         | {}/3000 [{:02}:{:02}<12:00, "
                                     "1.40s/it, lr: 1.0e-04 loss: 4.123e-01]",
                                     step * 100 / 3000, step, step / 60 % 60, step % 60));
      if (step % 250 == 0) writer.write(false, fmt::format("Saving at step {}\n", step));
    }
    writer.write(true,
                 "\nTraceback (most recent call last):\n"
                 "  File \"/app/ai-toolkit/jobs/process/BaseSDTrainProcess.py\", line 2062, "
                 "in train\n    loss_dict = self.hook_train_loop(batch_list)\n" +
                     oom);
    writer.close();
    // The bar's frames went out in 16 KiB P lines, cut mid-frame, with stdout's F lines between.
    CHECK(writer.log().find(" stderr P ") != std::string::npos);

    std::mt19937 random(5);
    const parsers::LogAnalysis analysis = parsers::analyze_log(decode(writer.log(), random, 7000));
    REQUIRE(analysis.events.size() == 1);
    const parsers::OomEvent& event = analysis.events[0];
    CHECK(event.phase == parsers::Phase::kTrainStep);
    CHECK(event.step == 1234);
    CHECK(event.total_steps == 3000);
    CHECK(event.figures.tried_to_allocate_bytes == uint64_t{1610612736});
    CHECK(event.figures.reserved_unallocated_bytes.has_value());
    CHECK(analysis.job_name == "pod_lora");
  }

  TEST_CASE("garbage and a 2 MiB line without a newline are handed on, memory bounded") {
    CriDecoder decoder;
    std::string out;
    const std::string garbage(2 << 20, '\x07');
    decoder.feed(garbage, out);
    CHECK(out.size() >= (1u << 20));  // handed on as a cut line once past 1 MiB
    decoder.feed("\n2026-11-30T10:15:00.000000001Z stdout F ok\n", out);
    decoder.finish(out);
    CHECK(out.size() == garbage.size() + std::string("\n\nok\n").size());
    CHECK(out.substr(out.size() - 3) == "ok\n");
    CHECK(decoder.malformed_lines() == 2);
  }

  TEST_CASE("lines that are not CRI are handed on whole and counted") {
    CriDecoder decoder;
    std::string out;
    decoder.feed("2026-11-30T10:15:00.000000001Z stderr P Tried to \n", out);
    decoder.feed("Killed\n", out);  // written into the file by something else
    decoder.feed("2026-11-30T10:15:00.000000002Z stderr F allocate 2.00 GiB\n", out);
    decoder.finish(out);
    CHECK(out == "Killed\nTried to allocate 2.00 GiB\n");
    CHECK(decoder.malformed_lines() == 1);
  }
}
