// triage/heal_rebase.h
//
// `oomtriage run --heal` and a user who edits the job's config while the run goes on: the fixes
// the run applied so far are made again on the edited file, so that the next attempt runs the
// user's edit with the fixes on top. A key the user changed is the user's: a fix that changes the
// same key is left out of it (the user's value stays). Pure: text in, text out.
// docs/run-and-heal.md ("A config edited during the run") says the rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "parsers/result.h"
#include "triage/fix.h"

namespace oomtriage::triage {

// One change the run applied to a config, with the fix it came from.
struct AppliedChange {
  std::string fix_id;
  ConfigChange change;
};

struct Rebased {
  std::string text;                    // the edited file with the changes it still takes
  std::vector<AppliedChange> applied;  // those changes, in order
  std::vector<AppliedChange> yielded;  // the changes whose key the user edited: not applied
};

// `base`: the file's bytes the run applied `changes` to; `edited`: its bytes now; `source`: its
// name in errors. A key whose value in `edited` differs from its value in `base` was edited by
// the user. An error "SOURCE:LINE: reason" when `edited` does not parse, or a kBadInput error
// when a change cannot be made in it.
Result<Rebased> rebase_changes(parsers::TargetKind kind, std::string_view base,
                               std::string_view edited, const std::vector<AppliedChange>& changes,
                               std::string_view source);

}  // namespace oomtriage::triage
