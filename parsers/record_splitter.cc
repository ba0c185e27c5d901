// parsers/record_splitter.cc: the byte searches that touch every byte of a log: SSE2 everywhere
// on x86-64, AVX2 where the CPU has it (chosen once, at start-up).
#include "parsers/record_splitter.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace oomtriage::parsers {
namespace {

const char* find_record_end_portable(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i cr = _mm_set1_epi8('\r');
  const __m128i lf = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int mask =
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(block, cr), _mm_cmpeq_epi8(block, lf)));
    if (mask != 0) {
      return p + __builtin_ctz(static_cast<unsigned>(mask));
    }
    p += 16;
  }
#endif
  for (; p != end; ++p) {
    if (*p == '\n' || *p == '\r') {
      return p;
    }
  }
  return end;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) const char* find_record_end_avx2(const char* p, const char* end) {
  const __m256i cr = _mm256_set1_epi8('\r');
  const __m256i lf = _mm256_set1_epi8('\n');
  while (end - p >= 32) {
    const __m256i block = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const unsigned mask = static_cast<unsigned>(_mm256_movemask_epi8(
        _mm256_or_si256(_mm256_cmpeq_epi8(block, cr), _mm256_cmpeq_epi8(block, lf))));
    if (mask != 0) {
      return p + __builtin_ctz(mask);
    }
    p += 32;
  }
  return find_record_end_portable(p, end);
}

using FindRecordEnd = const char* (*)(const char*, const char*);
const FindRecordEnd kFindRecordEnd = [] {
  __builtin_cpu_init();  // this runs among the static constructors
  return __builtin_cpu_supports("avx2") ? find_record_end_avx2 : find_record_end_portable;
}();
#endif

}  // namespace

const char* find_record_end(const char* p, const char* end) {
#if defined(__x86_64__)
  return kFindRecordEnd(p, end);
#else
  return find_record_end_portable(p, end);
#endif
}

const char* find_last(const char* begin, const char* end, char c) {
#if defined(__SSE2__)
  const __m128i wanted = _mm_set1_epi8(c);
  while (end - begin >= 16) {
    const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16));
    const int mask = _mm_movemask_epi8(_mm_cmpeq_epi8(block, wanted));
    if (mask != 0) {
      return end - 16 + (31 - __builtin_clz(static_cast<unsigned>(mask)));
    }
    end -= 16;
  }
#endif
  while (end != begin) {
    --end;
    if (*end == c) return end;
  }
  return nullptr;
}

}  // namespace oomtriage::parsers
