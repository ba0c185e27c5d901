// daemon/common/did_you_mean.cc
#include "daemon/common/did_you_mean.h"

#include <algorithm>

namespace oomtriage::daemon {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> close_matches(const std::string& word, std::vector<std::string> candidates,
                                       size_t limit, size_t min_edits) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const std::string& a, const std::string& b) {
                     return edit_distance(a, word) < edit_distance(b, word);
                   });
  std::vector<std::string> close;
  const size_t allowed = std::max(min_edits, word.size() / 3);
  for (const auto& candidate : candidates) {
    if (close.size() >= limit) break;
    if (std::find(close.begin(), close.end(), candidate) != close.end()) continue;
    if (edit_distance(candidate, word) <= allowed ||
        (!word.empty() && candidate.find(word) != std::string::npos)) {
      close.push_back(candidate);
    }
  }
  return close;
}

}  // namespace oomtriage::daemon
