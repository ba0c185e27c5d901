// parsers/record_splitter.cc: the end-of-record search, the one loop that touches every byte.
#include "parsers/record_splitter.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace oomtriage::parsers {

const char* find_record_end(const char* p, const char* end) {
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

}  // namespace oomtriage::parsers
