// parsers/bounded_document.h
//
// The one way a document a user controls (a job config of any trainer, a dataset TOML, a
// `check --spec` file, the daemon config, AI Toolkit UI's stored job config) is parsed: with a
// size limit, a nesting limit checked by an iterative pre-scan before any recursive parser or
// walker sees the text, and for YAML a budget on the nodes that anchors and aliases expand to.
// Real configs are a few KiB and a dozen levels deep; the limits are far above that and far below
// what exhausts the stack or the memory (docs/reliability.md, "Files a user controls").
// Every error is one line naming the source: "job.yaml: refused: larger than 4 MiB",
// "job.json:1: nested deeper than 64 levels", "job.yaml: refused: YAML aliases expand past
// 100000 nodes". Pure: text in, value or error out; nothing throws.
#pragma once

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "parsers/result.h"

namespace oomtriage::parsers {

// The largest document read (a real config is a few KiB; AI Toolkit's largest example ~10 KiB).
inline constexpr size_t kMaxDocumentBytes = 4u << 20;
// The deepest nesting of arrays, objects, tables and dotted keys (real configs: under 10).
inline constexpr int kMaxNesting = 64;
// The most YAML nodes one document may become, every alias counted again where it is used.
inline constexpr size_t kMaxYamlNodes = 100000;
// The most bytes of keys, scalars and paths one YAML document may become, aliases counted again.
inline constexpr size_t kMaxYamlBytes = 32u << 20;

// "4 MiB", "64 KiB", "100 bytes": how a limit is written in a message.
std::string byte_size_text(size_t bytes);

// "SOURCE: refused: larger than 4 MiB" when `text` is longer than `max_bytes`.
Result<Ok> size_ok(std::string_view text, std::string_view source,
                   size_t max_bytes = kMaxDocumentBytes);

// The nesting pre-scans: iterative, linear, no allocation proportional to the input. Each
// returns a kBadInput error "LINE: nested deeper than 64 levels" (the caller adds the source).
// JSON: [ and { outside strings. TOML: [ and { outside strings and comments, plus the segments of
// a dotted key or table header. YAML: a rough depth from indentation (two spaces a level),
// "- " items opened on one line and open flow brackets.
Result<Ok> json_nesting_ok(std::string_view text, int max_depth = kMaxNesting);
Result<Ok> toml_nesting_ok(std::string_view text, int max_depth = kMaxNesting);
Result<Ok> yaml_nesting_ok(std::string_view text, int max_depth = kMaxNesting);

// JSON within the limits: "SOURCE: refused: larger than ...", "SOURCE:LINE: nested deeper than
// ...", or "SOURCE: not valid JSON".
Result<nlohmann::json> parse_json(std::string_view text, std::string_view source,
                                  size_t max_bytes = kMaxDocumentBytes);
Result<nlohmann::ordered_json> parse_ordered_json(std::string_view text, std::string_view source,
                                                  size_t max_bytes = kMaxDocumentBytes);

// TOML within the limits (toml++ also stops nested arrays and inline tables at 256 levels; the
// pre-scan bounds dotted keys and table headers, which it does not): "SOURCE:LINE: reason".
Result<toml::table> parse_toml(std::string_view text, std::string_view source,
                               size_t max_bytes = kMaxDocumentBytes);

// A YAML document converted to JSON within the limits, remembering the line of every path
// ("config.process[0]...") in `lines` when given. Every node visited is counted, aliases each
// time they are used, so anchors that expand exponentially stop at kMaxYamlNodes:
// "SOURCE: refused: YAML aliases expand past 100000 nodes"; "SOURCE:LINE: reason" when it does
// not parse or nests too deep (aliases count their depth where they are used).
Result<nlohmann::ordered_json> yaml_to_json(std::string_view text, std::string_view source,
                                            std::map<std::string, int>* lines = nullptr);

}  // namespace oomtriage::parsers
