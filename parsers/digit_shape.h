// parsers/digit_shape.h
//
// Regex results looked up by a line's digit shape. A regex that tests digits only as a class
// (`\d`, `\w`, `.`, a bracket that holds all of 0-9 or none) answers the same for two lines that
// differ only in their digits, at the same offsets: "Saving at step 250" and "Saving at step 500"
// match the same rows with the same groups. Logs repeat such lines thousands of times, and an RE2
// match with captures costs microseconds, so the tables keep their matches by shape (each digit
// read as '0') and read the numbers from the line itself.
#pragma once

#include <re2/stringpiece.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace oomtriage::parsers {

// Whether `regex` tests digits only as a class: no digit in it outside a `{m,n}` count and no
// escape followed by a digit (a back-reference or an octal byte). Conservative: a pattern that
// fails this is simply never looked up by shape.
bool tests_digits_alike(std::string_view regex);

// One row's match: which row, and where each group matched (begin -1: the group did not take
// part; an empty group that matched keeps its place).
struct RowMatch {
  int row = 0;
  std::vector<std::pair<int32_t, int32_t>> groups;  // begin, size

  static RowMatch of(int row, std::string_view line, const std::vector<re2::StringPiece>& groups);
  // The groups as they fall in `line`, a line of the same shape as the one matched.
  std::vector<re2::StringPiece> groups_in(std::string_view line) const;
};

template <class Value>
class DigitShapeMemo {
 public:
  // The value for `line`'s shape, computed by `compute` the first time that shape is seen.
  template <class Compute>
  const Value& get(std::string_view line, Compute&& compute) {
    if (line.size() > kMaxLineBytes) {
      scratch_value_ = compute();
      return scratch_value_;
    }
    key_.assign(line.data(), line.size());
    for (char& c : key_) {
      if (c >= '0' && c <= '9') c = '0';
    }
    if (const auto it = values_.find(key_); it != values_.end()) return it->second;
    if (values_.size() >= kMaxShapes) values_.clear();  // a log of ever-new lines: start over
    return values_.emplace(key_, compute()).first->second;
  }

 private:
  static constexpr size_t kMaxLineBytes = 512;
  static constexpr size_t kMaxShapes = 1024;
  std::unordered_map<std::string, Value> values_;
  std::string key_;
  Value scratch_value_;
};

}  // namespace oomtriage::parsers
