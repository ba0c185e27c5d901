// tests/parsers/oom_patterns_test.cc: fail2ban's rule: every row has samples, every sample
// matches its own row (and no earlier one), and every near miss matches no row.
#include "parsers/oom_patterns.h"

#include <doctest/doctest.h>

#include <set>

using namespace oomtriage::parsers;

TEST_SUITE("parsers::oom_patterns") {
  TEST_CASE("every pattern has samples and each sample is matched by its own row") {
    std::set<std::string_view> names;
    for (const OomPattern& pattern : oom_patterns()) {
      CAPTURE(pattern.name);
      CHECK(names.insert(pattern.name).second);
      REQUIRE_FALSE(pattern.samples.empty());
      for (std::string_view sample : pattern.samples) {
        CAPTURE(sample);
        CHECK(may_mention_oom(sample));
        const auto match = match_oom(sample);
        REQUIRE(match);
        CHECK(match->pattern->name == pattern.name);
      }
    }
  }
  TEST_CASE("near misses match no row") {
    for (std::string_view line : oom_near_misses()) {
      CAPTURE(line);
      CHECK_FALSE(match_oom(line));
    }
  }
  TEST_CASE("the device word picks the kind") {
    CHECK(match_oom("HIP out of memory. Tried to allocate 2.00 MiB")->kind == OomKind::kHip);
    CHECK(match_oom("XPU out of memory. Tried to allocate 2.00 MiB")->kind == OomKind::kXpu);
    CHECK(match_oom("CUDA out of memory. Tried to allocate 2.00 MiB")->kind == OomKind::kCuda);
    CHECK(match_oom("RuntimeError: HIP error: out of memory")->kind == OomKind::kHip);
  }
  TEST_CASE("the exception class is read from the start of the line") {
    CHECK(exception_class("torch.OutOfMemoryError: CUDA out of memory.") ==
          "torch.OutOfMemoryError");
    CHECK(exception_class("RuntimeError: CUDA error: out of memory") == "RuntimeError");
    CHECK(exception_class("OutOfMemoryError                 Traceback (most recent call last)") ==
          "OutOfMemoryError");
    CHECK_FALSE(exception_class("Error running job: CUDA out of memory."));
    CHECK_FALSE(exception_class("Exception in main training loop: x"));
  }
}
