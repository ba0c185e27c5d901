// parsers/event_codec.h
//
// The stored incident record: an OomEvent as the JSON the store keeps in events.event_json, and
// back. `scan --json` and `report --json` print the same object (docs/design.md), so the encoder
// here is the one every writer uses and the decoder the one every reader uses, beside the type
// (as leveldb keeps EncodeTo and DecodeFrom together). Keys keep the contract's order; an absent
// figure is null, never 0.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

// A value or JSON null: how every codec writes a field that may be absent.
template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json encode_event(const OomEvent& event);
// encode_event() as the store holds it: one line, bytes that are not UTF-8 replaced.
std::string encode_event_text(const OomEvent& event);

// A stored event back as the typed value. Rows written before a field existed still read: an
// absent evidence, figure or revision is its default. An error (kBadInput, naming the field) for
// text that is not a JSON object, an unknown kind or phase, or a field of the wrong type.
Result<OomEvent> decode_event(std::string_view json);

// The kind and phase by the contract's names ("cuda", "train_step").
std::optional<OomKind> oom_kind_from_string(std::string_view name);
std::optional<Phase> phase_from_string(std::string_view name);

}  // namespace oomtriage::parsers
