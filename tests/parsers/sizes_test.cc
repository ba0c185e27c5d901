// tests/parsers/sizes_test.cc: size strings from allocator messages to bytes.
#include "parsers/sizes.h"

#include <doctest/doctest.h>

using oomtriage::parsers::parse_size;

TEST_SUITE("parsers::sizes") {
  TEST_CASE("binary units with two decimals round half up") {
    CHECK(parse_size("1.50 GiB") == 1610612736u);
    CHECK(parse_size("1.70 GiB") == 1825361101u);  // 1825361100.8
    CHECK(parse_size("743.50 KiB") == 761344u);
    CHECK(parse_size("1024.00 KiB") == 1048576u);
  }
  TEST_CASE("MPS KB/MB/GB are binary too") {
    CHECK(parse_size("600.15 MB") == 629302886u);
    CHECK(parse_size("33.48 GB") == 35948876268u);
  }
  TEST_CASE("bytes are integers and 0 is a real zero") {
    CHECK(parse_size("0 bytes") == 0u);
    CHECK(parse_size("1024 bytes") == 1024u);
  }
  TEST_CASE("the unit's case is ignored: a re-cased message keeps its figures") {
    CHECK(parse_size("20.00 mib") == 20971520u);
    CHECK(parse_size("1.50 GIB") == 1610612736u);
    CHECK(parse_size("576.00 kib") == 589824u);
    CHECK(parse_size("600.15 mb") == 629302886u);
    CHECK(parse_size("0 BYTES") == 0u);
    CHECK_FALSE(parse_size("1.00 gibs"));
  }
  TEST_CASE("a hard wrap that ate the space still parses") {
    CHECK(parse_size("18.33GiB") == 19681687634u);
  }
  TEST_CASE("NVML's not-available sentinel saturates instead of overflowing") {
    CHECK(parse_size("17179869184.00 GiB") == UINT64_MAX);
  }
  TEST_CASE("incomplete or foreign sizes are rejected") {
    CHECK_FALSE(parse_size("8.0"));
    CHECK_FALSE(parse_size("GiB"));
    CHECK_FALSE(parse_size("12.5 parsecs"));
    CHECK_FALSE(parse_size(""));
    CHECK_FALSE(parse_size("1."));
  }
}
