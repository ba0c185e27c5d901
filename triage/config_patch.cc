// triage/config_patch.cc: path walking over yaml-cpp's node marks, line edits, and an LCS diff.
#include "triage/config_patch.h"

#include "parsers/job_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <re2/re2.h>
#include <toml++/toml.h>

#include <algorithm>
#include <tuple>
#include <variant>

#include "triage/fix_codec.h"

namespace oomtriage::triage {
namespace {

using Segment = std::variant<std::string, size_t>;

// "config.process[0].datasets[1].resolution" -> config, process, 0, datasets, 1, resolution
std::optional<std::vector<Segment>> split_path(std::string_view path) {
  std::vector<Segment> segments;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      continue;
    }
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string_view::npos) return std::nullopt;
      size_t index = 0;
      for (size_t k = i + 1; k < close; ++k) {
        if (path[k] < '0' || path[k] > '9') return std::nullopt;
        index = index * 10 + static_cast<size_t>(path[k] - '0');
      }
      segments.emplace_back(index);
      i = close + 1;
      continue;
    }
    size_t end = i;
    while (end < path.size() && path[end] != '.' && path[end] != '[') ++end;
    segments.emplace_back(std::string(path.substr(i, end - i)));
    i = end;
  }
  return segments;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) lines.emplace_back(text.substr(start));
      break;
    }
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines, bool trailing_newline) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    out += lines[i];
    if (i + 1 < lines.size() || trailing_newline) out += '\n';
  }
  return out;
}

size_t indentation(const std::string& line) {
  size_t n = 0;
  while (n < line.size() && line[n] == ' ') ++n;
  return n;
}

bool is_blank_or_comment(const std::string& line) {
  const size_t n = indentation(line);
  return n == line.size() || line[n] == '#';
}

// JSON value -> YAML flow text, keeping the original quote style for strings.
std::string yaml_value(const nlohmann::json& value, char quote) {
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    const bool plain_ok = !s.empty() &&
                          s.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos &&
                          s.front() != ' ' && s.back() != ' ' && s != "true" && s != "false" &&
                          s != "null" && !std::isdigit(static_cast<unsigned char>(s.front()));
    if (quote == '\'') {
      std::string quoted = "'";
      for (char c : s) quoted += c == '\'' ? std::string("''") : std::string(1, c);
      return quoted + "'";
    }
    if (quote == '"' || !plain_ok)
      return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return s;
  }
  if (value.is_array()) {
    std::vector<std::string> items;
    for (const auto& item : value) items.push_back(yaml_value(item, 0));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// End column (exclusive) of the scalar or flow collection starting at `col` on `line`.
size_t value_end(const std::string& line, size_t col) {
  if (col >= line.size()) return col;
  const char first = line[col];
  if (first == '"' || first == '\'') {
    for (size_t i = col + 1; i < line.size(); ++i) {
      if (first == '"' && line[i] == '\\') {
        ++i;
        continue;
      }
      if (line[i] == first) {
        if (first == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
          ++i;
          continue;
        }
        return i + 1;
      }
    }
    return line.size();
  }
  if (first == '[' || first == '{') {
    const char close = first == '[' ? ']' : '}';
    int depth = 0;
    for (size_t i = col; i < line.size(); ++i) {
      if (line[i] == first) ++depth;
      if (line[i] == close && --depth == 0) return i + 1;
    }
    return line.size();
  }
  size_t end = line.find(" #", col);
  if (end == std::string::npos) end = line.size();
  while (end > col && line[end - 1] == ' ') --end;
  return end;
}

class YamlEditor {
 public:
  explicit YamlEditor(std::string_view text)
      : lines_(split_lines(text)), trailing_newline_(!text.empty() && text.back() == '\n') {}

  std::string error;

  bool apply(const ConfigChange& change) {
    const auto segments = split_path(change.path);
    const nlohmann::json& value = change.to;
    if (!segments || segments->empty()) {
      error = change.path + ": not a config path";
      return false;
    }
    YAML::Node root;
    const std::string current = join_lines(lines_, trailing_newline_);
    if (auto nesting = parsers::yaml_nesting_ok(current); !nesting) {
      error = "line " + nesting.error().message;
      return false;
    }
    try {
      root = YAML::Load(current);
    } catch (const YAML::Exception& e) {
      error = fmt::format("line {}: {}", e.mark.line + 1, e.msg);
      return false;
    }
    // Walk to the deepest existing node; YAML::Node assignment rebinds, so use reset().
    std::vector<YAML::Node> chain{root};
    size_t depth = 0;
    for (; depth < segments->size(); ++depth) {
      YAML::Node current = chain.back();
      YAML::Node next;
      if (const auto* key = std::get_if<std::string>(&(*segments)[depth])) {
        if (!current.IsMap() || !current[*key]) break;
        next.reset(current[*key]);
      } else {
        const size_t index = std::get<size_t>((*segments)[depth]);
        if (!current.IsSequence() || index >= current.size()) break;
        next.reset(current[index]);
      }
      chain.push_back(next);
    }
    if (depth == segments->size()) return replace_value(chain.back(), value, change.path);
    return insert_keys(chain.back(), *segments, depth, value, change.path);
  }

  std::string text() const { return join_lines(lines_, trailing_newline_); }

 private:
  bool replace_value(const YAML::Node& node, const nlohmann::json& value, const std::string& path) {
    const YAML::Mark mark = node.Mark();
    if (mark.line < 0 || static_cast<size_t>(mark.line) >= lines_.size()) {
      error = path + ": cannot locate the value";
      return false;
    }
    std::string& line = lines_[static_cast<size_t>(mark.line)];
    const size_t col = static_cast<size_t>(mark.column);
    if (node.IsSequence() && (col >= line.size() || line[col] != '[')) {
      return replace_block_sequence(node, value, path);
    }
    if (node.IsMap()) {
      error = path + ": is a mapping, not a value";
      return false;
    }
    const char quote = col < line.size() && (line[col] == '"' || line[col] == '\'') ? line[col] : 0;
    const size_t end = value_end(line, col);
    line = line.substr(0, col) + yaml_value(value, quote) + line.substr(end);
    return true;
  }

  // A block sequence stays one: its item lines are replaced by the new items at the same
  // indentation ("- 512"), comment lines between them are kept.
  bool replace_block_sequence(const YAML::Node& node, const nlohmann::json& value,
                              const std::string& path) {
    if (!value.is_array() || value.empty() || node.size() == 0) {
      error = path + ": a block list can only be replaced by a non-empty list";
      return false;
    }
    for (const auto& item : value) {
      if (item.is_array() || item.is_object()) {
        error = path + ": nested lists are edited by hand";
        return false;
      }
    }
    std::vector<size_t> item_lines;
    for (size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsScalar()) {
        error = path + ": a list of mappings is edited by hand";
        return false;
      }
      const int line = node[i].Mark().line;
      if (line < 0 || static_cast<size_t>(line) >= lines_.size()) {
        error = path + ": cannot locate the list";
        return false;
      }
      item_lines.push_back(static_cast<size_t>(line));
    }
    if (std::adjacent_find(item_lines.begin(), item_lines.end()) != item_lines.end()) {
      error = path + ": list items share lines, edit it by hand";
      return false;
    }
    const std::string& first = lines_[item_lines.front()];
    const size_t dash = first.find('-');
    if (dash == std::string::npos || first.find_first_not_of(' ') != dash) {
      error = path + ": list items share lines, edit it by hand";
      return false;
    }
    std::vector<std::string> items;
    for (const auto& item : value)
      items.push_back(std::string(dash, ' ') + "- " + yaml_value(item, 0));
    for (size_t k = item_lines.size(); k-- > 0;) {
      lines_.erase(lines_.begin() + static_cast<long>(item_lines[k]));
    }
    lines_.insert(lines_.begin() + static_cast<long>(item_lines.front()), items.begin(),
                  items.end());
    return true;
  }

  bool insert_keys(const YAML::Node& parent, const std::vector<Segment>& segments, size_t depth,
                   const nlohmann::json& value, const std::string& path) {
    for (size_t i = depth; i < segments.size(); ++i) {
      if (!std::holds_alternative<std::string>(segments[i])) {
        error = path + ": a list item is missing";
        return false;
      }
    }
    if (!parent.IsMap() || parent.size() == 0) {
      error = path + ": the enclosing section is empty or not a block mapping, edit it by hand";
      return false;
    }
    // The parent's keys start at the column of its first key; its block ends before the first
    // later line indented less than that.
    const YAML::Mark first_key = parent.begin()->first.Mark();
    const size_t child_indent = static_cast<size_t>(first_key.column);
    const YAML::Mark parent_mark = parent.Mark();
    const bool flow = parent_mark.line >= 0 && size_t(parent_mark.line) < lines_.size() &&
                      size_t(parent_mark.column) < lines_[size_t(parent_mark.line)].size() &&
                      lines_[size_t(parent_mark.line)][size_t(parent_mark.column)] == '{';
    if (first_key.line < 0 || flow) {
      error = path + ": is a flow mapping, edit it by hand";
      return false;
    }
    size_t last_content = static_cast<size_t>(first_key.line);
    for (size_t i = last_content + 1; i < lines_.size(); ++i) {
      if (is_blank_or_comment(lines_[i])) continue;
      if (indentation(lines_[i]) < child_indent) break;
      last_content = i;
    }
    std::vector<std::string> inserted;
    size_t indent = child_indent;
    for (size_t i = depth; i < segments.size(); ++i) {
      const std::string& key = std::get<std::string>(segments[i]);
      if (i + 1 == segments.size()) {
        inserted.push_back(std::string(indent, ' ') + key + ": " + yaml_value(value, 0));
      } else {
        inserted.push_back(std::string(indent, ' ') + key + ":");
        indent += 2;
      }
    }
    lines_.insert(lines_.begin() + static_cast<long>(last_content) + 1, inserted.begin(),
                  inserted.end());
    return true;
  }

  std::vector<std::string> lines_;
  bool trailing_newline_;
};

// Environment, command-line and operator changes have no place in a file.
bool edits_file(const ConfigChange& change) {
  using parsers::TargetKind;
  return change.kind != TargetKind::kEnv && change.kind != TargetKind::kArgs &&
         change.kind != TargetKind::kOps && change.path.rfind("env.", 0) != 0;
}

// The path inside the document: a native key lives in its table ("optimizer" + "optimizer").
std::string key_path(const ConfigChange& change) {
  return change.table.empty() ? change.path : change.table + "." + change.path;
}

nlohmann::ordered_json* json_slot(nlohmann::ordered_json& root, const std::vector<Segment>& path,
                                  std::string& error, const std::string& name) {
  nlohmann::ordered_json* node = &root;
  for (const Segment& segment : path) {
    if (const auto* key = std::get_if<std::string>(&segment)) {
      if (node->is_null()) *node = nlohmann::ordered_json::object();
      if (!node->is_object()) {
        error = name + ": " + *key + " is inside a value that is not an object";
        return nullptr;
      }
      node = &(*node)[*key];
    } else {
      const size_t index = std::get<size_t>(segment);
      if (!node->is_array() || index >= node->size()) {
        error = name + ": list item " + std::to_string(index) + " is missing";
        return nullptr;
      }
      node = &(*node)[index];
    }
  }
  return node;
}

// TOML is edited as text too: a key's line is found inside its table's region (the lines after
// the table's header up to the next header; the root is everything before the first header)
// and only its value is replaced, so comments and layout stay. A key the table lacks is added
// at the end of the region.
std::string toml_value(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return value.dump();
  if (value.is_array()) {
    std::vector<std::string> items;
    for (const auto& item : value) items.push_back(toml_value(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  // A JSON string is a valid TOML basic string for every escape nlohmann writes.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool is_toml_header(const std::string& line) {
  const size_t n = indentation(line);
  return n < line.size() && line[n] == '[';
}

// "datasets[2]" -> ("datasets", 2, true); "general" -> ("general", 0, false)
std::tuple<std::string, size_t, bool> toml_table(const std::string& table) {
  const size_t open = table.find('[');
  if (open == std::string::npos || table.back() != ']') return {table, 0, false};
  return {table.substr(0, open), std::stoul(table.substr(open + 1, table.size() - open - 2)), true};
}

std::string header_name(const std::string& line) {
  std::string name = line.substr(indentation(line));
  const bool array = name.rfind("[[", 0) == 0;
  const size_t close = name.find(array ? "]]" : "]");
  if (close == std::string::npos) return "";
  name = name.substr(array ? 2 : 1, close - (array ? 2 : 1));
  name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
  return (array ? "[[" : "[") + name;
}

class TomlEditor {
 public:
  explicit TomlEditor(std::string_view text)
      : lines_(split_lines(text)), trailing_newline_(text.empty() || text.back() == '\n') {}

  std::string error;

  bool apply(const ConfigChange& change) {
    const nlohmann::json& value = change.to;
    size_t begin = 0, end = lines_.size();
    if (!region(change.table, begin, end)) {
      error = fmt::format("[{}] is not in the file", change.table);
      return false;
    }
    static const RE2 kKey(R"(^\s*("?)([A-Za-z0-9_.-]+)("?)\s*=)");
    for (size_t i = begin; i < end; ++i) {
      std::string q1, key, q2;
      if (!RE2::PartialMatch(lines_[i], kKey, &q1, &key, &q2) || key != change.path) continue;
      if (value.is_null()) {
        lines_.erase(lines_.begin() + static_cast<long>(i));
        return true;
      }
      std::string& line = lines_[i];
      const size_t equals = line.find('=');
      size_t col = line.find_first_not_of(' ', equals + 1);
      if (col == std::string::npos) col = line.size();
      const size_t value_stop = value_end(line, col);
      if (value_stop == line.size() && col < line.size() && line[col] == '[' &&
          line.find(']', col) == std::string::npos) {
        error = change.path + ": a list over several lines, edit it by hand";
        return false;
      }
      line = line.substr(0, col) + toml_value(value) + line.substr(value_stop);
      return true;
    }
    if (value.is_null()) return true;  // nothing to remove
    size_t at = end;
    while (at > begin && is_blank_or_comment(lines_[at - 1])) --at;
    if (change.table.empty() && at == begin) {
      at = begin;  // an empty root: before the first table, after leading comments
      while (at < end && is_blank_or_comment(lines_[at])) ++at;
    }
    lines_.insert(lines_.begin() + static_cast<long>(at), change.path + " = " + toml_value(value));
    return true;
  }

  std::string text() const { return join_lines(lines_, trailing_newline_); }

 private:
  // The lines [begin, end) that hold the keys of `table`.
  bool region(const std::string& table, size_t& begin, size_t& end) const {
    const auto [name, index, array] = toml_table(table);
    const std::string wanted = table.empty() ? "" : (array ? "[[" : "[") + name;
    size_t seen = 0;
    bool inside = table.empty();
    begin = 0;
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (!is_toml_header(lines_[i])) continue;
      if (inside) {
        end = i;
        return true;
      }
      if (header_name(lines_[i]) == wanted && seen++ == index) {
        inside = true;
        begin = i + 1;
      }
    }
    end = lines_.size();
    return inside;
  }

  std::vector<std::string> lines_;
  bool trailing_newline_;
};

// The value at `path` in a JSON tree, or nullptr.
const nlohmann::json* at_path(const nlohmann::json& root, const std::vector<Segment>& path) {
  const nlohmann::json* node = &root;
  for (const Segment& segment : path) {
    if (const auto* key = std::get_if<std::string>(&segment)) {
      if (!node->is_object() || !node->contains(*key)) return nullptr;
      node = &(*node)[*key];
    } else {
      const size_t index = std::get<size_t>(segment);
      if (!node->is_array() || index >= node->size()) return nullptr;
      node = &(*node)[index];
    }
  }
  return node;
}

nlohmann::json toml_to_json(const toml::node& node) {
  if (const auto* t = node.as_table()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, child] : *t) out[std::string(key.str())] = toml_to_json(child);
    return out;
  }
  if (const auto* a = node.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& child : *a) out.push_back(toml_to_json(child));
    return out;
  }
  if (const auto* v = node.as_boolean()) return v->get();
  if (const auto* v = node.as_integer()) return v->get();
  if (const auto* v = node.as_floating_point()) return v->get();
  if (const auto* v = node.as_string()) return v->get();
  return nullptr;
}

bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

}  // namespace

Result<std::string> patch_toml(std::string_view text, const std::vector<ConfigChange>& changes) {
  TomlEditor editor(text);
  for (const ConfigChange& change : changes) {
    if (!edits_file(change)) continue;
    if (!editor.apply(change)) return make_error(ErrorCode::kBadInput, editor.error);
  }
  return editor.text();
}

Result<std::string> patch_file(parsers::TargetKind kind, std::string_view text,
                               const std::vector<ConfigChange>& changes) {
  using parsers::TargetKind;
  Result<std::string> result = kind == TargetKind::kToml   ? patch_toml(text, changes)
                               : kind == TargetKind::kJson ? patch_json(text, changes)
                                                           : patch_yaml(text, changes);
  if (!result) return result;
  // Read the result back: every change must hold its new value at its path.
  nlohmann::json doc;
  std::string error;
  if (kind == TargetKind::kToml) {
    const Result<toml::table> parsed = parsers::parse_toml(*result, "line");
    if (!parsed) {
      return make_error(ErrorCode::kBadInput, fmt::format("the patched file does not parse ({})",
                                                          parsed.error().message));
    }
    doc = toml_to_json(*parsed);
  } else if (kind == TargetKind::kJson) {
    if (auto parsed = parsers::parse_json(*result, "the patched file")) doc = std::move(*parsed);
  } else {
    auto parsed = parsers::yaml_to_json(*result, "line");
    // Config strings may hold any bytes: invalid UTF-8 is replaced, never thrown on.
    if (parsed) {
      doc = nlohmann::json::parse(
          parsed->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), nullptr, false);
    } else {
      error = parsed.error().message;
    }
  }
  if (doc.is_discarded() || doc.is_null()) {
    return make_error(ErrorCode::kBadInput,
                      "the patched file does not parse" + (error.empty() ? "" : ": " + error));
  }
  for (const ConfigChange& change : changes) {
    if (!edits_file(change)) continue;
    const auto segments = split_path(key_path(change));
    const nlohmann::json& want = change.to;
    if (!segments) continue;
    const nlohmann::json* got = at_path(doc, *segments);
    const bool ok = want.is_null() ? got == nullptr || got->is_null()
                                   : got != nullptr && same_value(*got, want);
    if (!ok) {
      return make_error(
          ErrorCode::kBadInput,
          fmt::format("{}: the patched file does not hold {} (holds {})", key_path(change),
                      value_text(change.to),
                      got ? got->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                          : "nothing"));
    }
  }
  return result;
}

Result<std::vector<nlohmann::json>> values_at(parsers::TargetKind kind, std::string_view text,
                                              const std::vector<ConfigChange>& changes,
                                              std::string_view source) {
  using parsers::TargetKind;
  nlohmann::json doc;
  if (kind == TargetKind::kToml) {
    auto parsed = parsers::parse_toml(text, source);
    if (!parsed) return parsed.error();
    doc = toml_to_json(*parsed);
  } else if (kind == TargetKind::kJson) {
    auto parsed = parsers::parse_json(text, source);
    if (!parsed) return parsed.error();
    doc = std::move(*parsed);
  } else {
    auto parsed = parsers::yaml_to_json(text, source);
    if (!parsed) return parsed.error();
    doc = nlohmann::json::parse(
        parsed->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), nullptr, false);
  }
  if (doc.is_discarded() || !doc.is_object()) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}: holds no config", source));
  }
  std::vector<nlohmann::json> values;
  for (const ConfigChange& change : changes) {
    const auto segments = edits_file(change) ? split_path(key_path(change)) : std::nullopt;
    const nlohmann::json* value = segments ? at_path(doc, *segments) : nullptr;
    values.push_back(value ? *value : nlohmann::json());
  }
  return values;
}

Result<std::string> patch_yaml(std::string_view text, const std::vector<ConfigChange>& changes) {
  YamlEditor editor(text);
  for (const ConfigChange& change : changes) {
    if (!edits_file(change)) continue;
    if (!editor.apply(change)) return make_error(ErrorCode::kBadInput, editor.error);
  }
  return editor.text();
}

Result<std::string> patch_json(std::string_view text, const std::vector<ConfigChange>& changes) {
  // Within the limits of parsers/bounded_document.h before anything walks or dumps it.
  auto parsed = parsers::parse_ordered_json(text, "the config");
  if (!parsed) return parsed.error();
  nlohmann::ordered_json doc = std::move(*parsed);
  for (const ConfigChange& change : changes) {
    if (!edits_file(change)) continue;
    const auto segments = split_path(key_path(change));
    const nlohmann::ordered_json value = change.to;
    if (!segments) return make_error(ErrorCode::kBadInput, change.path + ": not a config path");
    std::string error;
    if (value.is_null() && std::holds_alternative<std::string>(segments->back())) {
      // Removing a key: erase it from its parent, if it is there at all.
      std::vector<Segment> parent_path(segments->begin(), segments->end() - 1);
      nlohmann::ordered_json* parent = json_slot(doc, parent_path, error, change.path);
      if (parent == nullptr) return make_error(ErrorCode::kBadInput, error);
      if (parent->is_object()) parent->erase(std::get<std::string>(segments->back()));
      continue;
    }
    nlohmann::ordered_json* slot = json_slot(doc, *segments, error, change.path);
    if (slot == nullptr) return make_error(ErrorCode::kBadInput, error);
    *slot = value;
  }
  // Keep the file's indentation: the first indented line tells it.
  int indent = 2;
  for (const auto& line : split_lines(text)) {
    const size_t n = indentation(line);
    if (n > 0 && n < line.size()) {
      indent = static_cast<int>(n);
      break;
    }
  }
  if (text.find('\n') == std::string_view::npos) indent = -1;
  std::string out = doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!text.empty() && text.back() == '\n') out += '\n';
  return out;
}

std::string unified_diff(std::string_view before, std::string_view after,
                         std::string_view from_name, std::string_view to_name) {
  const std::vector<std::string> a = split_lines(before);
  const std::vector<std::string> b = split_lines(after);
  if (a == b) return "";
  // LCS table over lines; configs are small (hundreds of lines).
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Op {
    char kind;  // ' ', '-', '+'
    size_t a_line, b_line;
  };
  std::vector<Op> ops;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ops.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', i++, j});
    } else {
      ops.push_back({'+', i, j++});
    }
  }
  constexpr size_t kContext = 3;
  std::string out = fmt::format("--- {}\n+++ {}\n", from_name, to_name);
  size_t k = 0;
  while (k < ops.size()) {
    while (k < ops.size() && ops[k].kind == ' ') ++k;
    if (k == ops.size()) break;
    const size_t start = k >= kContext ? k - kContext : 0;
    size_t end = k;
    // Extend the hunk while changes are closer than 2 * context apart.
    while (end < ops.size()) {
      if (ops[end].kind != ' ') {
        ++end;
        continue;
      }
      size_t run = end;
      while (run < ops.size() && ops[run].kind == ' ') ++run;
      if (run == ops.size() || run - end > 2 * kContext) {
        end = std::min(ops.size(), end + kContext);
        break;
      }
      end = run;
    }
    size_t a_count = 0, b_count = 0;
    for (size_t x = start; x < end; ++x) {
      if (ops[x].kind != '+') ++a_count;
      if (ops[x].kind != '-') ++b_count;
    }
    const size_t a_start = ops[start].a_line + (a_count ? 1 : 0);
    const size_t b_start = ops[start].b_line + (b_count ? 1 : 0);
    out += fmt::format("@@ -{},{} +{},{} @@\n", a_start, a_count, b_start, b_count);
    for (size_t x = start; x < end; ++x) {
      const std::string& line = ops[x].kind == '+' ? b[ops[x].b_line] : a[ops[x].a_line];
      out += ops[x].kind;
      out += line;
      out += '\n';
    }
    k = end;
  }
  return out;
}

}  // namespace oomtriage::triage
