// triage/heal_rebase.cc: the run's config changes made again on a file the user edited.
#include "triage/heal_rebase.h"

#include "triage/config_patch.h"

namespace oomtriage::triage {

Result<Rebased> rebase_changes(parsers::TargetKind kind, std::string_view base,
                               std::string_view edited, const std::vector<AppliedChange>& changes,
                               std::string_view source) {
  std::vector<ConfigChange> plain;
  plain.reserve(changes.size());
  for (const AppliedChange& applied : changes) plain.push_back(applied.change);
  // The edited file first: when it does not parse, that is what the user needs to hear.
  auto now = values_at(kind, edited, plain, source);
  if (!now) return now.error();
  auto before = values_at(kind, base, plain, source);
  if (!before) return before.error();
  Rebased rebased;
  std::vector<ConfigChange> kept;
  for (size_t i = 0; i < changes.size(); ++i) {
    // Numbers compare by value (1 and 1.0 are one value), as the patch's read-back does.
    if ((*now)[i] == (*before)[i]) {
      rebased.applied.push_back(changes[i]);
      kept.push_back(plain[i]);
    } else {
      rebased.yielded.push_back(changes[i]);
    }
  }
  // A key changed twice (batch 4 -> 2, then 2 -> 1) is written once, with its last value: the
  // patch's read-back checks every change it is given.
  std::vector<ConfigChange> last;
  for (size_t i = 0; i < kept.size(); ++i) {
    bool later = false;
    for (size_t j = i + 1; j < kept.size() && !later; ++j) {
      later = kept[j].table == kept[i].table && kept[j].path == kept[i].path;
    }
    if (!later) last.push_back(kept[i]);
  }
  auto patched = patch_file(kind, edited, last);
  if (!patched) return patched.error();
  rebased.text = std::move(*patched);
  return rebased;
}

}  // namespace oomtriage::triage
