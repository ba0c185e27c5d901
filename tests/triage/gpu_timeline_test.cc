// tests/triage/gpu_timeline_test.cc
//
// The GPU memory timeline on made-up runs: samples merge into one point per step window and
// phase; loading before the first step is windowed by seconds; a long run stays within its bound
// with its peak kept; phases that alternate every window still fit; the JSON form round-trips and
// refuses damage. The near-OOM watch: one warning for a run that climbs to 96%, none below the
// share, a second only after a further rise, an early one for steady growth toward the limit,
// and other processes' memory taken off what the run may use.
#include "triage/gpu_timeline.h"

#include <doctest/doctest.h>

using namespace oomtriage;
using parsers::Phase;
using triage::GpuReading;
using triage::GpuTimeline;
using triage::NearOomWatch;

namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

GpuReading at(int64_t t, std::optional<int64_t> step, Phase phase, double job_gib,
              double others_gib = 0) {
  return {.at = t,
          .step = step,
          .phase = phase,
          .job_bytes = static_cast<uint64_t>(job_gib * kGiB),
          .others_bytes = static_cast<uint64_t>(others_gib * kGiB),
          .total_bytes = 24 * kGiB};
}

}  // namespace

TEST_SUITE("triage::gpu_timeline") {
  TEST_CASE("one point per step and phase, loading by seconds, the peak per phase") {
    GpuTimeline timeline(1);
    timeline.add(at(100, std::nullopt, Phase::kModelLoad, 4));
    timeline.add(at(101, std::nullopt, Phase::kModelLoad, 9));
    timeline.add(at(115, std::nullopt, Phase::kModelLoad, 12));  // the next 10 s window
    timeline.add(at(120, 1, Phase::kTrainStep, 18));
    timeline.add(at(121, 1, Phase::kTrainStep, 19, 1.5));
    timeline.add(at(122, 2, Phase::kTrainStep, 18.5));
    timeline.add(at(123, 2, Phase::kSampling, 21));
    timeline.add(at(124, 3, Phase::kTrainStep, 18));
    const auto& points = timeline.points();
    REQUIRE(points.size() == 6);
    CHECK(points[0].peak_bytes == 9 * kGiB);
    CHECK_FALSE(points[0].step_from.has_value());
    CHECK(points[2].step_from == 1);
    CHECK(points[2].peak_bytes == 19 * kGiB);
    CHECK(points[2].others_bytes == static_cast<uint64_t>(1.5 * kGiB));
    CHECK(points[2].at_to == 121);
    CHECK(points[4].phase == Phase::kSampling);
    REQUIRE(timeline.peak() != nullptr);
    CHECK(timeline.peak()->phase == Phase::kSampling);
    CHECK(timeline.peak()->step_from == 2);
    const auto peaks = timeline.phase_peaks();
    CHECK(peaks.at(Phase::kModelLoad) == 12 * kGiB);
    CHECK(peaks.at(Phase::kTrainStep) == 19 * kGiB);
    CHECK(peaks.at(Phase::kSampling) == 21 * kGiB);
    CHECK(timeline.others_peak_bytes() == static_cast<uint64_t>(1.5 * kGiB));
    CHECK(timeline.total_bytes() == 24 * kGiB);
  }

  TEST_CASE("a long run stays within its bound and keeps its peak and its first and last step") {
    GpuTimeline timeline(0, 100);
    for (int64_t step = 0; step < 10'000; ++step) {
      const double gib = step == 7'777 ? 23.0 : 18.0 + (step % 7) * 0.1;
      timeline.add(at(1000 + step, step, Phase::kTrainStep, gib));
    }
    CHECK(timeline.points().size() <= 100);
    CHECK(timeline.points().size() > 25);
    CHECK(timeline.step_window() > 1);
    CHECK(timeline.points().front().step_from == 0);
    CHECK(timeline.points().back().step_to == 9'999);
    REQUIRE(timeline.peak() != nullptr);
    CHECK(timeline.peak()->peak_bytes == 23 * kGiB);
    CHECK(*timeline.peak()->step_from <= 7'777);
    CHECK(*timeline.peak()->step_to >= 7'777);
    for (size_t i = 1; i < timeline.points().size(); ++i) {
      CHECK(*timeline.points()[i].step_from > *timeline.points()[i - 1].step_to);
    }
  }

  TEST_CASE("phases that alternate every window still fit, each window's peak kept") {
    GpuTimeline timeline(0, 64);
    for (int64_t step = 0; step < 2'000; ++step) {
      timeline.add(at(step * 2, step, Phase::kTrainStep, 18));
      timeline.add(at(step * 2 + 1, step, Phase::kSampling, step == 1'500 ? 22 : 20));
    }
    CHECK(timeline.points().size() <= 64);
    CHECK(timeline.phase_peaks().at(Phase::kSampling) == 22 * kGiB);
  }

  TEST_CASE("the JSON form round-trips - damage is an error, not a crash") {
    GpuTimeline timeline(2);
    timeline.add(at(5, std::nullopt, Phase::kCacheLatents, 3, 1));
    timeline.add(at(9, 40, Phase::kTrainStep, 17.25));
    auto back = GpuTimeline::from_json(timeline.to_json());
    REQUIRE(back);
    CHECK(back->gpu() == 2);
    CHECK(back->points() == timeline.points());
    CHECK(back->total_bytes() == timeline.total_bytes());
    CHECK(back->others_peak_bytes() == timeline.others_peak_bytes());
    CHECK_FALSE(GpuTimeline::from_json("not json"));
    CHECK_FALSE(GpuTimeline::from_json(R"({"points": [[1, 2, "x"]]})"));
    CHECK_FALSE(GpuTimeline::from_json(R"({"points": [[1, 2, null, null, "train_step", -5, 0]]})"));
    // Numbers that arithmetic on them would overflow are damage too.
    CHECK_FALSE(GpuTimeline::from_json(
        R"({"points": [[1, 2, -9223372036854775808, 0, "train_step", 5, 0]]})"));
    CHECK_FALSE(GpuTimeline::from_json(
        R"({"points": [[1, 2, 0, 0, "train_step", 18446744073709551615, 0]]})"));
    auto wide = GpuTimeline::from_json(R"({"step_window": 18446744073709551615, "points": []})");
    REQUIRE(wide);
    CHECK(wide->step_window() == int64_t{1} << 40);
    CHECK(back->from_start());  // its first point is before any step
  }

  TEST_CASE("a run that climbs to 96% is warned once, with its step and phase") {
    GpuTimeline timeline;
    NearOomWatch watch;
    int warnings = 0;
    std::optional<NearOomWatch::Warning> first;
    // Flat at 80%, then a preview that takes it to 96% of the card three times over.
    for (int64_t step = 0; step < 300; ++step) {
      const bool preview = step % 100 == 50;
      const double gib = preview ? 24 * 0.96 : 24 * 0.80;
      const GpuReading reading =
          at(step, step, preview ? Phase::kSampling : Phase::kTrainStep, gib + step * 1e-4);
      timeline.add(reading);
      if (auto warning = watch.check(timeline, reading)) {
        ++warnings;
        if (!first) first = warning;
      }
    }
    CHECK(warnings == 1);
    REQUIRE(first);
    CHECK(first->step == 50);
    CHECK(first->phase == Phase::kSampling);
    CHECK_FALSE(first->by_trend);
    CHECK(first->usable_bytes == 24 * kGiB);
  }

  TEST_CASE("no warning below the share - another only after a further rise") {
    GpuTimeline timeline;
    NearOomWatch watch(0.95);
    auto feed = [&](int64_t step, double share) {
      const GpuReading reading = at(step, step, Phase::kSampling, 24 * share);
      timeline.add(reading);
      return watch.check(timeline, reading).has_value();
    };
    CHECK_FALSE(feed(1, 0.94));
    CHECK(feed(2, 0.951));
    CHECK_FALSE(feed(3, 0.96));
    CHECK_FALSE(feed(4, 0.965));
    CHECK(feed(5, 0.975));
    CHECK_FALSE(feed(6, 0.98));
  }

  TEST_CASE("other processes' memory is not the run's to use") {
    GpuTimeline timeline;
    NearOomWatch watch;
    // 20 GiB of 24, with 3 GiB held by another process: 95% of the 21 it may use.
    const GpuReading reading = at(1, 1, Phase::kTrainStep, 20, 3);
    timeline.add(reading);
    const auto warning = watch.check(timeline, reading);
    REQUIRE(warning);
    CHECK(warning->usable_bytes == 21 * kGiB);
  }

  TEST_CASE("steady growth toward the limit is warned early, once") {
    GpuTimeline timeline;
    NearOomWatch watch;
    std::vector<int64_t> warned_steps;
    for (int64_t step = 0; step < 11; ++step) {
      // 0.6 GiB more each step from 17 GiB: 80% at step 4, the share (22.8 GiB) at step 10
      // (95.8%, under the 2% further rise a second warning needs).
      const GpuReading reading = at(step, step, Phase::kTrainStep, 17 + 0.6 * step);
      timeline.add(reading);
      if (auto warning = watch.check(timeline, reading)) {
        CHECK(warning->by_trend);
        warned_steps.push_back(step);
      }
    }
    REQUIRE(warned_steps.size() == 1);
    CHECK(warned_steps[0] < 10);
  }

  TEST_CASE("a flat run near but under the share is not warned by the trend") {
    GpuTimeline timeline;
    NearOomWatch watch;
    for (int64_t step = 0; step < 50; ++step) {
      const GpuReading reading = at(step, step, Phase::kTrainStep, 24 * 0.93);
      timeline.add(reading);
      CHECK_FALSE(watch.check(timeline, reading));
    }
  }
}
