// tests/parsers/record_splitter_test.cc: records, lines and offsets across any chunking.
#include "parsers/record_splitter.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace oomtriage::parsers;

namespace {

struct Seen {
  std::string text;
  uint64_t offset;
  int64_t line;
  bool truncated;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> split(std::string_view input, size_t chunk, size_t limit = kMaxRecordBytes) {
  RecordSplitter splitter(limit);
  std::vector<Seen> seen;
  auto collect = [&](const Record& r) {
    seen.push_back({std::string(r.text), r.offset, r.line, r.truncated});
  };
  for (size_t i = 0; i < input.size(); i += chunk) {
    splitter.feed(input.substr(i, chunk), collect);
  }
  splitter.finish(collect);
  return seen;
}

}  // namespace

TEST_SUITE("parsers::record_splitter") {
  TEST_CASE("\\r frames, \\n lines and \\r\\n are records with the right line numbers") {
    const std::string input = "a\rbb\rccc\nline2\r\nline3\nend";
    const std::vector<Seen> expected = {{"a", 0, 1, false},      {"bb", 2, 1, false},
                                        {"ccc", 5, 1, false},    {"line2", 9, 2, false},
                                        {"line3", 16, 3, false}, {"end", 22, 4, false}};
    for (size_t chunk : {1u, 2u, 3u, 5u, 7u, 64u}) {
      CAPTURE(chunk);
      CHECK(split(input, chunk) == expected);
    }
  }
  TEST_CASE("a record longer than the limit is cut, counted, and the next one is intact") {
    const std::string input = std::string(100, 'x') + "\nok\n";
    for (size_t chunk : {1u, 7u, 1000u}) {
      const auto seen = split(input, chunk, 10);
      REQUIRE(seen.size() == 2);
      CHECK(seen[0].text == std::string(10, 'x'));
      CHECK(seen[0].truncated);
      CHECK(seen[1] == Seen{"ok", 101, 2, false});
    }
  }
  TEST_CASE("the end-of-record search finds every terminator") {
    std::string block(100, 'a');
    for (size_t i = 0; i < block.size(); ++i) {
      std::string s = block;
      s[i] = (i % 2) ? '\r' : '\n';
      CHECK(find_record_end(s.data(), s.data() + s.size()) == s.data() + i);
    }
    CHECK(find_record_end(block.data(), block.data() + block.size()) == block.data() + 100);
  }
}
