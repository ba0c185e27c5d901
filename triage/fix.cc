// triage/fix.cc: the stable fix ids, as the fix table (triage/fix_table.h) lists them.
#include "triage/fix.h"

#include <algorithm>

#include "triage/fix_table.h"

namespace oomtriage::triage {

const std::vector<std::string_view>& known_fix_ids() {
  static const std::vector<std::string_view> kIds = [] {
    std::vector<std::string_view> ids;
    for (const FixRow& row : fix_table()) ids.push_back(row.id);
    return ids;
  }();
  return kIds;
}

bool Fix::changes_config() const {
  using parsers::TargetKind;
  return std::any_of(changes.begin(), changes.end(), [](const ConfigChange& c) {
    return c.kind == TargetKind::kYaml || c.kind == TargetKind::kJson ||
           c.kind == TargetKind::kToml;
  });
}

parsers::ConfigTarget Fix::target() const {
  if (changes.empty()) return {parsers::TargetKind::kOps, "", ""};
  return {changes.front().kind, changes.front().file, ""};
}

bool is_known_fix_id(std::string_view id) {
  const auto& ids = known_fix_ids();
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace oomtriage::triage
