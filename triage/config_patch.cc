// triage/config_patch.cc: path walking over yaml-cpp's node marks, line edits, and an LCS diff.
#include "triage/config_patch.h"

#include "parsers/job_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <variant>

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
    const bool plain_ok = !s.empty() && s.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos &&
                          s.front() != ' ' && s.back() != ' ' && s != "true" && s != "false" &&
                          s != "null" && !std::isdigit(static_cast<unsigned char>(s.front()));
    if (quote == '\'') return "'" + s + "'";
    if (quote == '"' || !plain_ok) return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
    const auto value = nlohmann::json::parse(change.to_json, nullptr, false);
    if (!segments || segments->empty() || value.is_discarded()) {
      error = change.path + ": not a config path";
      return false;
    }
    YAML::Node root;
    const std::string current = join_lines(lines_, trailing_newline_);
    std::string depth_error;
    if (!parsers::yaml_nesting_ok(current, &depth_error)) {
      error = "line " + depth_error;
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
      // A block sequence: turn it into a flow sequence on the key's line.
      const size_t first = static_cast<size_t>(mark.line);
      size_t last = first;
      for (size_t i = 0; i < node.size(); ++i) last = std::max(last, size_t(node[i].Mark().line));
      size_t key_line = first;
      while (key_line > 0 && lines_[key_line].find(':') == std::string::npos) --key_line;
      if (key_line == first) {
        error = path + ": block sequence on the key's line, edit it by hand";
        return false;
      }
      std::string& key = lines_[key_line];
      const size_t colon = key.rfind(':');
      key = key.substr(0, colon + 1) + " " + yaml_value(value, 0);
      lines_.erase(lines_.begin() + static_cast<long>(first), lines_.begin() + static_cast<long>(last) + 1);
      return true;
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
    if (first_key.line < 0 || lines_[size_t(first_key.line)].find('{') != std::string::npos) {
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

}  // namespace

PatchResult patch_yaml(std::string_view text, const std::vector<ConfigChange>& changes) {
  YamlEditor editor(text);
  for (const ConfigChange& change : changes) {
    if (change.path.rfind("config.", 0) != 0) continue;
    if (!editor.apply(change)) return {std::nullopt, editor.error};
  }
  return {editor.text(), ""};
}

PatchResult patch_json(std::string_view text, const std::vector<ConfigChange>& changes) {
  auto doc = nlohmann::ordered_json::parse(text, nullptr, false);
  if (doc.is_discarded()) return {std::nullopt, "not valid JSON"};
  for (const ConfigChange& change : changes) {
    if (change.path.rfind("config.", 0) != 0) continue;
    const auto segments = split_path(change.path);
    const auto value = nlohmann::ordered_json::parse(change.to_json, nullptr, false);
    if (!segments || value.is_discarded()) return {std::nullopt, change.path + ": not a config path"};
    std::string error;
    nlohmann::ordered_json* slot = json_slot(doc, *segments, error, change.path);
    if (slot == nullptr) return {std::nullopt, error};
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
  std::string out = doc.dump(indent);
  if (!text.empty() && text.back() == '\n') out += '\n';
  return {out, ""};
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
