// parsers/ascii.h
//
// Case-insensitive ASCII search for the cheap gates in front of regexes: a line that lacks a
// pattern's literal skips the regex call, which costs a few hundred nanoseconds even when it fails.
#pragma once

#include <cstddef>
#include <string_view>

namespace oomtriage::parsers {

constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Whether `haystack` holds `needle` in any case. `needle` is lower-case and starts with a letter.
inline bool contains_ascii_nocase(std::string_view haystack, std::string_view needle) {
  if (needle.empty()) return true;
  if (haystack.size() < needle.size()) return false;
  const char first = needle[0];  // a letter: `| 0x20` lowers exactly its two cases
  const size_t last = haystack.size() - needle.size();
  for (size_t i = 0; i <= last; ++i) {
    if ((haystack[i] | 0x20) != first) continue;
    size_t j = 1;
    while (j < needle.size() && ascii_lower(haystack[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

}  // namespace oomtriage::parsers
