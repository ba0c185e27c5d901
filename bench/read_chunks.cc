// bench/read_chunks.cc: how fast a log reaches the analyzer, by read chunk size and buffer
// alignment, so that scan's chunk is measured, not guessed. For each size: read(2) alone into a
// page-aligned buffer and into one 16 bytes past a page (std::vector's usual place), then read
// plus the analyzer (with and without the frame-run fast path). Best of three, warm page cache.
// Last, the scan JSON of the slow path (every frame looked at, one reader) is compared with that
// of scan's own reader (parts on both cores, runs of frames taken in one step); only that with
// --compare. And what the same bytes cost mapped instead (mmap(2), populated in 2 MiB windows,
// a byte read per page), against the copy: it depends on the page cache's folio sizes (see
// bench/scan_vs_rg.sh), so run it on a log as written and read back.
// Usage: read_chunks [--compare] LOG
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "daemon/cli/log_reader.h"
#include "daemon/render/json_output.h"
#include "parsers/log_analyzer.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class Body>
double best_seconds(Body&& body) {
  double best = 1e9;
  for (int run = 0; run < 3; ++run) {
    const auto start = Clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// Reads `path` through a buffer at `data` of `size` bytes, handing each chunk to `consume`.
template <class Consume>
void read_through(const char* path, char* data, size_t size, Consume&& consume) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) std::exit(2);
  for (ssize_t n; (n = ::read(fd, data, size)) > 0;)
    consume(std::string_view(data, static_cast<size_t>(n)));
  ::close(fd);
}

// Maps `path` and reads a byte of every page, populating 2 MiB at a time.
void map_through(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) std::exit(2);
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) std::exit(2);
  const char* bytes = static_cast<const char*>(map);
  constexpr size_t kWindow = 2 << 20;
  volatile char sink = 0;
  for (size_t at = 0; at < size; at += kWindow) {
    const size_t n = std::min(kWindow, size - at);
#ifdef MADV_POPULATE_READ
    ::madvise(const_cast<char*>(bytes) + at, n, MADV_POPULATE_READ);
#endif
    for (size_t page = 0; page < n; page += 4096) sink = sink + bytes[at + page];
  }
  ::munmap(map, size);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const bool compare_only = argc == 3 && std::string_view(argv[1]) == "--compare";
  if (argc != 2 && !compare_only) {
    fmt::print(stderr, "usage: read_chunks [--compare] LOG\n");
    return 1;
  }
  const char* path = argv[argc - 1];
  constexpr size_t kMax = 8 << 20;
  std::unique_ptr<char, decltype(&std::free)> memory(
      static_cast<char*>(std::aligned_alloc(4096, kMax + 4096)), &std::free);
  size_t bytes = 0;
  read_through(path, memory.get(), kMax, [&](std::string_view chunk) { bytes += chunk.size(); });
  const double gib = static_cast<double>(bytes) / (1 << 30);
  if (!compare_only)
    fmt::print("{:>9} {:>14} {:>14} {:>16} {:>16}\n", "chunk", "read aligned", "read +16",
               "analyzer (fast)", "analyzer (slow)");
  for (size_t size = 64 << 10; size <= kMax && !compare_only; size *= 2) {
    const auto rate = [&](double seconds) {
      return fmt::format("{:.2f} GB/s", gib * 1.073741824 / seconds);
    };
    const double aligned =
        best_seconds([&] { read_through(path, memory.get(), size, [](std::string_view) {}); });
    const double offset =
        best_seconds([&] { read_through(path, memory.get() + 16, size, [](std::string_view) {}); });
    const auto analyze = [&](bool fast) {
      return best_seconds([&] {
        oomtriage::parsers::AnalyzerOptions options;
        options.skip_frame_runs = fast;
        oomtriage::parsers::LogAnalyzer analyzer(options);
        read_through(path, memory.get(), size,
                     [&](std::string_view chunk) { analyzer.feed(chunk); });
        (void)analyzer.finish();
      });
    };
    fmt::print("{:>8}K {:>14} {:>14} {:>16} {:>16}\n", size >> 10, rate(aligned), rate(offset),
               rate(analyze(true)), rate(analyze(false)));
  }
  if (!compare_only) {
    const double copied =
        best_seconds([&] { read_through(path, memory.get(), 256 << 10, [](std::string_view) {}); });
    const double mapped = best_seconds([&] { map_through(path); });
    fmt::print("the whole log copied in 256K parts: {:.3f} s; mapped and populated: {:.3f} s\n",
               copied, mapped);
  }
  std::string json[2];
  uint64_t records[2] = {0, 0};
  for (int fast = 0; fast < 2; ++fast) {
    oomtriage::parsers::AnalyzerOptions options;
    options.skip_frame_runs = fast == 1;
    oomtriage::parsers::LogAnalyzer analyzer(options);
    if (fast == 1) {
      if (!oomtriage::daemon::read_log_into(path, analyzer)) return 2;
    } else {
      read_through(path, memory.get(), 256 << 10,
                   [&](std::string_view chunk) { analyzer.feed(chunk); });
    }
    records[fast] = analyzer.records();
    oomtriage::daemon::ScannedLog scanned;
    scanned.path = path;
    scanned.analysis = analyzer.finish();
    json[fast] = oomtriage::daemon::scan_to_json({scanned}).dump();
  }
  const bool same = json[0] == json[1] && records[0] == records[1];
  fmt::print("scan's reader and the slow path: {} ({} records)\n",
             same ? "identical JSON" : "DIFFERENT JSON", records[1]);
  return same ? 0 : 3;
}
