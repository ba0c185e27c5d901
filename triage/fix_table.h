// triage/fix_table.h
//
// The fix table: one row per stable fix id (docs/design.md#fix-ids): the id, how the planner
// proposes it, whether it keeps a checkpoint valid (`run --heal` and the UI healer apply only
// those), and what it does in one line. known_fix_ids() (triage/fix.h), resume_safe()
// (triage/heal_plan.h) and Planner::propose() (triage/planner.cc) all read it, so a new fix is
// a row here plus its plan_*() (ninja's tool table: a name, a function, a flag, a line of help).
#pragma once

#include <string_view>
#include <vector>

#include "triage/ranker.h"

namespace oomtriage::triage {

namespace detail {
class Planner;
}  // namespace detail

struct FixRow {
  std::string_view id;  // never renamed: reports, alerts and stored events carry it
  // Proposes the fix for one row of the ranking table that names it, with that row's priority
  // and situation: the fix's plan_*() in triage/planner_*.cc. Null: no ranking row proposes it.
  void (*plan)(detail::Planner& planner, int priority, Situation situation);
  // The fix keeps the checkpoint and the optimizer state valid, so the next attempt resumes
  // where the last save left it: it may be applied unattended.
  bool resume_safe;
  std::string_view doc;  // what it changes, in one line
  // The fix as people read it in lists, beside its id: "Turn preview sampling off". The ranked
  // fix's own title (triage/fix.h) says it for one crash ("Drop the 1024 px bucket").
  std::string_view name;
};

// Every fix, in the order docs/design.md lists them.
const std::vector<FixRow>& fix_table();

// The row of `id`; null when no fix has that id.
const FixRow* find_fix(std::string_view id);

}  // namespace oomtriage::triage
