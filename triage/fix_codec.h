// triage/fix_codec.h
//
// A ranked fix as the JSON the store keeps (events.fixes_json, applied_fixes.fix_json) and
// `scan --json`, `report --json` and `check --json` print (docs/design.md), and back: the one
// encoder and the one decoder, beside triage::Fix (as parsers/event_codec.h is beside OomEvent).
// A change names its own target only where it differs from the fix's (its first change's).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "parsers/result.h"
#include "triage/fix.h"

namespace oomtriage::triage {

nlohmann::ordered_json encode_fix(const Fix& fix);
// A list of fixes as the store holds it: one line, bytes that are not UTF-8 replaced.
std::string encode_fixes_text(const std::vector<Fix>& fixes);

// Stored fixes back as typed values. An error (kBadInput, naming the fix and field) for text that
// is not a JSON list of fixes, or a fix without its id. Fields a fix did not have when it was
// stored read as their defaults.
Result<std::vector<Fix>> decode_fixes(std::string_view json);
Result<Fix> decode_fix(std::string_view json);

// A change's value as people and the JSON contract write it: `true`, `"bf16"`, `[512, 768]`.
std::string value_text(const nlohmann::json& value);

}  // namespace oomtriage::triage
