// tests/fuzz/bounded_document_fuzz.cc: the limits on documents a user controls
// (parsers/bounded_document.h) on arbitrary bytes: the three nesting pre-scans, JSON, TOML and
// YAML read within the limits (YAML with the line of every path, its aliases on a node budget).
// Each must return a value or a one-line error, never crash, overflow the stack or hang; and
// what a pre-scan passes, the parsers and walkers after it must survive.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "parsers/bounded_document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace oomtriage::parsers;
  (void)json_nesting_ok(text);
  (void)toml_nesting_ok(text);
  (void)yaml_nesting_ok(text, 8);
  if (auto doc = parse_json(text, "fuzz.json")) {
    // What the readers do with a document: copy, compare and print it (all recursive).
    const nlohmann::json copy = *doc;
    (void)(copy == *doc);
    (void)doc->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  (void)parse_ordered_json(text, "fuzz.json");
  if (auto table = parse_toml(text, "fuzz.toml")) {
    const toml::table copy = *table;
    (void)(copy == *table);
  }
  std::map<std::string, int> lines;
  if (auto doc = yaml_to_json(text, "fuzz.yaml", &lines)) {
    (void)doc->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
