// parsers/digit_shape.cc: which regexes may be looked up by shape, and a match's groups moved
// to another line of the same shape.
#include "parsers/digit_shape.h"

namespace oomtriage::parsers {

bool tests_digits_alike(std::string_view regex) {
  for (size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\') {
      if (i + 1 < regex.size() && regex[i + 1] >= '0' && regex[i + 1] <= '9') return false;
      ++i;  // the escaped character is not a digit: `\d`, `\.`, `\{`
      continue;
    }
    if (c == '{') {  // a count, "{9}" or "{0,6}": its digits are not characters to match
      size_t j = i + 1;
      while (j < regex.size() && ((regex[j] >= '0' && regex[j] <= '9') || regex[j] == ',')) ++j;
      if (j < regex.size() && regex[j] == '}' && j > i + 1) {
        i = j;
        continue;
      }
    }
    if (c >= '0' && c <= '9') return false;
  }
  return true;
}

RowMatch RowMatch::of(int row, std::string_view line, const std::vector<re2::StringPiece>& groups) {
  RowMatch match;
  match.row = row;
  match.groups.reserve(groups.size());
  for (const re2::StringPiece& group : groups) {
    if (group.data() == nullptr) {
      match.groups.emplace_back(-1, 0);
    } else {
      match.groups.emplace_back(static_cast<int32_t>(group.data() - line.data()),
                                static_cast<int32_t>(group.size()));
    }
  }
  return match;
}

std::vector<re2::StringPiece> RowMatch::groups_in(std::string_view line) const {
  std::vector<re2::StringPiece> out;
  out.reserve(groups.size());
  for (const auto& [begin, size] : groups) {
    out.emplace_back(begin < 0 ? nullptr : line.data() + begin, begin < 0 ? 0 : size);
  }
  return out;
}

}  // namespace oomtriage::parsers
