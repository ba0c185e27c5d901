// parsers/frame_runs.h
//
// Runs of progress frames found ahead of the analyzer. Most of a training log is one bar redrawn
// with '\r' millions of times; the analyzer only needs the last frame of each run (see
// LogAnalyzer::skip_frame_run). find_frame_runs() is pure and needs no analyzer state, so `scan`
// runs it on both cores over parts of a file while the analyzer, handed the runs, jumps over each
// in one step instead of looking at every frame. A run lists exactly the records the analyzer's
// own frame-by-frame loop would take, so the results are the same with or without it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace oomtriage::parsers {

// Frames of one bar share their first bytes (its description); another prefix is another bar.
inline constexpr size_t kBarPrefixBytes = 16;

// Whether a record reads as a tqdm frame: it ends in "[elapsed<remaining, rate...]", perhaps
// padded with spaces, the last '[' opening the time field with a digit after it. Longer records
// are text, not frames.
bool ends_like_frame(std::string_view record);

// Consecutive records, each a frame (ends_like_frame) at least kBarPrefixBytes long, all with the
// first record's kBarPrefixBytes bytes, each followed by at least one more byte of the part they
// were found in (so that a "\r" at its end is known not to be half of "\r\n").
struct FrameRun {
  uint64_t begin = 0;   // stream offset of the first record
  uint64_t second = 0;  // of the second record
  uint64_t end = 0;     // just past the last record's terminator
  int64_t records = 0;
  int64_t newlines = 0;        // '\n' terminators in the run ("\r\n" is one)
  int64_t first_newlines = 0;  // of them, the first record's (0 or 1)
  uint64_t last_offset = 0;    // the last record, without its terminator
  uint32_t last_size = 0;
  int64_t newlines_before_last = 0;
};

// Runs of at least `min_records` records in `part`, which starts at a record's start at stream
// offset `offset`. Appends them to `runs` in order.
void find_frame_runs(std::string_view part, uint64_t offset, int64_t min_records,
                     std::vector<FrameRun>& runs);

// find_frame_runs() as a CPU without AVX2 runs it (tests: both must find the same runs).
void find_frame_runs_portable(std::string_view part, uint64_t offset, int64_t min_records,
                              std::vector<FrameRun>& runs);

// Where to cut `bytes` near `at` so that no record and no "\r\n" straddles the cut: just past the
// first terminator at or after `at` that is not a '\r' followed by '\n'. bytes.size() if none.
size_t record_boundary_after(std::string_view bytes, size_t at);

}  // namespace oomtriage::parsers
