// daemon/common/did_you_mean.h: the names a mistyped word was probably meant to be, closest
// first, for the "did you mean" of commands, trainers and job names.
#pragma once

#include <string>
#include <vector>

namespace oomtriage::daemon {

// Levenshtein distance over bytes.
size_t edit_distance(const std::string& a, const std::string& b);

// Up to `limit` of `candidates` within a third of `word`'s length (at least `min_edits` edits)
// or holding it, closest first.
std::vector<std::string> close_matches(const std::string& word, std::vector<std::string> candidates,
                                       size_t limit = 3, size_t min_edits = 2);

}  // namespace oomtriage::daemon
