// tests/parsers/frame_runs_test.cc
//
// The analyzer's fast path over runs of progress frames must change nothing but speed: every
// golden, trainer and real log (when ../shared is here), each also behind 6,000 frames of a bar
// so that the fast path is on when its own text comes, is analysed with the fast path off (whole)
// and on (fed in random chunks, several seeds), and the scan JSON must be identical, record
// count included. Hand-made lines check what the fast path must not swallow: a bar whose text
// changes mid-line, text between two '\r', "\r\n", padded frames, an OOM inside a frame run.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "daemon/render/json_output.h"
#include "parsers/frame_runs.h"
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

// As scan reads a large file: cut into parts at record boundaries, the runs of each part found
// apart from the analyzer, each part fed whole with its runs, or in smaller chunks with them.
Analysed analyse_with_runs(std::string_view log, std::mt19937& random) {
  parsers::LogAnalyzer analyzer;
  std::uniform_int_distribution<size_t> part_size(1, 40000);
  std::uniform_int_distribution<int64_t> min_records(1, 4);
  std::uniform_int_distribution<int> whole(0, 1);
  std::uniform_int_distribution<size_t> chunk_size(1, 9000);
  for (size_t at = 0; at < log.size();) {
    const size_t cut = parsers::record_boundary_after(log, at + part_size(random));
    const std::string part(log.substr(at, cut - at));
    std::vector<parsers::FrameRun> runs;
    parsers::find_frame_runs(part, at, min_records(random), runs);
    if (whole(random) != 0) {
      analyzer.feed(part, runs);
    } else {
      for (size_t in = 0; in < part.size();) {
        const std::string chunk(part.substr(in, chunk_size(random)));
        analyzer.feed(chunk, runs);
        in += chunk.size();
      }
    }
    at = cut;
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
  for (unsigned seed : {4u, 5u}) {
    std::mt19937 random(seed);
    const Analysed with_runs = analyse_with_runs(log, random);
    INFO(name << " (with runs found apart, seed " << seed << ")");
    CHECK(with_runs.records == slow.records);
    CHECK(with_runs.json == slow.json);
  }
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

// find_frame_runs() as the plain byte loop it must equal: each record found byte by byte, its
// last '[' by the analyzer's own ends_like_frame().
std::vector<parsers::FrameRun> runs_by_byte_loop(std::string_view part, uint64_t offset,
                                                 int64_t min_records) {
  std::vector<parsers::FrameRun> runs;
  parsers::FrameRun run;
  bool open = false;
  std::string_view prefix;
  const auto close = [&] {
    if (open && run.records >= std::max<int64_t>(min_records, 2)) runs.push_back(run);
    open = false;
  };
  for (size_t at = 0;;) {
    size_t eol = at;
    while (eol < part.size() && part[eol] != '\r' && part[eol] != '\n') ++eol;
    if (part.size() - eol < 2) break;
    const std::string_view record = part.substr(at, eol - at);
    size_t next = eol + 1;
    const int64_t newline = part[eol] == '\n' || part[next] == '\n' ? 1 : 0;
    if (part[eol] == '\r' && part[next] == '\n') ++next;
    const bool frame =
        record.size() >= parsers::kBarPrefixBytes && parsers::ends_like_frame(record);
    if (frame && open && record.substr(0, parsers::kBarPrefixBytes) == prefix) {
      if (run.records == 1) run.second = offset + at;
      ++run.records;
      run.newlines_before_last = run.newlines;
      run.newlines += newline;
      run.last_offset = offset + at;
      run.last_size = static_cast<uint32_t>(record.size());
      run.end = offset + next;
    } else {
      close();
      if (frame) {
        open = true;
        prefix = record.substr(0, parsers::kBarPrefixBytes);
        run = parsers::FrameRun{};
        run.begin = run.last_offset = offset + at;
        run.records = 1;
        run.newlines = run.first_newlines = newline;
        run.last_size = static_cast<uint32_t>(record.size());
        run.end = offset + next;
      }
    }
    at = next;
  }
  close();
  return runs;
}

bool same_runs(const std::vector<parsers::FrameRun>& a, const std::vector<parsers::FrameRun>& b) {
  const auto fields = [](const parsers::FrameRun& r) {
    return std::tuple(r.begin, r.second, r.end, r.records, r.newlines, r.first_newlines,
                      r.last_offset, r.last_size, r.newlines_before_last);
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const auto& x, const auto& y) { return fields(x) == fields(y); });
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

    // A bar logged one frame per line (tqdm's file= a log, or a logger): the run's newlines set
    // the line of the frame that becomes the OOM's step evidence.
    std::string one_per_line = head;
    for (int n = 1; n <= 400; ++n) one_per_line += frame("my_lora", n, 3000).substr(1) + "\n";
    one_per_line += kOom + "\n";
    check_same("one frame per line", one_per_line);
  }

  TEST_CASE("find_frame_runs: exactly the records the analyzer's loop takes, and where it stops") {
    const auto runs_of = [](const std::string& text, uint64_t offset = 0) {
      std::vector<parsers::FrameRun> runs;
      parsers::find_frame_runs(text, offset, 2, runs);
      return runs;
    };
    const std::string a1 = frame("my_lora", 1, 3000).substr(1);
    const std::string a2 = frame("my_lora", 2, 3000).substr(1);
    const std::string a3 = frame("my_lora", 3, 3000).substr(1);
    const std::string s1 = frame("Generating Samples", 1, 4).substr(1);

    auto runs = runs_of(a1 + "\r" + a2 + "\r\n" + a3 + "\rnext");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].begin == 0);
    CHECK(runs[0].second == a1.size() + 1);
    CHECK(runs[0].records == 3);
    CHECK(runs[0].newlines == 1);  // "\r\n" is one terminator
    CHECK(runs[0].first_newlines == 0);
    CHECK(runs[0].newlines_before_last == 1);
    CHECK(runs[0].last_offset == a1.size() + 1 + a2.size() + 2);
    CHECK(runs[0].last_size == a3.size());
    CHECK(runs[0].end == runs[0].last_offset + a3.size() + 1);

    // Text between two '\r' and another bar each end a run; offsets are the stream's.
    runs = runs_of(
        a1 + "\r" + a2 + "\rError running job\r" + a3 + "\r" + a1 + "\r" + s1 + "\r" + s1 + "\rx",
        1000);
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].begin == 1000);
    CHECK(runs[0].records == 2);
    CHECK(runs[1].records == 2);
    CHECK(runs[1].begin == 1000 + a1.size() + a2.size() + 20);
    CHECK(runs[2].records == 2);
    CHECK(runs[2].last_size == s1.size());

    // The last record of a part is left out when the part's last byte is its '\r' (it could be
    // half of "\r\n"), and a run of one is no run.
    CHECK(runs_of(a1 + "\r" + a2 + "\r").size() == 0);
    runs = runs_of(a1 + "\r" + a2 + "\r" + a3 + "\r");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].records == 2);

    // A part cut by record_boundary_after never splits a record or a "\r\n".
    const std::string text = a1 + "\r\n" + a2;
    CHECK(parsers::record_boundary_after(text, 0) == a1.size() + 2);
    CHECK(parsers::record_boundary_after(text, a1.size()) == a1.size() + 2);
    CHECK(parsers::record_boundary_after(text, a1.size() + 1) == a1.size() + 2);
    CHECK(parsers::record_boundary_after(text, a1.size() + 2) == text.size());
  }

  TEST_CASE("find_frame_runs: the same runs as a byte-by-byte loop on random mixes") {
    // Frames of two bars (short, and longer than a 64-byte block), padded, "\r\n", one per
    // line, text between two '\r', bar-prefixed records without a time field, '[' in the text,
    // records over 1024 bytes, parts ending anywhere, at any offset.
    std::mt19937 random(11);
    const auto piece = [](std::mt19937& random) -> std::string {
      const std::string long_desc = "a bar with a description longer than a 64-byte block of text";
      switch (random() % 11) {
        case 0: return "Error running job [CUDA] out of memory";
        case 1: return "";
        case 2: return "my_lora: 50%|##  | Saving [checkpoint]";
        case 3: return "my_lora: 50%|##  | no time field, 1.0s/it]";
        case 4: return frame(long_desc, static_cast<int>(random() % 100), 100).substr(1);
        case 5: return std::string(1030, 'x') + " [00:01<00:02, 1.0it/s]";
        case 6: return frame("Generating Samples", static_cast<int>(random() % 4), 4).substr(1);
        default: return frame("my_lora", static_cast<int>(random() % 3000), 3000).substr(1);
      }
    };
    for (int round = 0; round < 3000; ++round) {
      // Records, each with its terminator: mostly '\r', sometimes '\n' or "\r\n".
      std::string part;
      const int pieces = static_cast<int>(random() % 60);
      for (int i = 0; i < pieces; ++i) {
        part += piece(random);
        if (random() % 5 == 0) part += std::string(random() % 4, ' ');
        const unsigned terminator = random() % 8;
        part += terminator == 0 ? "\n" : terminator == 1 ? "\r\n" : "\r";
      }
      if (!part.empty() && random() % 2 == 0) part.resize(random() % part.size());
      const uint64_t offset = random() % 100000;
      const int64_t min_records = 1 + static_cast<int64_t>(random() % 4);
      std::vector<parsers::FrameRun> found;
      parsers::find_frame_runs(part, offset, min_records, found);
      INFO(round << ": " << part);
      const auto expected = runs_by_byte_loop(part, offset, min_records);
      REQUIRE(same_runs(found, expected));
      // The search a CPU without AVX2 runs, which this machine's would not otherwise reach.
      found.clear();
      parsers::find_frame_runs_portable(part, offset, min_records, found);
      REQUIRE(same_runs(found, expected));
    }
  }
}
