// tests/parsers/bounded_document_test.cc
//
// The limits on documents a user controls (parsers/bounded_document.h): each hostile config (a
// million nested JSON arrays, YAML nested deep in flow and in block style, a billion laughs,
// aliases chained deeper than the limit, a long string aliased many times, a TOML header of
// many dotted segments, a document past the size limit) is refused with its one-line message,
// quickly, by the pure readers of every trainer; real configs and brackets inside strings are not.
#include "parsers/bounded_document.h"

#include <doctest/doctest.h>

#include <chrono>

#include "parsers/job_config.h"
#include "parsers/native_config.h"
#include "tests/support/hostile_configs.h"
#include "triage/config_patch.h"

using namespace oomtriage::parsers;
using namespace oomtriage::testing;

namespace {

// Seconds since `start`: every refusal here is a linear scan, well under a second.
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_SUITE("parsers::bounded_document") {
  TEST_CASE("the limits are written as the messages say them") {
    CHECK(byte_size_text(kMaxDocumentBytes) == "4 MiB");
    CHECK(byte_size_text(64 << 10) == "64 KiB");
    CHECK(byte_size_text(100) == "100 bytes");
    CHECK(size_ok(std::string(kMaxDocumentBytes, ' '), "job.yaml"));
    const auto big = size_ok(std::string(kMaxDocumentBytes + 1, ' '), "job.yaml");
    REQUIRE_FALSE(big);
    CHECK(big.error().code == oomtriage::ErrorCode::kBadInput);
    CHECK(big.error().message == "job.yaml: refused: larger than 4 MiB");
  }

  TEST_CASE("a million nested arrays in config.process[0] are refused before any parser") {
    const auto start = std::chrono::steady_clock::now();
    const std::string text = deep_json_config();
    CHECK(text.size() > 2000000);
    const auto load = parse_job_config(text, ConfigFormat::kJson, "job.json");
    REQUIRE_FALSE(load);
    CHECK(load.error().message == "job.json:1: nested deeper than 64 levels");
    CHECK(parse_json(text, "job.json").error().message ==
          "job.json:1: nested deeper than 64 levels");
    CHECK(parse_ordered_json(text, "x").error().message == "x:1: nested deeper than 64 levels");
    // The printed process config and every other trainer's JSON go through the same reader.
    CHECK(parse_job_config(text, ConfigFormat::kPrintedProcess, "log.txt").error().message ==
          "log.txt:1: nested deeper than 64 levels");
    for (Trainer trainer : {Trainer::kOneTrainer, Trainer::kSimpleTuner, Trainer::kTransformers}) {
      const auto native = read_native_config(trainer, {{TargetKind::kJson, "config.json", text}});
      REQUIRE_FALSE(native);
      CHECK(native.error().message == "config.json:1: nested deeper than 64 levels");
    }
    // AI Toolkit UI's stored config, patched by the healer.
    CHECK(oomtriage::triage::patch_json(text, {}).error().message ==
          "the config:1: nested deeper than 64 levels");
    CHECK(seconds_since(start) < 5);
  }

  TEST_CASE("JSON nesting: the line is named, strings do not count, the limit itself is fine") {
    CHECK(json_nesting_ok(std::string(64, '[') + std::string(64, ']')));
    CHECK(json_nesting_ok(std::string(65, '[')).error().message ==
          "1: nested deeper than 64 levels");
    CHECK(json_nesting_ok("{\n\"a\":\n" + std::string(70, '[')).error().message ==
          "3: nested deeper than 64 levels");
    // Brackets inside strings, escaped quotes included, are text.
    const std::string in_string =
        "{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
    CHECK(json_nesting_ok(in_string));
    CHECK(parse_json(in_string, "s.json"));
    CHECK(json_nesting_ok("[" + std::string(10, ']') + std::string(64, '[')));
    CHECK(parse_json("{nope", "j.json").error().message == "j.json: not valid JSON");
  }

  TEST_CASE("YAML nested deep in flow or block style is refused with its line") {
    const auto start = std::chrono::steady_clock::now();
    auto flow = parse_job_config(deep_yaml_flow_config(), ConfigFormat::kYaml, "job.yaml");
    REQUIRE_FALSE(flow);
    CHECK(flow.error().message == "job.yaml:5: nested deeper than 64 levels");
    auto block = parse_job_config(deep_yaml_block_config(), ConfigFormat::kYaml, "job.yaml");
    REQUIRE_FALSE(block);
    CHECK(block.error().message.rfind("job.yaml:", 0) == 0);
    CHECK(block.error().message.find(": nested deeper than 64 levels") != std::string::npos);
    // Sixty levels of block mappings at two spaces a level still read.
    CHECK(yaml_to_json(deep_yaml_block_config(55), "job.yaml"));
    CHECK(seconds_since(start) < 5);
  }

  TEST_CASE("a billion laughs stops at the node budget, quickly and with little memory") {
    const auto start = std::chrono::steady_clock::now();
    const std::string text = billion_laughs_yaml();
    CHECK(text.size() < 1000);
    const auto load = parse_job_config(text, ConfigFormat::kYaml, "job.yaml");
    REQUIRE_FALSE(load);
    CHECK(load.error().message == "job.yaml: refused: YAML aliases expand past 100000 nodes");
    std::map<std::string, int> lines;
    CHECK(yaml_to_json(text, "job.yaml", &lines).error().message ==
          "job.yaml: refused: YAML aliases expand past 100000 nodes");
    CHECK(lines.size() <= kMaxYamlNodes + 1);
    CHECK(seconds_since(start) < 5);
    // Aliases a config really uses (a dataset reused) are read as before.
    const auto reused = parse_job_config(
        "config:\n  name: x\n  process:\n    - datasets:\n        - &d {resolution: [512], "
        "folder_path: /a}\n        - *d\n",
        ConfigFormat::kYaml, "job.yaml");
    REQUIRE(reused);
    CHECK(reused->datasets.size() == 2);
  }

  TEST_CASE("aliases chained deeper than the limit, and a long string aliased, are refused") {
    // Each anchor holds the one before: 100 levels through aliases, none deep as text.
    std::string chain = "a0: &a0 x\n";
    for (int i = 1; i <= 100; ++i) {
      chain += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" +
               std::to_string(i - 1) + "]\n";
    }
    const auto deep = yaml_to_json(chain, "job.yaml");
    REQUIRE_FALSE(deep);
    CHECK(deep.error().message.find(": nested deeper than 64 levels") != std::string::npos);
    // 1 MiB of text used 100 times: 100 MiB once expanded.
    std::string wide = "s: &s " + std::string(1 << 20, 'x') + "\nl: [";
    for (int i = 0; i < 100; ++i) wide += i ? ", *s" : "*s";
    wide += "]\n";
    CHECK(yaml_to_json(wide, "job.yaml").error().message ==
          "job.yaml: refused: YAML expands past 32 MiB");
    // Without aliases, a document of too many nodes says so in its own words.
    std::string many = "[";
    for (int i = 0; i < 120000; ++i) many += "1,";
    many += "1]\n";
    CHECK(yaml_to_json(many, "job.yaml").error().message ==
          "job.yaml: refused: more than 100000 YAML nodes");
  }

  TEST_CASE("a document past the size limit is refused in every format") {
    const std::string big = "# " + std::string(kMaxDocumentBytes, 'x') + "\n";
    CHECK(yaml_to_json(big, "job.yaml").error().message == "job.yaml: refused: larger than 4 MiB");
    CHECK(parse_json(big, "job.json").error().message == "job.json: refused: larger than 4 MiB");
    CHECK(parse_toml(big, "job.toml").error().message == "job.toml: refused: larger than 4 MiB");
    CHECK(read_native_config(Trainer::kSdScripts, {{TargetKind::kToml, "c.toml", big}})
              .error()
              .message == "c.toml: refused: larger than 4 MiB");
    CHECK(parse_job_config(big, ConfigFormat::kYaml, "config.yaml").error().message ==
          "config.yaml: refused: larger than 4 MiB");
  }

  TEST_CASE(
      "TOML: a header of many dotted segments and deep arrays are refused - strings are not") {
    const auto start = std::chrono::steady_clock::now();
    const std::string deep = deep_toml_config();
    CHECK(parse_toml(deep, "c.toml").error().message == "c.toml:2: nested deeper than 64 levels");
    const auto kohya =
        read_native_config(Trainer::kSdScripts, {{TargetKind::kToml, "c.toml", deep}});
    REQUIRE_FALSE(kohya);
    CHECK(kohya.error().message == "c.toml:2: nested deeper than 64 levels");
    // A broken dataset config costs the dataset settings only.
    const auto dataset = read_native_config(
        Trainer::kSdScripts, {{TargetKind::kToml, "c.toml", "train_batch_size = 2\n"},
                              {TargetKind::kToml, "dataset.toml", deep}});
    REQUIRE(dataset);
    CHECK(dataset->batch_size == 2);
    REQUIRE(dataset->problems.size() == 1);
    CHECK(dataset->problems[0].find("dataset.toml:2: nested deeper than 64 levels") == 0);
    CHECK(parse_toml("x = " + std::string(100, '[') + std::string(100, ']') + "\n", "c.toml")
              .error()
              .message == "c.toml:1: nested deeper than 64 levels");
    // Keys under a deep table count its depth.
    std::string header = "[t";
    for (int i = 1; i < 40; ++i) header += ".t";
    std::string key = "k";
    for (int i = 1; i < 40; ++i) key += ".k";
    CHECK(toml_nesting_ok(header + "]\n" + key + " = 1\n").error().message ==
          "2: nested deeper than 64 levels");
    CHECK(toml_nesting_ok(header + "]\nk.k = 1\n"));
    // Dots and brackets in strings, comments, values and multi-line strings are not nesting.
    const std::string quiet =
        "a = \"" + std::string(200, '[') + std::string(200, '.') + "\"\n" + "b = '" +
        std::string(200, '{') + "'\n" + "c = \"\"\"\n" + std::string(200, '[') + "\n\"\"\"\n" +
        "d = '''" + std::string(200, '.') + "'''\n" + "# " + std::string(200, '[') + "\n" +
        "e = [1.5, 2.5, {x.y = 1.0}]\n" + "\"f.g.h\" = 1\n" + "[[arr.of.tables]]\nv = 1\n";
    CHECK(toml_nesting_ok(quiet));
    const auto parsed = parse_toml(quiet, "q.toml");
    REQUIRE(parsed);
    CHECK((*parsed)["e"].as_array()->size() == 3);
    CHECK(seconds_since(start) < 5);
  }

  TEST_CASE("a JSON config of many keys is read in linear time") {
    std::string text = "{";
    for (int i = 0; i < 200000; ++i) text += "\"key" + std::to_string(i) + "\": " + "1,\n";
    text += "\"train_batch_size\": \"two\"}\n";
    const auto start = std::chrono::steady_clock::now();
    const auto load =
        read_native_config(Trainer::kOneTrainer, {{TargetKind::kJson, "c.json", text}});
    CHECK(seconds_since(start) < 10);
    REQUIRE(load);
  }
}
