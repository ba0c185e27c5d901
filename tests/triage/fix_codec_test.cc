// tests/triage/fix_codec_test.cc: the fix's codec. A fix with typed changes (a list, null, text,
// a change written to another file) writes the contract's JSON and reads back as itself; stored
// fixes read back write the same bytes; a row that does not decode says why.
#include "triage/fix_codec.h"

#include <doctest/doctest.h>

using namespace oomtriage;
using parsers::TargetKind;
using triage::ConfigChange;
using triage::Fix;

namespace {

Fix sample_fix() {
  Fix fix;
  fix.id = "lower_resolution";
  fix.rank = 2;
  fix.title = "Train at 768 px";
  fix.why = "the 1024 px bucket needs 3 GiB more";
  fix.check = "the log does not show the batch size";
  fix.cost = "less detail";
  fix.predicted_peak_bytes = 21ull << 30;
  fix.fits = true;
  fix.estimate = "activations scale with pixels";
  fix.confidence = 0.6;
  ConfigChange resolution;
  resolution.path = "resolution";
  resolution.from = nlohmann::json::array({512, 1024});
  resolution.to = nlohmann::json::array({512, 768});
  resolution.kind = TargetKind::kToml;
  resolution.file = "/jobs/a/dataset.toml";
  resolution.table = "datasets[0]";
  ConfigChange flag;
  flag.path = "--cache_latents";
  flag.from = nullptr;
  flag.to = true;
  flag.kind = TargetKind::kArgs;  // another target than the fix's: the change names its own
  ConfigChange env;
  env.path = "env.PYTORCH_CUDA_ALLOC_CONF";
  env.to = "expandable_segments:True";
  env.kind = TargetKind::kEnv;
  fix.changes = {resolution, flag, env};
  return fix;
}

void check_same(const Fix& a, const Fix& b) {
  CHECK(a.id == b.id);
  CHECK(a.rank == b.rank);
  CHECK(a.title == b.title);
  CHECK(a.why == b.why);
  CHECK(a.check == b.check);
  CHECK(a.cost == b.cost);
  CHECK(a.predicted_peak_bytes == b.predicted_peak_bytes);
  CHECK(a.fits == b.fits);
  CHECK(a.estimate == b.estimate);
  CHECK(a.confidence == b.confidence);
  REQUIRE(a.changes.size() == b.changes.size());
  for (size_t i = 0; i < a.changes.size(); ++i) {
    CAPTURE(i);
    CHECK(a.changes[i].path == b.changes[i].path);
    CHECK(a.changes[i].from == b.changes[i].from);
    CHECK(a.changes[i].to == b.changes[i].to);
    CHECK(a.changes[i].kind == b.changes[i].kind);
    CHECK(a.changes[i].file == b.changes[i].file);
    CHECK(a.changes[i].table == b.changes[i].table);
  }
}

std::string error_of(std::string_view text) {
  const auto decoded = triage::decode_fixes(text);
  REQUIRE_FALSE(decoded);
  CHECK(decoded.error().code == ErrorCode::kBadInput);
  return decoded.error().message;
}

}  // namespace

TEST_SUITE("triage::fix codec") {
  TEST_CASE("a fix writes the contract's JSON, with typed values, and reads back as itself") {
    const Fix fix = sample_fix();
    const std::string text = triage::encode_fixes_text({fix});
    CHECK(
        text ==
        R"([{"id":"lower_resolution","rank":2,"title":"Train at 768 px",)"
        R"("why":"the 1024 px bucket needs 3 GiB more","check":"the log does not show the batch )"
        R"(size","target":{"kind":"toml","path":"/jobs/a/dataset.toml"},"changes":[)"
        R"({"path":"resolution","from":[512,1024],"to":[512,768],"table":"datasets[0]"},)"
        R"({"path":"--cache_latents","from":null,"to":true,"target":{"kind":"args","path":null}},)"
        R"({"path":"env.PYTORCH_CUDA_ALLOC_CONF","from":null,"to":"expandable_segments:True",)"
        R"("target":{"kind":"env","path":null}}],"cost":"less detail",)"
        R"("predicted_peak_bytes":22548578304,"fits":true,)"
        R"("estimate":"activations scale with pixels","confidence":0.6}])");
    const auto decoded = triage::decode_fixes(text);
    REQUIRE(decoded);
    REQUIRE(decoded->size() == 1);
    check_same(decoded->front(), fix);
    CHECK(triage::encode_fixes_text(*decoded) == text);
  }

  TEST_CASE("a fix that changes nothing is written to ops, and its empty texts are null") {
    Fix fix;
    fix.id = "free_gpu";
    fix.rank = 1;
    const std::string text = triage::encode_fix(fix).dump();
    CHECK(text == R"({"id":"free_gpu","rank":1,"title":"","why":"","check":null,)"
                  R"("target":{"kind":"ops","path":null},"changes":[],"cost":"",)"
                  R"("predicted_peak_bytes":null,"fits":null,"estimate":null,"confidence":0.0})");
    const auto decoded = triage::decode_fix(text);
    REQUIRE(decoded);
    CHECK(triage::encode_fix(*decoded).dump() == text);
  }

  TEST_CASE("a fix stored with fewer fields reads, its changes in the fix's target") {
    const auto decoded = triage::decode_fixes(
        R"([{"id":"lower_batch_size","rank":1,"target":{"kind":"yaml","path":"/c.yaml"},)"
        R"("changes":[{"path":"train.batch_size","from":2,"to":1}]}])");
    REQUIRE(decoded);
    REQUIRE(decoded->at(0).changes.size() == 1);
    const ConfigChange& change = decoded->at(0).changes[0];
    CHECK(change.to == 1);
    CHECK(change.kind == TargetKind::kYaml);
    CHECK(change.file == "/c.yaml");
    CHECK(decoded->at(0).title.empty());
    CHECK_FALSE(decoded->at(0).fits);
  }

  TEST_CASE("stored fixes that do not decode say why") {
    CHECK(error_of("{not json") == "stored fixes: not a JSON list");
    CHECK(error_of(R"({"id":"x"})") == "stored fixes: not a JSON list");
    CHECK(error_of(R"([{"rank":1}])") == R"(stored fix: no "id")");
    CHECK(error_of(R"([{"id":"x","rank":"first"}])") ==
          R"(stored fix x: "rank" has the wrong type)");
    CHECK(error_of(R"([{"id":"x","changes":[{"to":1}]}])") ==
          R"(stored fix x: a change without a "path")");
    CHECK(error_of(R"([{"id":"x","target":{"kind":"ini"}}])") ==
          R"(stored fix x: unknown target kind "ini")");
  }

  TEST_CASE("a value as people read it") {
    CHECK(triage::value_text(true) == "true");
    CHECK(triage::value_text("bf16") == "\"bf16\"");
    CHECK(triage::value_text(nlohmann::json::array({512, 768})) == "[512,768]");
    CHECK(triage::value_text(nullptr) == "null");
  }
}
