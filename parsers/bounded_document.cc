// parsers/bounded_document.cc: the size check, the three nesting pre-scans, and the parsers that
// run only after them; the YAML to JSON conversion with its node and byte budget.
#include "parsers/bounded_document.h"

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <vector>

namespace oomtriage::parsers {
namespace {

using nlohmann::ordered_json;

Error too_deep(int line, int max_depth) {
  return make_error(ErrorCode::kBadInput, std::to_string(line) + ": nested deeper than " +
                                              std::to_string(max_depth) + " levels");
}

// "SOURCE:LINE: reason" from a pre-scan's "LINE: reason".
Error with_source(std::string_view source, const Error& error) {
  return make_error(error.code, std::string(source) + ":" + error.message);
}

Error refused(std::string_view source, const std::string& why) {
  return make_error(ErrorCode::kBadInput, std::string(source) + ": refused: " + why);
}

RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

ordered_json yaml_scalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  static const RE2 kInt(R"([-+]?\d+)", quiet_options());
  static const RE2 kFloat(R"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", quiet_options());
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (RE2::FullMatch(text, kInt) && text.size() < 18) return std::stoll(text);
  if (RE2::FullMatch(text, kFloat)) return std::stod(text);
  return text;
}

// What the conversion may still spend. yaml-cpp shares an aliased node rather than copying it,
// but the conversion walks it again at every alias: counting every visit bounds the expansion.
struct Budget {
  size_t nodes = 0;
  size_t bytes = 0;
  bool out_of_nodes = false;
  bool out_of_bytes = false;
  int too_deep_line = 0;  // > 0: nested past kMaxNesting (through aliases) at this line
  bool spent() const { return out_of_nodes || out_of_bytes || too_deep_line > 0; }
};

ordered_json convert(const YAML::Node& node, const std::string& path, int depth, Budget& budget,
                     std::map<std::string, int>* lines) {
  if (budget.spent()) return nullptr;
  if (++budget.nodes > kMaxYamlNodes) {
    budget.out_of_nodes = true;
    return nullptr;
  }
  budget.bytes += path.size();
  if (node.Type() == YAML::NodeType::Scalar) budget.bytes += node.Scalar().size();
  if (budget.bytes > kMaxYamlBytes) {
    budget.out_of_bytes = true;
    return nullptr;
  }
  if (depth > kMaxNesting) {
    budget.too_deep_line = node.Mark().line + 1;
    return nullptr;
  }
  if (lines) (*lines)[path] = node.Mark().line + 1;
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      ordered_json object = ordered_json::object();
      for (const auto& item : node) {
        const std::string key = item.first.Scalar();
        const std::string child = path.empty() ? key : path + "." + key;
        budget.bytes += key.size();
        object[key] = convert(item.second, child, depth + 1, budget, lines);
        if (budget.spent()) return nullptr;
        if (lines) (*lines)[child] = item.first.Mark().line + 1;
      }
      return object;
    }
    case YAML::NodeType::Sequence: {
      ordered_json array = ordered_json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        array.push_back(
            convert(node[i], path + "[" + std::to_string(i) + "]", depth + 1, budget, lines));
        if (budget.spent()) return nullptr;
      }
      return array;
    }
    case YAML::NodeType::Scalar: return yaml_scalar(node);
    default: return nullptr;
  }
}

// Whether the text uses an alias (`*name` where a value starts): what a spent node budget is
// called in its message.
bool has_alias(std::string_view text) {
  for (size_t at = text.find('*'); at != std::string_view::npos; at = text.find('*', at + 1)) {
    const char before = at == 0 ? ' ' : text[at - 1];
    const char after = at + 1 < text.size() ? text[at + 1] : ' ';
    if ((before == ' ' || before == '\n' || before == '[' || before == ',' || before == '{') &&
        after != ' ' && after != '\n' && after != '*') {
      return true;
    }
  }
  return false;
}

// A lower bound on the nodes a YAML text holds, from its structure outside quotes and comments:
// each "- " item, each ": " (a value), each ',' inside flow brackets and each bracket. yaml-cpp
// spends a few hundred bytes and some microseconds on a node: 4 MiB of "1," would cost it a GiB
// before the conversion's budget is asked, so a text that must be over the budget is refused
// before it is loaded. (The text of a block scalar is counted too: a config would need 100,000
// ": " in its prompts to be refused for them.)
size_t yaml_nodes_at_least(std::string_view text) {
  size_t nodes = 0;
  int flow = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\n';
    if (c == '\n') {
      quote = 0;
    } else if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\n')) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '[' || c == '{') {
      ++flow;
      ++nodes;
    } else if (c == ']' || c == '}') {
      if (flow > 0) --flow;
    } else if (c == ',' && flow > 0) {
      ++nodes;
    } else if ((c == '-' || c == ':') && (next == ' ' || next == '\n')) {
      ++nodes;
    }
  }
  return nodes;
}

template <class Json>
Result<Json> parse_bounded(std::string_view text, std::string_view source, size_t max_bytes) {
  OOMTRIAGE_TRY(size_ok(text, source, max_bytes));
  if (auto nesting = json_nesting_ok(text); !nesting) return with_source(source, nesting.error());
  Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    return make_error(ErrorCode::kBadInput, std::string(source) + ": not valid JSON");
  }
  return doc;
}

}  // namespace

std::string byte_size_text(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

Result<Ok> size_ok(std::string_view text, std::string_view source, size_t max_bytes) {
  if (text.size() > max_bytes) return refused(source, "larger than " + byte_size_text(max_bytes));
  return Ok{};
}

Result<Ok> json_nesting_ok(std::string_view text, int max_depth) {
  int depth = 0;
  int line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is (a newline in a string is invalid JSON)
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return too_deep(line, max_depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Ok{};
}

Result<Ok> toml_nesting_ok(std::string_view text, int max_depth) {
  // The depth of a line: the current [table]'s (its header's segments), the brackets open ('['
  // arrays and headers, '{' inline tables) and the dots of the key being read (at the start of a
  // line outside brackets, in a [table.header], and after '{' or ',' inside an inline table, up
  // to its '='). Strings and comments are skipped.
  std::vector<char> open;
  int line = 1;
  int table_depth = 0;  // segments of the last [table] header
  bool header = false;  // reading a [table] or [[array.of.tables]] header
  bool in_key = true;
  int dots = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      dots = 0;
      in_key = open.empty();
      continue;
    }
    if (c == '"' || c == '\'') {
      const std::string_view triple = c == '"' ? "\"\"\"" : "'''";
      const std::string_view close = text.substr(i, 3) == triple ? triple : triple.substr(0, 1);
      size_t j = i + close.size();
      while (j < text.size() && text.substr(j, close.size()) != close) {
        if (c == '"' && text[j] == '\\') {
          if (j + 1 < text.size() && text[j + 1] == '\n') ++line;
          j += 2;
          continue;
        }
        if (text[j] == '\n') {
          if (close.size() == 1) break;  // a one-line string left open: toml++ says so
          ++line;
        }
        ++j;
      }
      if (j >= text.size()) break;  // the text ends inside the string
      if (text[j] == '\n') {
        i = j - 1;  // the loop counts the newline
        continue;
      }
      // A triple-quoted string may end with up to two more quotes.
      while (close.size() == 3 && j + 3 < text.size() && text[j + 3] == c) ++j;
      i = j + close.size() - 1;
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '[' || c == '{') {
      if (c == '[' && open.empty() && in_key) header = true;
      if (c == '[' && !(header && open.size() < 2)) in_key = false;
      if (c == '{') in_key = true;
      open.push_back(c);
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
      if (!header || open.empty()) {
        if (header) table_depth = dots + 1;
        header = false;
        in_key = false;
        dots = 0;
      }
    } else if (c == '=') {
      in_key = false;
      dots = 0;
    } else if (c == ',' && !open.empty() && open.back() == '{') {
      in_key = true;
      dots = 0;
    } else if (c == '.' && in_key) {
      ++dots;
    }
    const int depth = static_cast<int>(open.size()) + dots + (header ? 0 : table_depth);
    if (depth > max_depth) return too_deep(line, max_depth);
  }
  return Ok{};
}

Result<Ok> yaml_nesting_ok(std::string_view text, int max_depth) {
  int flow = 0;
  int line = 1;
  size_t i = 0;
  while (i < text.size()) {
    int indent = 0;
    while (i < text.size() && text[i] == ' ') {
      ++indent;
      ++i;
    }
    int dashes = 0;
    while (i + 1 < text.size() && text[i] == '-' && text[i + 1] == ' ') {
      ++dashes;
      i += 2;
      while (i < text.size() && text[i] == ' ') ++i;
    }
    char quote = 0;
    for (; i < text.size() && text[i] != '\n'; ++i) {
      const char c = text[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '[' || c == '{') {
        ++flow;
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      } else if (c == '#') {
        while (i < text.size() && text[i] != '\n') ++i;
        break;
      }
      if (indent / 2 + dashes + flow > max_depth) return too_deep(line, max_depth);
    }
    if (indent / 2 + dashes + flow > max_depth) return too_deep(line, max_depth);
    ++i;
    ++line;
  }
  return Ok{};
}

Result<nlohmann::json> parse_json(std::string_view text, std::string_view source,
                                  size_t max_bytes) {
  return parse_bounded<nlohmann::json>(text, source, max_bytes);
}

Result<ordered_json> parse_ordered_json(std::string_view text, std::string_view source,
                                        size_t max_bytes) {
  return parse_bounded<ordered_json>(text, source, max_bytes);
}

Result<toml::table> parse_toml(std::string_view text, std::string_view source, size_t max_bytes) {
  OOMTRIAGE_TRY(size_ok(text, source, max_bytes));
  if (auto nesting = toml_nesting_ok(text); !nesting) return with_source(source, nesting.error());
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return make_error(ErrorCode::kBadInput, std::string(source) + ":" +
                                                std::to_string(e.source().begin.line) + ": " +
                                                std::string(e.description()));
  }
}

Result<ordered_json> yaml_to_json(std::string_view text, std::string_view source,
                                  std::map<std::string, int>* lines) {
  OOMTRIAGE_TRY(size_ok(text, source));
  if (auto nesting = yaml_nesting_ok(text); !nesting) return with_source(source, nesting.error());
  if (yaml_nodes_at_least(text) > kMaxYamlNodes) {
    return refused(source, "more than " + std::to_string(kMaxYamlNodes) + " YAML nodes");
  }
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    Budget budget;
    ordered_json doc = convert(root, "", 0, budget, lines);
    if (budget.too_deep_line > 0) {
      return with_source(source, too_deep(budget.too_deep_line, kMaxNesting));
    }
    if (budget.out_of_nodes) {
      return refused(source,
                     has_alias(text)
                         ? "YAML aliases expand past " + std::to_string(kMaxYamlNodes) + " nodes"
                         : "more than " + std::to_string(kMaxYamlNodes) + " YAML nodes");
    }
    if (budget.out_of_bytes) {
      return refused(source, "YAML expands past " + byte_size_text(kMaxYamlBytes));
    }
    return doc;
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kBadInput,
                      std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kBadInput, std::string(source) + ":1: " + e.what());
  }
}

}  // namespace oomtriage::parsers
