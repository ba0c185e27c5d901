// parsers/printed_arguments.cc: a small reader for Python's repr of a namespace (quotes,
// brackets and parentheses nest; commas inside them do not split) and two RE2 lines.
#include "parsers/printed_arguments.h"

#include <re2/re2.h>

namespace oomtriage::parsers {
namespace {

RE2::Options quiet() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The end of the value starting at `i`: a quoted string, or text up to a comma or the closing
// parenthesis at depth 0.
size_t value_end(std::string_view text, size_t i) {
  int depth = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\'' || c == '"') {
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (text[i] == '\\') ++i;
      }
      ++i;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) return i;
      --depth;
    }
    if (c == ',' && depth == 0) return i;
    ++i;
  }
  return text.size();
}

}  // namespace

Arguments parse_namespace(std::string_view text) {
  Arguments out;
  const size_t open = text.find("Namespace(");
  if (open == std::string_view::npos) return out;
  size_t i = open + 10;
  constexpr size_t kMaxArguments = 1000;
  while (i < text.size() && out.size() < kMaxArguments) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t name_end = i;
    while (name_end < text.size() && identifier_char(text[name_end])) ++name_end;
    if (name_end == i || name_end >= text.size() || text[name_end] != '=') break;
    const size_t value_start = name_end + 1;
    const size_t end = value_end(text, value_start);
    out.emplace_back(std::string(text.substr(i, name_end - i)),
                     std::string(text.substr(value_start, end - value_start)));
    if (end >= text.size() || text[end] != ',') break;
    i = end + 1;
  }
  return out;
}

Arguments parse_command_line(std::string_view text) {
  // Whitespace-separated words; quotes group (no escapes: a log line, not a shell).
  std::vector<std::string> words;
  constexpr size_t kMaxWords = 2000;
  for (size_t i = 0; i < text.size() && words.size() < kMaxWords;) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size()) break;
    std::string word;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') {
      if (text[i] == '"' || text[i] == '\'') {
        const char quote = text[i++];
        while (i < text.size() && text[i] != quote) word.push_back(text[i++]);
        if (i < text.size()) ++i;
      } else {
        word.push_back(text[i++]);
      }
    }
    words.push_back(std::move(word));
  }
  size_t script = words.size();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() > 3 && w.compare(w.size() - 3, 3, ".py") == 0 && w.rfind("--", 0) != 0) {
      script = i;
      break;
    }
  }
  Arguments out;
  for (size_t i = script + 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() < 3 || w.rfind("--", 0) != 0) continue;
    std::string name = w.substr(2);
    if (const size_t equals = name.find('='); equals != std::string::npos) {
      out.emplace_back(name.substr(0, equals), name.substr(equals + 1));
      continue;
    }
    if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
      out.emplace_back(std::move(name), words[++i]);
    } else {
      out.emplace_back(std::move(name), "True");
    }
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> parse_field_line(std::string_view text) {
  static const RE2 kField(R"(^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*?),?\s*$)", quiet());
  std::string name, value;
  if (!RE2::FullMatch(text, kField, &name, &value)) return std::nullopt;
  return std::make_pair(std::move(name), std::move(value));
}

std::optional<NamedConfig> named_config_file(std::string_view text) {
  // rich's handler may print the source (`train_util.py:4618`) after the message.
  static const RE2 kSettings(R"(Loading settings from (\S+?)\.\.\.(?:\s|$))", quiet());
  static const RE2 kDataset(R"(Load(?:ing)? dataset config from:? (\S+))", quiet());
  std::string path;
  if (text.find("Load") == std::string_view::npos) return std::nullopt;
  if (RE2::PartialMatch(text, kSettings, &path)) return NamedConfig{path, false};
  if (RE2::PartialMatch(text, kDataset, &path)) return NamedConfig{path, true};
  return std::nullopt;
}

const std::vector<std::string_view>& printed_argument_samples() {
  static const std::vector<std::string_view> kSamples = {
      "Namespace(pretrained_model_name_or_path='black-forest-labs/FLUX.1-dev', resolution=1024, "
      "train_batch_size=4, gradient_checkpointing=False, validation_prompt='a photo, of sks', "
      "mixed_precision='bf16', use_8bit_adam=False, lr_scheduler='constant')",
      "per_device_train_batch_size=8,",
      "2025-01-04 10:21:33 INFO     Loading settings from /data/cfg/flux_lora.toml...   "
      "train_util.py:4618",
      "INFO     Loading dataset config from /data/cfg/dataset.toml     train_network.py:304",
      "+ accelerate launch --mixed_precision bf16 sdxl_train_network.py --train_batch_size 4 "
      "--resolution \"1024,1024\" --gradient_checkpointing --output_name my_lora",
  };
  return kSamples;
}

}  // namespace oomtriage::parsers
