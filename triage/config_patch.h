// triage/config_patch.h
//
// Applies a fix's config changes to the job config's text, and shows them as a unified diff.
// YAML and TOML are edited as text (only the changed lines are touched, so comments, key order,
// quoting, block or flow style and formatting elsewhere stay as the user wrote them); JSON is
// re-emitted with its key order and indentation. Every patch is read back and must hold the new
// values. Pure: text in, text out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/result.h"
#include "triage/fix.h"

namespace oomtriage::triage {

// Each returns the patched text, or a kBadInput error saying which change cannot be made in
// place ("config.process[0].model: is a flow mapping, edit it by hand").
// Environment, command-line and operator changes are skipped.
Result<std::string> patch_yaml(std::string_view text, const std::vector<ConfigChange>& changes);
Result<std::string> patch_json(std::string_view text, const std::vector<ConfigChange>& changes);

// TOML (kohya's --config_file and --dataset_config, SimpleTuner's config.toml) is edited as text:
// only the value of the changed key, in its table, is replaced; a missing key is added at the
// end of its table. A `to` of null removes the key's line.
Result<std::string> patch_toml(std::string_view text, const std::vector<ConfigChange>& changes);

// Patches one file of `kind` with the changes meant for files, then reads the result back and
// checks that every change holds its new value at its path (an error otherwise).
Result<std::string> patch_file(parsers::TargetKind kind, std::string_view text,
                               const std::vector<ConfigChange>& changes);

// The value each change's key holds in `text` (null where it holds none, and for a change that
// is not a file's), read as patch_file() reads its result back. An error "SOURCE:LINE: reason"
// when the text does not parse (triage/heal_rebase.h: a config the user edited meanwhile).
Result<std::vector<nlohmann::json>> values_at(parsers::TargetKind kind, std::string_view text,
                                              const std::vector<ConfigChange>& changes,
                                              std::string_view source);

// The process config AI Toolkit prints (no "config.process[0]" around it) cannot be patched in
// place; callers patch a file instead.

// A unified diff (3 lines of context) from `before` to `after`, "" when they are equal.
std::string unified_diff(std::string_view before, std::string_view after,
                         std::string_view from_name, std::string_view to_name);

}  // namespace oomtriage::triage
