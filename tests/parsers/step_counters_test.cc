// tests/parsers/step_counters_test.cc: every counter row matches its samples and reads the
// right numbers; near misses (sample counts, config keys, an epoch save, an old save removed)
// match nothing.
#include "parsers/step_counters.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace oomtriage::parsers;

TEST_SUITE("parsers::step_counters") {
  TEST_CASE("every row has samples and each sample matches its row or one before it") {
    std::set<std::string_view> names;
    for (const CounterPattern& pattern : counter_patterns()) {
      CAPTURE(pattern.name);
      CHECK(names.insert(pattern.name).second);
      REQUIRE_FALSE(pattern.samples.empty());
      for (std::string_view sample : pattern.samples) {
        CAPTURE(sample);
        CHECK(may_be_counter(sample));
        const auto counter = match_counter(sample);
        REQUIRE(counter);
        CHECK(counter->kind == pattern.kind);
      }
    }
  }

  TEST_CASE("near misses are no counters") {
    for (std::string_view line : counter_near_misses()) {
      CAPTURE(line);
      CHECK_FALSE(match_counter(line));
    }
  }

  TEST_CASE("numbers and epochs") {
    auto c = match_counter("[Epoch 1/10][Iter 200/1000] loss: 0.1234");
    REQUIRE(c);
    CHECK(c->kind == CounterKind::kPerEpoch);
    CHECK(c->n == 200);
    CHECK(c->total == 1000);
    CHECK(c->first_epoch() == true);  // counted from 1
    c = match_counter("Epoch: [0][ 200/5005]\tTime  0.512");
    REQUIRE(c);
    CHECK(c->first_epoch() == true);  // counted from 0
    c = match_counter("Epoch: [2][ 200/5005]\tTime  0.512");
    REQUIRE(c);
    CHECK(c->first_epoch() == false);
    c = match_counter("[2,  2000] loss: 1.9");
    REQUIRE(c);
    CHECK(c->first_epoch() == false);  // CIFAR's tutorial counts epochs from 1
    c = match_counter("iter 4200: loss 1.2345, time 120.00ms, mfu 31.00%");
    REQUIRE(c);
    CHECK(c->kind == CounterKind::kGlobal);
    CHECK(c->n == 4200);
    c = match_counter("Saved checkpoint to output/my_lora/my_lora_000000500.safetensors");
    REQUIRE(c);
    CHECK(c->kind == CounterKind::kSaveName);
    CHECK(c->n == 500);
    c = match_counter("minibatch 130, loss 0.5213");
    REQUIRE(c);
    CHECK(c->kind == CounterKind::kBatches);  // a step unless the log shows a later epoch
    CHECK(c->n == 130);
    c = match_counter("epoch 3, minibatch 130/500, loss 0.52");
    REQUIRE(c);
    CHECK(c->kind == CounterKind::kPerEpoch);
    CHECK(c->first_epoch() == false);
    c = match_counter("It 3 times slower, the loss");
    CHECK_FALSE(c);
    c = match_counter("epoch 3/10");
    REQUIRE(c);
    CHECK(c->kind == CounterKind::kEpoch);
    CHECK(c->first_epoch() == false);
  }

  TEST_CASE("every counter regex compiles") {
    const auto compiled = counter_patterns_ok();
    CHECK_MESSAGE(compiled, (compiled ? "" : compiled.error().message));
  }
}
