// tests/daemon/human_units_test.cc: sizes are printed in the allocator's notation, each unit from
// just past the one below it, and parsers/sizes.h reads them back; a step says what is known.
#include "daemon/common/human_units.h"

#include <doctest/doctest.h>

#include "parsers/sizes.h"

using namespace oomtriage;

TEST_SUITE("daemon::human_units") {
  TEST_CASE("a size takes the next unit only past 1024 of the one below") {
    CHECK(daemon::format_bytes(0) == "0 bytes");
    CHECK(daemon::format_bytes(1024) == "1024 bytes");
    CHECK(daemon::format_bytes(1025) == "1.00 KiB");
    CHECK(daemon::format_bytes(uint64_t{1} << 20) == "1024.00 KiB");
    CHECK(daemon::format_bytes((uint64_t{1} << 20) + 1) == "1.00 MiB");
    CHECK(daemon::format_bytes(uint64_t{3} << 29) == "1.50 GiB");
    CHECK(daemon::format_bytes(uint64_t{80} << 30) == "80.00 GiB");
  }

  TEST_CASE("a printed size reads back as the bytes it rounds") {
    for (const uint64_t bytes : {uint64_t{512}, uint64_t{3} << 19, uint64_t{812} << 20,
                                 uint64_t{3} << 29, uint64_t{24} << 30}) {
      CAPTURE(bytes);
      CHECK(parsers::parse_size(daemon::format_bytes(bytes)) == bytes);
    }
  }

  TEST_CASE("a step says its total when known and says so when the step is not") {
    CHECK(daemon::step_text(500, 3000) == "step 500/3000");
    CHECK(daemon::step_text(500, std::nullopt) == "step 500");
    CHECK(daemon::step_text(std::nullopt, 3000) == "step unknown");
  }
}
