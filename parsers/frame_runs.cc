// parsers/frame_runs.cc: the search for runs of frames, one record at a time with the SIMD
// record-end search; the analyzer's frame test, shared with it.
#include "parsers/frame_runs.h"

#include <algorithm>
#include <cstring>

#include "parsers/record_splitter.h"

namespace oomtriage::parsers {

namespace {

// ends_like_frame() with the record's last '[' already known (null: none). Trailing spaces hold
// no '[', so it is the last one of the trimmed record too.
bool ends_like_frame(std::string_view record, const char* bracket) {
  while (!record.empty() && record.back() == ' ') record.remove_suffix(1);
  if (record.empty() || record.back() != ']' || record.size() > 1024) return false;
  return bracket != nullptr && bracket[1] >= '0' && bracket[1] <= '9';  // before the ']'
}

}  // namespace

bool ends_like_frame(std::string_view record) {
  return ends_like_frame(record, find_last(record.data(), record.data() + record.size(), '['));
}

void find_frame_runs(std::string_view part, uint64_t offset, int64_t min_records,
                     std::vector<FrameRun>& runs) {
  const char* const base = part.data();
  const char* const end = base + part.size();
  const auto offset_of = [&](const char* p) { return offset + static_cast<uint64_t>(p - base); };
  FrameRun run;
  bool open = false;
  char prefix[kBarPrefixBytes];
  const auto close = [&] {
    if (open && run.records >= std::max<int64_t>(min_records, 2)) runs.push_back(run);
    open = false;
  };
  for (const char* p = base; p != end;) {
    const char* bracket = nullptr;
    const char* eol = find_record_end(p, end, &bracket);
    if (end - eol < 2) break;  // the byte after a '\r' must be known
    const size_t size = static_cast<size_t>(eol - p);
    const char* next = eol + 1;
    int64_t newline = 0;
    if (*eol == '\n') {
      newline = 1;
    } else if (*next == '\n') {
      ++next;
      newline = 1;
    }
    const bool same_bar =
        open && size >= kBarPrefixBytes && std::memcmp(p, prefix, kBarPrefixBytes) == 0;
    if (same_bar && ends_like_frame(std::string_view(p, size), bracket)) {
      if (run.records == 1) run.second = offset_of(p);
      ++run.records;
      run.newlines_before_last = run.newlines;
      run.newlines += newline;
      run.last_offset = offset_of(p);
      run.last_size = static_cast<uint32_t>(size);
      run.end = offset_of(next);
    } else {
      close();
      if (size >= kBarPrefixBytes && ends_like_frame(std::string_view(p, size), bracket)) {
        open = true;
        std::memcpy(prefix, p, kBarPrefixBytes);
        run = FrameRun{};
        run.begin = run.last_offset = offset_of(p);
        run.records = 1;
        run.newlines = run.first_newlines = newline;
        run.last_size = static_cast<uint32_t>(size);
        run.end = offset_of(next);
      }
    }
    p = next;
  }
  close();
}

size_t record_boundary_after(std::string_view bytes, size_t at) {
  if (at >= bytes.size()) return bytes.size();
  const char* const end = bytes.data() + bytes.size();
  const char* eol = find_record_end(bytes.data() + at, end);
  if (eol == end) return bytes.size();
  if (*eol == '\r' && eol + 1 != end && eol[1] == '\n') ++eol;
  return static_cast<size_t>(eol + 1 - bytes.data());
}

}  // namespace oomtriage::parsers
