// parsers/family_names.h
//
// One name for each model family, whoever names it. The store keeps a job's family as
// parsers::to_string(ModelFamily) ("flux.1"); the memory model and `check` speak of its
// architecture rows (triage/architectures.cc: "flux1-dev", "flux1-schnell"); people type "flux",
// "FLUX.1-dev" or "Wan 2.2". Each row here is one family: its canonical id, the display name
// people read ("FLUX.1"), the id the store files its jobs under, the architecture rows that
// belong to it and the other names people use. Every filter (`jobs --family`, the web list)
// resolves the word it is given through it, and every output that names a family shows its
// display name beside its id (docs/design.md, "Names of families and trainers"). The
// architecture ids are plain strings here, so that parsers/ can file a job whose trainer names
// its architecture; tests/parsers/family_names_test.cc holds them to triage/architectures.cc's
// rows. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/job_config.h"

namespace oomtriage::parsers {

struct FamilyName {
  // The canonical id: for the families the store tells apart, the store's own
  // (parsers::to_string(ModelFamily)); for the others the memory model knows, a name of their
  // own ("hidream").
  std::string_view id;
  std::string_view display;  // what people read: "FLUX.1", "Wan 2.2"
  // What the store keeps for a job of this family: the id, or "other" for the families
  // ModelFamily does not tell apart (so a filter by one of them lists every "other" job).
  std::string_view stored;
  std::vector<std::string_view> architectures;  // its rows of triage/architectures.cc
  std::vector<std::string_view> aliases;        // more names people use, as they write them
};

// Every family: one row per ModelFamily value in the enum's order, then "unknown" (the
// store's family of a job whose config was never read), then the families of the architecture
// table the store files under "other".
const std::vector<FamilyName>& family_table();

// The row a word names: its id, its display name, one of its architecture ids or an alias, in any
// case and with any separators ("FLUX.1-dev", "flux_1", "Wan 2.2", "SDXL"); nullptr when none.
const FamilyName* find_family(std::string_view word);

// The family the store keeps for a job of this architecture id ("flux2-dev" -> kFlux2; kOther
// for the families the store does not tell apart); nullopt for an id no row lists.
std::optional<ModelFamily> family_of_architecture(std::string_view architecture);

// The row of a ModelFamily (every value has one).
const FamilyName& family_of(ModelFamily family);

// "FLUX.1" for any word find_family() knows; the word itself otherwise.
std::string family_display_name(std::string_view word);

// "FLUX.1 (flux.1)": the display name with the canonical id beside it, as `jobs`, `report`,
// `check` and the web pages show a family; the word itself when no row names it.
std::string family_label(std::string_view word);

// How `check` names the memory model's row: "FLUX.1 (flux.1), architecture flux1-dev" (the
// architecture left out where it is the id: "SDXL (sdxl)"); the id itself when no family has it
// (an LLM's, "unknown").
std::string architecture_label(std::string_view architecture);

// The words a "did you mean" offers for a family: every id, architecture id and alias.
std::vector<std::string> family_words();

}  // namespace oomtriage::parsers
