// tests/triage/fleet_correction_test.cc
//
// The fleet's correction on made-up histories: none -> factor 1; OOMs above the prediction raise
// it, completed runs under a smaller card lower it; never outside its bounds; fewer than three
// runs change nothing; a card's own runs are used when there are enough.
#include "triage/fleet_correction.h"

#include <doctest/doctest.h>

using namespace oomtriage;
using triage::FleetRun;

namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

FleetRun oom(uint64_t predicted, uint64_t need, std::string family = "flux1-dev") {
  return {.family = std::move(family),
          .predicted_peak = predicted,
          .oom = true,
          .oom_phase = parsers::Phase::kTrainStep,
          .need_bytes = need,
          .card_bytes = 24 * kGiB};
}

FleetRun completed(uint64_t predicted, uint64_t card, std::string family = "flux1-dev") {
  return {.family = std::move(family), .predicted_peak = predicted, .card_bytes = card};
}

FleetRun measured(uint64_t predicted, uint64_t peak) {
  return {.family = "flux1-dev", .predicted_peak = predicted, .measured_peak = peak};
}

}  // namespace

TEST_CASE("no history: factor 1, no runs") {
  const auto c = triage::fleet_correction({}, "flux1-dev");
  CHECK(c.factor == 1.0);
  CHECK(c.runs == 0);
  CHECK(triage::describe(c) == "no fleet history for flux1-dev on this fleet");
}

TEST_CASE("OOMs that needed more than predicted raise the factor (median of the ratios)") {
  const std::vector<FleetRun> history = {oom(20 * kGiB, 22 * kGiB), oom(20 * kGiB, 24 * kGiB),
                                         oom(10 * kGiB, 11 * kGiB),
                                         oom(10 * kGiB, 30 * kGiB, "sdxl")};
  const auto c = triage::fleet_correction(history, "flux1-dev");
  CHECK(c.runs == 3);
  CHECK(c.factor == doctest::Approx(1.1));
  CHECK(triage::describe(c) == "adjusted +10% from 3 runs of flux1-dev on this fleet");
}

TEST_CASE("the factor stays within its bounds") {
  const std::vector<FleetRun> high = {oom(kGiB, 10 * kGiB), oom(kGiB, 12 * kGiB),
                                      oom(kGiB, 9 * kGiB)};
  CHECK(triage::fleet_correction(high, "flux1-dev").factor == triage::kMaxFactor);
  const std::vector<FleetRun> low = {measured(10 * kGiB, kGiB), measured(10 * kGiB, 2 * kGiB),
                                     measured(10 * kGiB, kGiB)};
  CHECK(triage::fleet_correction(low, "flux1-dev").factor == triage::kMinFactor);
}

TEST_CASE("fewer than three runs leave the model as it is") {
  const std::vector<FleetRun> history = {oom(10 * kGiB, 14 * kGiB), oom(10 * kGiB, 14 * kGiB)};
  const auto c = triage::fleet_correction(history, "flux1-dev");
  CHECK(c.factor == 1.0);
  CHECK(c.runs == 2);
  CHECK(triage::describe(c) == "no adjustment (2 runs of flux1-dev on this fleet, 3 needed)");
}

TEST_CASE("completed runs bound the factor from above") {
  // Predicted at 30 GiB, yet three runs completed on 24 GiB cards: the model over-predicts.
  const std::vector<FleetRun> history = {completed(30 * kGiB, 24 * kGiB),
                                         completed(30 * kGiB, 24 * kGiB),
                                         completed(30 * kGiB, 24 * kGiB)};
  const auto c = triage::fleet_correction(history, "flux1-dev");
  CHECK(c.runs == 3);
  CHECK(c.factor < 0.8);
  CHECK(c.factor >= triage::kMinFactor);
  // Completed runs well under their card say nothing against a factor of 1.
  const std::vector<FleetRun> roomy = {completed(10 * kGiB, 80 * kGiB),
                                       completed(10 * kGiB, 80 * kGiB),
                                       completed(10 * kGiB, 80 * kGiB)};
  CHECK(triage::fleet_correction(roomy, "flux1-dev").factor == 1.0);
}

TEST_CASE("a card's own runs are used when there are enough of them") {
  std::vector<FleetRun> history = {oom(10 * kGiB, 12 * kGiB), oom(10 * kGiB, 12 * kGiB),
                                   oom(10 * kGiB, 12 * kGiB)};
  for (int i = 0; i < 3; ++i) history.push_back(measured(10 * kGiB, 10 * kGiB));
  const auto on_24 = triage::fleet_correction(history, "flux1-dev", 24 * kGiB);
  CHECK(on_24.factor == doctest::Approx(1.2));
  CHECK(on_24.scope == "flux1-dev on 24 GiB cards on this fleet");
  const auto on_48 = triage::fleet_correction(history, "flux1-dev", 48 * kGiB);
  CHECK(on_48.scope == "flux1-dev on this fleet");
  CHECK(on_48.runs == 6);
}

TEST_CASE("an OOM's need from its stored figures") {
  parsers::OomEvent event;
  event.figures.tried_to_allocate_bytes = 1073741824;
  event.figures.total_capacity_bytes = 25769803776;
  event.figures.free_bytes = 0;
  event.figures.this_process_in_use_bytes = 24696061952;
  CHECK(triage::oom_need_bytes(event) == 24696061952ull + 1073741824ull);
  parsers::OomEvent request_only;
  request_only.figures.tried_to_allocate_bytes = 5;
  CHECK_FALSE(triage::oom_need_bytes(request_only));
  CHECK_FALSE(triage::oom_need_bytes(parsers::OomEvent{}));
}

TEST_CASE("one measured peak is enough: a measurement, not a bound") {
  const auto one = triage::fleet_correction({measured(10 * kGiB, 8 * kGiB)}, "flux1-dev");
  CHECK(one.factor == doctest::Approx(0.8));
  CHECK(one.runs == 1);
  CHECK(one.measured == 1);
  CHECK(triage::describe(one) ==
        "adjusted -20% from 1 run of flux1-dev on this fleet, 1 with a measured peak");
  // Two crashes alone are still too few.
  const auto crashes =
      triage::fleet_correction({oom(10 * kGiB, 12 * kGiB), oom(10 * kGiB, 12 * kGiB)}, "flux1-dev");
  CHECK(crashes.factor == 1.0);
}
