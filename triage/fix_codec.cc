// triage/fix_codec.cc: a Fix to its stored JSON and back.
#include "triage/fix_codec.h"

#include <optional>
#include <utility>

#include "parsers/event_codec.h"

namespace oomtriage::triage {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using parsers::or_null;

ordered_json text_or_null(const std::string& text) {
  return text.empty() ? ordered_json(nullptr) : ordered_json(text);
}

ordered_json target_json(parsers::TargetKind kind, const std::string& path) {
  return {{"kind", parsers::to_string(kind)}, {"path", text_or_null(path)}};
}

std::optional<parsers::TargetKind> target_kind_from_string(std::string_view name) {
  using parsers::TargetKind;
  for (TargetKind kind : {TargetKind::kYaml, TargetKind::kJson, TargetKind::kToml,
                          TargetKind::kArgs, TargetKind::kEnv, TargetKind::kOps}) {
    if (parsers::to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

Error bad(const std::string& what, const std::string& why) {
  return make_error(ErrorCode::kBadInput,
                    "stored fix" + (what.empty() ? "" : " " + what) + ": " + why);
}

// A field that is absent or null reads as nullopt; one of another type is an error.
template <class T>
Result<std::optional<T>> field(const json& object, const char* key, const std::string& what) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<T>();
  bool fits = false;
  if constexpr (std::is_same_v<T, std::string>) fits = it->is_string();
  if constexpr (std::is_same_v<T, bool>) fits = it->is_boolean();
  if constexpr (std::is_same_v<T, int>) fits = it->is_number_integer();
  if constexpr (std::is_same_v<T, uint64_t>) fits = it->is_number_unsigned();
  if constexpr (std::is_same_v<T, double>) fits = it->is_number();
  if (!fits) return bad(what, std::string("\"") + key + "\" has the wrong type");
  return std::optional<T>(it->get<T>());
}

// Where a change is written: {"kind": "yaml", "path": "/x/config.yaml" or null}.
Result<parsers::ConfigTarget> target_of(const json& target, const std::string& what) {
  if (!target.is_object()) return bad(what, "\"target\" is not an object");
  OOMTRIAGE_ASSIGN_OR_RETURN(auto kind, field<std::string>(target, "kind", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto path, field<std::string>(target, "path", what));
  parsers::ConfigTarget out;
  if (kind) {
    const auto known = target_kind_from_string(*kind);
    if (!known) return bad(what, "unknown target kind \"" + *kind + "\"");
    out.kind = *known;
  }
  out.path = path.value_or("");
  return out;
}

Result<Fix> decode_object(const json& item) {
  if (!item.is_object()) return bad("", "not an object");
  const auto id = item.find("id");
  if (id == item.end() || !id->is_string()) return bad("", "no \"id\"");
  Fix fix;
  fix.id = id->get<std::string>();
  const std::string& what = fix.id;
  OOMTRIAGE_ASSIGN_OR_RETURN(auto rank, field<int>(item, "rank", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto title, field<std::string>(item, "title", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto why, field<std::string>(item, "why", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto check, field<std::string>(item, "check", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto cost, field<std::string>(item, "cost", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto peak, field<uint64_t>(item, "predicted_peak_bytes", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto fits, field<bool>(item, "fits", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto estimate, field<std::string>(item, "estimate", what));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto confidence, field<double>(item, "confidence", what));
  fix.rank = rank.value_or(0);
  fix.title = title.value_or("");
  fix.why = why.value_or("");
  fix.check = check.value_or("");
  fix.cost = cost.value_or("");
  fix.predicted_peak_bytes = peak;
  fix.fits = fits;
  fix.estimate = estimate.value_or("");
  fix.confidence = confidence.value_or(0.0);
  if (const auto parts = item.find("parts"); parts != item.end() && parts->is_array()) {
    for (const json& part : *parts) {
      if (!part.is_string()) return bad(what, "a part that is not a fix id");
      fix.parts.push_back(part.get<std::string>());
    }
  }

  // Each change is written to the fix's target unless it names its own.
  parsers::ConfigTarget fix_target;
  if (const auto t = item.find("target"); t != item.end() && !t->is_null()) {
    OOMTRIAGE_ASSIGN_OR_RETURN(fix_target, target_of(*t, what));
  }
  const auto changes = item.find("changes");
  if (changes == item.end() || changes->is_null()) return fix;
  if (!changes->is_array()) return bad(what, "\"changes\" is not a list");
  for (const json& c : *changes) {
    if (!c.is_object() || !c.contains("path") || !c["path"].is_string()) {
      return bad(what, "a change without a \"path\"");
    }
    ConfigChange change;
    change.path = c["path"].get<std::string>();
    change.from = c.value("from", json());
    change.to = c.value("to", json());
    OOMTRIAGE_ASSIGN_OR_RETURN(auto table, field<std::string>(c, "table", what));
    change.table = table.value_or("");
    parsers::ConfigTarget where = fix_target;
    if (const auto t = c.find("target"); t != c.end() && !t->is_null()) {
      OOMTRIAGE_ASSIGN_OR_RETURN(where, target_of(*t, what));
    }
    change.kind = where.kind;
    change.file = where.path;
    fix.changes.push_back(std::move(change));
  }
  return fix;
}

}  // namespace

std::string value_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

ordered_json encode_fix(const Fix& fix) {
  const parsers::ConfigTarget target = fix.target();
  ordered_json changes = ordered_json::array();
  for (const auto& change : fix.changes) {
    ordered_json item = {{"path", change.path},
                         {"from", ordered_json(change.from)},
                         {"to", ordered_json(change.to)}};
    if (!change.table.empty()) item["table"] = change.table;
    // A change written somewhere else than the fix's target names its own.
    if (change.kind != target.kind || change.file != target.path) {
      item["target"] = target_json(change.kind, change.file);
    }
    changes.push_back(std::move(item));
  }
  ordered_json out = {{"id", fix.id},
                      {"rank", fix.rank},
                      {"title", fix.title},
                      {"why", fix.why},
                      {"check", text_or_null(fix.check)},
                      {"target", target_json(target.kind, target.path)},
                      {"changes", changes},
                      {"cost", fix.cost},
                      {"predicted_peak_bytes", or_null(fix.predicted_peak_bytes)},
                      {"fits", or_null(fix.fits)},
                      {"estimate", text_or_null(fix.estimate)},
                      {"confidence", fix.confidence}};
  if (!fix.parts.empty()) out["parts"] = fix.parts;
  return out;
}

std::string encode_fixes_text(const std::vector<Fix>& fixes) {
  ordered_json out = ordered_json::array();
  for (const Fix& fix : fixes) out.push_back(encode_fix(fix));
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Fix> decode_fix(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return bad("", "not JSON");
  return decode_object(doc);
}

Result<std::vector<Fix>> decode_fixes(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (!doc.is_array()) return make_error(ErrorCode::kBadInput, "stored fixes: not a JSON list");
  std::vector<Fix> fixes;
  for (const json& item : doc) {
    OOMTRIAGE_ASSIGN_OR_RETURN(Fix fix, decode_object(item));
    fixes.push_back(std::move(fix));
  }
  return fixes;
}

}  // namespace oomtriage::triage
