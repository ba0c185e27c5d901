// tests/parsers/frame_runs_test.cc
//
// The analyzer's fast path over runs of progress frames must change nothing but speed: every
// golden, trainer and real log (when ../shared is here), each also behind 6,000 frames of a bar
// so that the fast path is on when its own text comes, is analysed with the fast path off (whole)
// and on (fed in random chunks, several seeds), and the scan JSON must be identical, record
// count included. Hand-made lines check what the fast path must not swallow: a bar whose text
// changes mid-line, text between two '\r', "\r\n", padded frames, an OOM inside a frame run.
#include <doctest/doctest.h>

#include <random>

#include "daemon/render/json_output.h"
#include "parsers/log_analyzer.h"
#include "tests/support/files.h"
#include "tests/support/skip.h"

using namespace oomtriage;
namespace fs = std::filesystem;

namespace {

const fs::path kTestdata = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata";
const fs::path kRealLogs =
    fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "corpus" / "real-logs";

std::string frame(const std::string& desc, int n, int total) {
  return "\r" + desc + ": " + std::to_string(100 * n / total) + "%|##  | " + std::to_string(n) +
         "/" + std::to_string(total) + " [00:" + std::to_string(10 + n % 50) +
         "<12:00, 1.40s/it, loss: 0.41]";
}

// 6,000 frames of a training bar on lines of 250: the head of the log, after which the fast path
// may run.
std::string warm_up() {
  std::string text = "Running 1 job\n";
  for (int n = 1; n <= 6000; ++n) {
    text += frame("warmup_bar", n, 100000);
    if (n % 250 == 0) text += "\n";
  }
  return text + "\n";
}

struct Analysed {
  std::string json;
  uint64_t records = 0;
};

Analysed analyse(std::string_view log, bool fast, std::mt19937* chunking) {
  parsers::AnalyzerOptions options;
  options.skip_frame_runs = fast;
  parsers::LogAnalyzer analyzer(options);
  if (chunking == nullptr) {
    analyzer.feed(log);
  } else {
    std::uniform_int_distribution<size_t> size(1, 9000);
    for (size_t at = 0; at < log.size();) {
      const size_t n = std::min(log.size() - at, size(*chunking));
      // The caller's memory is gone after feed(): copy, as a reader reusing its buffer does.
      const std::string chunk(log.substr(at, n));
      analyzer.feed(chunk);
      at += n;
    }
  }
  Analysed out;
  out.records = analyzer.records();
  daemon::ScannedLog scanned;
  scanned.path = "log";
  scanned.analysis = analyzer.finish();
  out.json = daemon::scan_to_json({scanned}).dump(1);
  return out;
}

void check_same(const std::string& name, const std::string& log) {
  const Analysed slow = analyse(log, false, nullptr);
  for (unsigned seed : {1u, 2u, 3u}) {
    std::mt19937 chunking(seed);
    const Analysed fast = analyse(log, true, &chunking);
    INFO(name << " (seed " << seed << ")");
    CHECK(fast.records == slow.records);
    CHECK(fast.json == slow.json);
  }
  const Analysed whole = analyse(log, true, nullptr);
  INFO(name << " (whole)");
  CHECK(whole.json == slow.json);
}

std::vector<fs::path> logs_in(const fs::path& dir) {
  std::vector<fs::path> logs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".log") logs.push_back(entry.path());
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

const std::string kOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 812.00 MiB is free.";

}  // namespace

TEST_SUITE("parsers::frame runs") {
  TEST_CASE(
      "golden and trainer logs: the same JSON with the fast path, chunked at random, as without") {
    const std::string head = warm_up();
    size_t checked = 0;
    for (const fs::path& dir : {kTestdata / "logs", kTestdata / "trainer-logs"}) {
      for (const fs::path& path : logs_in(dir)) {
        const std::string log = testing::slurp(path);
        check_same(path.filename().string(), log);
        check_same(path.filename().string() + " behind a long bar", head + log);
        ++checked;
      }
    }
    CHECK(checked > 50);
  }

  TEST_CASE("real logs: the same JSON with the fast path as without") {
    const auto logs = logs_in(kRealLogs);
    if (logs.empty()) OOMTRIAGE_SKIP("../shared/corpus/real-logs is absent");
    const std::string head = warm_up();
    for (const fs::path& path : logs) {
      const std::string log = testing::slurp(path);
      check_same(path.filename().string(), log);
      check_same(path.filename().string() + " behind a long bar", head + log);
    }
  }

  TEST_CASE(
      "what a frame run must not swallow: a changed bar, text between two CRs, an OOM inside the "
      "run") {
    const std::string head = warm_up();
    std::string changed_bar = head;
    for (int n = 1; n <= 300; ++n) changed_bar += frame("my_lora", n, 3000);
    for (int n = 1; n <= 3; ++n) changed_bar += frame("Generating Samples", n, 4);
    for (int n = 301; n <= 400; ++n) changed_bar += frame("my_lora", n, 3000);
    changed_bar += "\n";
    check_same("bar changes mid-line", changed_bar);

    std::string between = head;
    for (int n = 1; n <= 300; ++n) between += frame("my_lora", n, 3000);
    between += "\r" + kOom;
    for (int n = 301; n <= 320; ++n) between += frame("my_lora", n, 3000);
    between += "\n";
    check_same("an OOM between two CRs", between);
    const Analysed found = analyse(between, true, nullptr);
    CHECK(found.json.find("\"kind\": \"cuda\"") != std::string::npos);

    std::string crlf_and_padding = head;
    for (int n = 1; n <= 500; ++n)
      crlf_and_padding += frame("my_lora", n, 3000) + (n % 7 ? "   " : "") + (n % 11 ? "" : "\r\n");
    crlf_and_padding += "\n" + kOom + "\n";
    check_same("CRLF and padded frames", crlf_and_padding);

    // A frame-shaped record with the bar's prefix but no time field is text, not a frame.
    std::string not_a_frame = head;
    for (int n = 1; n <= 50; ++n) not_a_frame += frame("my_lora", n, 3000);
    not_a_frame += "\rmy_lora: 50%|##  | Saving [checkpoint]";
    for (int n = 51; n <= 60; ++n) not_a_frame += frame("my_lora", n, 3000);
    not_a_frame += "\n";
    check_same("a bar-prefixed record without a time field", not_a_frame);
  }
}
