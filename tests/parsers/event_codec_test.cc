// tests/parsers/event_codec_test.cc: the stored event's codec. Every event the analyzer finds in
// the golden logs reads back as itself and writes the same bytes again; rows stored before a
// field existed still read; a row that does not decode says which field and why.
#include "parsers/event_codec.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "parsers/log_analyzer.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace oomtriage;
using namespace oomtriage::parsers;

namespace {

OomEvent every_field() {
  OomEvent e;
  e.kind = OomKind::kHip;
  e.recovered = true;
  e.phase = Phase::kCacheLatents;
  e.step = 12;
  e.total_steps = 3000;
  e.figures.gpu_index = 1;
  e.figures.tried_to_allocate_bytes = 1ull << 30;
  e.figures.total_capacity_bytes = 24ull << 30;
  e.figures.free_bytes = 0;
  e.figures.allocated_by_pytorch_bytes = 20ull << 30;
  e.figures.reserved_unallocated_bytes = 512ull << 20;
  e.figures.reserved_total_bytes = 21ull << 30;
  e.figures.this_process_in_use_bytes = 22ull << 30;
  e.figures.other_processes = {{4242, 1ull << 30}, {7, 0}};
  e.line = 67;
  e.offset = 123456;
  e.exception = "torch.OutOfMemoryError";
  e.message = "HIP out of memory. \xff";  // not UTF-8: stored replaced, never thrown on
  e.phase_evidence = Evidence{60, EvidenceSource::kMarker, "Caching latents"};
  e.step_evidence = Evidence{66, EvidenceSource::kBar, "12/3000"};
  e.revision = 2;
  return e;
}

std::string error_of(std::string_view text) {
  const auto decoded = decode_event(text);
  REQUIRE_FALSE(decoded);
  CHECK(decoded.error().code == ErrorCode::kBadInput);
  return decoded.error().message;
}

}  // namespace

TEST_SUITE("parsers::event codec") {
  TEST_CASE("every event of the golden logs reads back as itself and writes the same bytes") {
    const fs::path dir = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "logs";
    int events = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".log") continue;
      CAPTURE(entry.path().filename().string());
      for (const OomEvent& event : analyze_log(testing::slurp(entry.path())).events) {
        const std::string text = encode_event_text(event);
        const auto decoded = decode_event(text);
        REQUIRE(decoded);
        CHECK(*decoded == event);
        CHECK(encode_event_text(*decoded) == text);
        ++events;
      }
    }
    CHECK(events >= 17);  // the golden logs hold 17 incidents today
  }

  TEST_CASE("every field, in the contract's order - an amendment says its revision") {
    OomEvent e = every_field();
    const std::string text = encode_event_text(e);
    CHECK(text.rfind(R"({"kind":"hip","recovered":true,"phase":"cache_latents","step":12,)", 0) ==
          0);
    CHECK(text.find(R"("other_processes":[{"pid":4242,"bytes":1073741824},{"pid":7,"bytes":0}])") !=
          std::string::npos);
    CHECK(text.find("\"message\":\"HIP out of memory. \xEF\xBF\xBD\"") != std::string::npos);
    CHECK(text.ends_with(
        R"("step_evidence":{"line":66,"source":"bar","text":"12/3000"},"revision":2})"));
    const auto decoded = decode_event(text);
    REQUIRE(decoded);
    e.message = "HIP out of memory. \xEF\xBF\xBD";
    CHECK(*decoded == e);

    // A whole-file verdict (revision 0) has no revision key; absent figures are null, never 0.
    const std::string first = encode_event_text(OomEvent{});
    CHECK(first.find("revision") == std::string::npos);
    CHECK(first.find(R"("free_bytes":null)") != std::string::npos);
    CHECK(*decode_event(first) == OomEvent{});
  }

  TEST_CASE("a row stored before the evidence and the revision existed still reads") {
    const auto decoded = decode_event(
        R"({"kind":"cuda","recovered":false,"phase":"sampling","step":500,"total_steps":3000,)"
        R"("gpu_index":0,"tried_to_allocate_bytes":1073741824,"other_processes":[],"line":67,)"
        R"("offset":4096,"exception":null,"message":"CUDA out of memory."})");
    REQUIRE(decoded);
    CHECK(decoded->phase == Phase::kSampling);
    CHECK(decoded->step == 500);
    CHECK(decoded->figures.tried_to_allocate_bytes == 1073741824u);
    CHECK_FALSE(decoded->figures.free_bytes);
    CHECK_FALSE(decoded->phase_evidence);
    CHECK(decoded->revision == 0);
    CHECK(decoded->offset == 4096u);
  }

  TEST_CASE("a row that does not decode says which field and why") {
    CHECK(error_of("{not json") == "stored event: not JSON");
    CHECK(error_of("[1, 2]") == "stored event: not an object");
    CHECK(error_of(R"({"phase":"sampling"})") == R"(stored event: "kind" is not there)");
    CHECK(error_of(R"({"kind":"quantum","phase":"sampling"})") ==
          R"(stored event: "kind" is not a known name)");
    CHECK(error_of(R"({"kind":"cuda","phase":"training_step"})") ==
          R"(stored event: "phase" is not a known name)");
    CHECK(error_of(R"({"kind":"cuda","phase":"sampling","step":"500"})") ==
          R"(stored event: "step" is not a whole number)");
    CHECK(error_of(R"({"kind":"cuda","phase":"sampling","free_bytes":-1})") ==
          R"(stored event: "free_bytes" is not a whole number of 0 or more)");
    CHECK(error_of(R"({"kind":"cuda","phase":"sampling","other_processes":[{"pid":"x"}]})") ==
          R"(stored event other_processes: "pid" is not a whole number)");
    CHECK(error_of(R"({"kind":"cuda","phase":"sampling","step_evidence":{"source":"guess"}})") ==
          R"(stored event step_evidence: "source" is not a known name)");
    CHECK(error_of(R"({"kind":"cuda","phase":"sampling","recovered":"no"})") ==
          R"(stored event: "recovered" is not true or false)");
  }
}
