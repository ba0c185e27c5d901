// tests/support/hostile_configs.h
//
// The hostile config files of docs/reliability.md ("Files a user controls"), made in memory: each
// must be refused with a one-line message by the pure readers (tests/parsers/
// bounded_document_test.cc) and by the real binary (tests/daemon/user_file_test.cc), never crash
// it or hold it. scripts/fuzz.sh writes the same shapes into the fuzzers' seed corpora.
#pragma once

#include <string>

namespace oomtriage::testing {

// An AI Toolkit .job_config.json whose config.process[0] is `depth` nested arrays (1,000,000:
// 2 MB, which overflowed the stack of every recursive walker).
inline std::string deep_json_config(size_t depth = 1000000) {
  return R"({"job": "extension", "config": {"name": "deep", "process": [)" +
         std::string(depth, '[') + std::string(depth, ']') + "]}}\n";
}

// A config.yaml with `depth` nested flow sequences in config.process[0].
inline std::string deep_yaml_flow_config(size_t depth = 100000) {
  return "job: extension\nconfig:\n  name: deep\n  process:\n    - " + std::string(depth, '[') +
         std::string(depth, ']') + "\n";
}

// A config.yaml nested `depth` mappings deep, in block style (two spaces a level).
inline std::string deep_yaml_block_config(size_t depth = 200) {
  std::string text = "job: extension\nconfig:\n  name: deep\n  process:\n    - train:\n";
  for (size_t i = 0; i < depth; ++i) text += std::string(8 + 2 * i, ' ') + "k:\n";
  return text + std::string(8 + 2 * depth, ' ') + "v: 1\n";
}

// "Billion laughs": `levels` anchors of `width` aliases of the one before, the last one used as
// config.process[0]: width^levels nodes once expanded (10^9 for 9 levels of 10), a few hundred
// bytes as text.
inline std::string billion_laughs_yaml(int levels = 9, int width = 10) {
  std::string text = "lol0: &lol0 [";
  for (int i = 0; i < width; ++i) text += i ? ", lol" : "lol";
  text += "]\n";
  for (int level = 1; level <= levels; ++level) {
    const std::string name = "lol" + std::to_string(level);
    text += name + ": &" + name + " [";
    for (int i = 0; i < width; ++i) text += (i ? ", *lol" : "*lol") + std::to_string(level - 1);
    text += "]\n";
  }
  return text + "job: extension\nconfig:\n  name: laughs\n  process:\n    - train: *lol" +
         std::to_string(levels) + "\n";
}

// A kohya TOML whose table header has `depth` dotted segments.
inline std::string deep_toml_config(size_t depth = 100000) {
  std::string header = "[a";
  for (size_t i = 1; i < depth; ++i) header += ".a";
  return "train_batch_size = 1\n" + header + "]\nx = 1\n";
}

}  // namespace oomtriage::testing
