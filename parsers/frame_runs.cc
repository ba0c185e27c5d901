// parsers/frame_runs.cc: the search for runs of frames, over bit masks of 64-byte blocks; the
// analyzer's frame test, shared with it.
#include "parsers/frame_runs.h"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "parsers/record_splitter.h"

namespace oomtriage::parsers {

namespace {

// The search is one loop: its helpers must be inlined into each instruction set's copy of it.
#define OOMTRIAGE_ALWAYS_INLINE inline __attribute__((always_inline))

// ends_like_frame() with the record's last '[' already known (null: none). Trailing spaces hold
// no '[', so it is the last one of the trimmed record too.
OOMTRIAGE_ALWAYS_INLINE bool ends_like_frame(std::string_view record, const char* bracket) {
  while (!record.empty() && record.back() == ' ') record.remove_suffix(1);
  if (record.empty() || record.back() != ']' || record.size() > 1024) return false;
  return bracket != nullptr && bracket[1] >= '0' && bracket[1] <= '9';  // before the ']'
}

// Bit i: byte i of a 64-byte block is '\r' or '\n' (`ends`), '[' (`opens`).
struct BlockMasks {
  uint64_t ends = 0;
  uint64_t opens = 0;
};

OOMTRIAGE_ALWAYS_INLINE BlockMasks masks_portable(const char* block) {
  BlockMasks masks;
#if defined(__SSE2__)
  const __m128i cr = _mm_set1_epi8('\r');
  const __m128i lf = _mm_set1_epi8('\n');
  const __m128i open = _mm_set1_epi8('[');
  for (int i = 0; i < 4; ++i) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i));
    const auto ends = static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(bytes, cr), _mm_cmpeq_epi8(bytes, lf))));
    const auto opens = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, open)));
    masks.ends |= uint64_t{ends} << (16 * i);
    masks.opens |= uint64_t{opens} << (16 * i);
  }
#else
  for (int i = 0; i < 64; ++i) {
    masks.ends |= uint64_t{block[i] == '\r' || block[i] == '\n'} << i;
    masks.opens |= uint64_t{block[i] == '['} << i;
  }
#endif
  return masks;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) OOMTRIAGE_ALWAYS_INLINE BlockMasks masks_avx2(const char* block) {
  const __m256i cr = _mm256_set1_epi8('\r');
  const __m256i lf = _mm256_set1_epi8('\n');
  const __m256i open = _mm256_set1_epi8('[');
  const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block));
  const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32));
  const auto low_ends = static_cast<uint32_t>(_mm256_movemask_epi8(
      _mm256_or_si256(_mm256_cmpeq_epi8(low, cr), _mm256_cmpeq_epi8(low, lf))));
  const auto high_ends = static_cast<uint32_t>(_mm256_movemask_epi8(
      _mm256_or_si256(_mm256_cmpeq_epi8(high, cr), _mm256_cmpeq_epi8(high, lf))));
  const auto low_opens = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(low, open)));
  const auto high_opens =
      static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(high, open)));
  return {low_ends | uint64_t{high_ends} << 32, low_opens | uint64_t{high_opens} << 32};
}
#endif

// find_frame_runs() with `masks` making the bit masks of a whole block.
template <class Masks>
OOMTRIAGE_ALWAYS_INLINE void find_runs_with(Masks masks_of, std::string_view part, uint64_t offset,
                                            int64_t min_records, std::vector<FrameRun>& runs) {
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
  // One record: [p, eol), its last '[' at `bracket` (null: none).
  const auto take = [&](const char* p, const char* eol, const char* next, int64_t newline,
                        const char* bracket) __attribute__((always_inline)) {
    const size_t size = static_cast<size_t>(eol - p);
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
  };
  // The part in blocks of 64 bytes, each turned into bit masks of its record ends and its '[':
  // every record is then visited by its end's bit, with no search that stops at each record.
  const char* record = base;        // the next record's first byte
  const char* last_open = nullptr;  // the last '[' of the blocks before this one
  for (const char* block = base; block < end; block += 64) {
    BlockMasks masks;
    if (end - block >= 64) {
      masks = masks_of(block);
    } else {
      char tail[64] = {};  // zero bytes are neither
      std::memcpy(tail, block, static_cast<size_t>(end - block));
      masks = masks_of(tail);
    }
    while (masks.ends != 0) {
      const char* const eol = block + std::countr_zero(masks.ends);
      masks.ends &= masks.ends - 1;
      if (eol < record) continue;         // the '\n' of a "\r\n" already taken
      if (end - eol < 2) return close();  // the byte after a '\r' must be known
      const uint64_t opens_before = masks.opens & ((uint64_t{1} << (eol - block)) - 1);
      const char* bracket =
          opens_before != 0 ? block + (63 - std::countl_zero(opens_before)) : last_open;
      if (bracket != nullptr && bracket < record) bracket = nullptr;
      const char* next = eol + 1;
      int64_t newline = 1;
      if (*eol == '\r') {
        if (*next == '\n') {
          ++next;
        } else {
          newline = 0;
        }
      }
      take(record, eol, next, newline, bracket);
      record = next;
    }
    if (masks.opens != 0) last_open = block + (63 - std::countl_zero(masks.opens));
  }
  close();
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void find_runs_avx2(std::string_view part, uint64_t offset,
                                                    int64_t min_records,
                                                    std::vector<FrameRun>& runs) {
  find_runs_with(masks_avx2, part, offset, min_records, runs);
}

using FindRuns = void (*)(std::string_view, uint64_t, int64_t, std::vector<FrameRun>&);
const FindRuns kFindRuns = [] {
  __builtin_cpu_init();  // this runs among the static constructors
  return __builtin_cpu_supports("avx2") ? find_runs_avx2 : find_frame_runs_portable;
}();
#endif

}  // namespace

bool ends_like_frame(std::string_view record) {
  return ends_like_frame(record, find_last(record.data(), record.data() + record.size(), '['));
}

void find_frame_runs(std::string_view part, uint64_t offset, int64_t min_records,
                     std::vector<FrameRun>& runs) {
#if defined(__x86_64__)
  kFindRuns(part, offset, min_records, runs);
#else
  find_frame_runs_portable(part, offset, min_records, runs);
#endif
}

void find_frame_runs_portable(std::string_view part, uint64_t offset, int64_t min_records,
                              std::vector<FrameRun>& runs) {
  find_runs_with(masks_portable, part, offset, min_records, runs);
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
