// daemon/cli/filter_words.cc: a filter's family and trainer words resolved through the tables.
#include "daemon/cli/filter_words.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>

#include "daemon/common/did_you_mean.h"
#include "parsers/event.h"
#include "parsers/family_names.h"

namespace oomtriage::daemon {
namespace {

std::string lower(std::string_view word) {
  std::string out;
  for (const char c : word) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "; did you mean a, b?" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& names) {
  std::vector<std::string> candidates;
  for (const std::string& name : names) candidates.push_back(lower(name));
  const auto close = close_matches(lower(word), candidates);
  return close.empty() ? "" : fmt::format("; did you mean {}?", fmt::join(close, ", "));
}

std::string unknown_trainer(const std::string& word) {
  return "unknown trainer '" + word + "'" + did_you_mean(word, parsers::trainer_names());
}

}  // namespace

std::string known_family(const std::string& word) {
  if (parsers::find_family(word) != nullptr) return "";
  std::vector<std::string_view> ids;
  for (const parsers::FamilyName& row : parsers::family_table()) ids.push_back(row.id);
  return "unknown model family '" + word + "'" + did_you_mean(word, parsers::family_words()) +
         fmt::format(" ({})", fmt::join(ids, ", "));
}

FilterWords store_words(const std::string& trainer, const std::string& family) {
  FilterWords out;
  if (!trainer.empty()) {
    if (const auto known = parsers::trainer_from_string(trainer)) {
      out.trainer = std::string(parsers::to_string(*known));
    } else {
      out.notes.push_back(unknown_trainer(trainer));
      out.answerable = false;
    }
  }
  if (!family.empty()) {
    if (const parsers::FamilyName* row = parsers::find_family(family)) {
      out.family = std::string(row->stored);
      if (row->stored != row->id) {
        out.notes.push_back(
            fmt::format("the store files {} jobs under family '{}': every '{}' job is listed",
                        row->display, row->stored, row->stored));
      }
    } else {
      out.notes.push_back("unknown model family '" + family + "'" +
                          did_you_mean(family, parsers::family_words()));
      out.answerable = false;
    }
  }
  return out;
}

}  // namespace oomtriage::daemon
