// parsers/event_codec.cc: an OomEvent to its stored JSON and back.
#include "parsers/event_codec.h"

#include <optional>
#include <type_traits>
#include <utility>

namespace oomtriage::parsers {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json evidence_json(const std::optional<Evidence>& evidence) {
  if (!evidence) return nullptr;
  return {
      {"line", evidence->line}, {"source", to_string(evidence->source)}, {"text", evidence->text}};
}

// Reads the fields of one object; the first field that does not read is the error, and every
// later read is skipped.
class FieldReader {
 public:
  FieldReader(const json& object, std::string what) : object_(object), what_(std::move(what)) {}

  const json* find(const char* key) const {
    if (error_) return nullptr;
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  void wrong(const char* key, const char* want) {
    if (!error_)
      error_ = make_error(ErrorCode::kBadInput, what_ + ": \"" + key + "\" is not " + want);
  }

  template <class Int>
  std::optional<Int> integer(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    const bool fits = std::is_unsigned_v<Int> ? v->is_number_unsigned() : v->is_number_integer();
    if (!fits) {
      wrong(key, std::is_unsigned_v<Int> ? "a whole number of 0 or more" : "a whole number");
      return std::nullopt;
    }
    return v->get<Int>();
  }
  std::optional<std::string> text(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      wrong(key, "text");
      return std::nullopt;
    }
    return v->get<std::string>();
  }
  std::optional<bool> flag(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      wrong(key, "true or false");
      return std::nullopt;
    }
    return v->get<bool>();
  }
  // A name the contract spells (`from_string` maps it); required when `required`.
  template <class Enum, class FromString>
  std::optional<Enum> name(const char* key, FromString from_string, bool required) {
    const json* v = find(key);
    if (v == nullptr) {
      if (required) wrong(key, "there");
      return std::nullopt;
    }
    const auto value = v->is_string() ? from_string(v->get<std::string>()) : std::nullopt;
    if (!value) wrong(key, "a known name");
    return value;
  }
  std::optional<Evidence> evidence(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_object()) {
      wrong(key, "an object");
      return std::nullopt;
    }
    FieldReader inner(*v, what_ + " " + key);
    Evidence out;
    out.line = inner.integer<int64_t>("line").value_or(0);
    out.source = inner.name<EvidenceSource>("source", evidence_source_from_string, false)
                     .value_or(EvidenceSource::kMarker);
    out.text = inner.text("text").value_or("");
    if (inner.error_ && !error_) error_ = inner.error_;
    return out;
  }

  const std::optional<Error>& error() const { return error_; }

 private:
  const json& object_;
  std::string what_;
  std::optional<Error> error_;
};

Result<OomEvent> decode_object(const json& object) {
  if (!object.is_object()) return make_error(ErrorCode::kBadInput, "stored event: not an object");
  FieldReader r(object, "stored event");
  OomEvent e;
  e.kind = r.name<OomKind>("kind", oom_kind_from_string, true).value_or(OomKind::kCuda);
  e.recovered = r.flag("recovered").value_or(false);
  e.phase = r.name<Phase>("phase", phase_from_string, true).value_or(Phase::kUnknown);
  e.step = r.integer<int64_t>("step");
  e.total_steps = r.integer<int64_t>("total_steps");
  MemoryFigures& f = e.figures;
  f.gpu_index = r.integer<int>("gpu_index");
  f.tried_to_allocate_bytes = r.integer<uint64_t>("tried_to_allocate_bytes");
  f.total_capacity_bytes = r.integer<uint64_t>("total_capacity_bytes");
  f.free_bytes = r.integer<uint64_t>("free_bytes");
  f.allocated_by_pytorch_bytes = r.integer<uint64_t>("allocated_by_pytorch_bytes");
  f.reserved_unallocated_bytes = r.integer<uint64_t>("reserved_unallocated_bytes");
  f.reserved_total_bytes = r.integer<uint64_t>("reserved_total_bytes");
  f.this_process_in_use_bytes = r.integer<uint64_t>("this_process_in_use_bytes");
  if (const json* others = r.find("other_processes")) {
    if (!others->is_array()) r.wrong("other_processes", "a list");
    for (const json& item : others->is_array() ? *others : json::array()) {
      if (!item.is_object()) {
        r.wrong("other_processes", "a list of objects");
        break;
      }
      FieldReader p(item, "stored event other_processes");
      OtherProcess process{p.integer<int64_t>("pid").value_or(0),
                           p.integer<uint64_t>("bytes").value_or(0)};
      if (p.error()) return *p.error();
      f.other_processes.push_back(process);
    }
  }
  e.line = r.integer<int64_t>("line").value_or(0);
  e.offset = r.integer<uint64_t>("offset").value_or(0);
  e.exception = r.text("exception");
  e.message = r.text("message").value_or("");
  e.phase_evidence = r.evidence("phase_evidence");
  e.step_evidence = r.evidence("step_evidence");
  e.revision = r.integer<int>("revision").value_or(0);
  if (r.error()) return *r.error();
  return e;
}

}  // namespace

std::optional<OomKind> oom_kind_from_string(std::string_view name) {
  for (OomKind kind : {OomKind::kCuda, OomKind::kHip, OomKind::kMps, OomKind::kXpu,
                       OomKind::kCublas, OomKind::kCudnn, OomKind::kNccl, OomKind::kHostKilled,
                       OomKind::kHostMemoryError, OomKind::kShm}) {
    if (to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

std::optional<Phase> phase_from_string(std::string_view name) {
  for (Phase phase :
       {Phase::kUnknown, Phase::kModelLoad, Phase::kQuantize, Phase::kCacheLatents,
        Phase::kCacheTextEmbeddings, Phase::kTrainStep, Phase::kSampling, Phase::kSaving}) {
    if (to_string(phase) == name) return phase;
  }
  return std::nullopt;
}

ordered_json encode_event(const OomEvent& event) {
  const auto& f = event.figures;
  ordered_json others = ordered_json::array();
  for (const auto& process : f.other_processes) {
    others.push_back({{"pid", process.pid}, {"bytes", process.bytes}});
  }
  ordered_json out = {{"kind", to_string(event.kind)},
                      {"recovered", event.recovered},
                      {"phase", to_string(event.phase)},
                      {"step", or_null(event.step)},
                      {"total_steps", or_null(event.total_steps)},
                      {"gpu_index", or_null(f.gpu_index)},
                      {"tried_to_allocate_bytes", or_null(f.tried_to_allocate_bytes)},
                      {"total_capacity_bytes", or_null(f.total_capacity_bytes)},
                      {"free_bytes", or_null(f.free_bytes)},
                      {"allocated_by_pytorch_bytes", or_null(f.allocated_by_pytorch_bytes)},
                      {"reserved_unallocated_bytes", or_null(f.reserved_unallocated_bytes)},
                      {"reserved_total_bytes", or_null(f.reserved_total_bytes)},
                      {"this_process_in_use_bytes", or_null(f.this_process_in_use_bytes)},
                      {"other_processes", others},
                      {"line", event.line},
                      {"offset", event.offset},
                      {"exception", or_null(event.exception)},
                      {"message", event.message},
                      {"phase_evidence", evidence_json(event.phase_evidence)},
                      {"step_evidence", evidence_json(event.step_evidence)}};
  // Only an amendment says so (scan --follow, the daemon): a whole-file verdict has none.
  if (event.revision > 0) out["revision"] = event.revision;
  return out;
}

std::string encode_event_text(const OomEvent& event) {
  return encode_event(event).dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<OomEvent> decode_event(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error(ErrorCode::kBadInput, "stored event: not JSON");
  return decode_object(doc);
}

}  // namespace oomtriage::parsers
