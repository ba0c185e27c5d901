// triage/gpu_timeline.h
//
// One run's GPU memory over its life, as the daemon and `run` sample it (docs/gpu-memory.md):
// a bounded timeline of points, each the peak of a window of steps (or, before the first step,
// of seconds) in one phase, with the memory other processes held on the card; the peak per
// phase; and the near-OOM watch that decides when a run is worth one TrainingNearOOM warning.
// Pure: samples in, points and decisions out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::triage {

// One sample of one run on one card.
struct GpuReading {
  int64_t at = 0;               // Unix seconds
  std::optional<int64_t> step;  // the training bar's position, when the log has shown one
  parsers::Phase phase = parsers::Phase::kUnknown;
  uint64_t job_bytes = 0;     // the run's processes on this card
  uint64_t others_bytes = 0;  // every other process on this card
  uint64_t total_bytes = 0;   // the card's memory
};

// The peak of one window.
struct GpuPoint {
  int64_t at_from = 0, at_to = 0;
  std::optional<int64_t> step_from, step_to;  // none: before the first step
  parsers::Phase phase = parsers::Phase::kUnknown;
  uint64_t peak_bytes = 0;    // the run's
  uint64_t others_bytes = 0;  // other processes', at most
  bool operator==(const GpuPoint&) const = default;
};

// Points kept per run: the timeline coarsens (windows double) to stay within this.
inline constexpr size_t kMaxGpuPoints = 2000;

// A time the card did not answer NVML, so nothing was sampled (Unix seconds).
struct GpuGap {
  int64_t from = 0, to = 0;
  bool operator==(const GpuGap&) const = default;
};
// Gaps kept per run: past it, the two oldest merge into one.
inline constexpr size_t kMaxGpuGaps = 50;

class GpuTimeline {
 public:
  explicit GpuTimeline(unsigned gpu = 0, size_t max_points = kMaxGpuPoints)
      : gpu_(gpu), max_points_(std::max<size_t>(max_points, 4)) {}

  void add(const GpuReading& reading);
  // No sample from `from` to `to`: the card did not answer.
  void add_gap(int64_t from, int64_t to);
  const std::vector<GpuGap>& gaps() const { return gaps_; }

  unsigned gpu() const { return gpu_; }
  uint64_t total_bytes() const { return total_bytes_; }
  const std::vector<GpuPoint>& points() const { return points_; }
  // The highest point (the first of equals), if any.
  const GpuPoint* peak() const;
  uint64_t others_peak_bytes() const { return others_peak_; }
  // The run's peak in each phase it was sampled in.
  std::map<parsers::Phase, uint64_t> phase_peaks() const;
  int64_t step_window() const { return step_window_; }
  // Sampled from before its first training step: its peak is the run's, not a part's (the
  // daemon started mid-run, say), so a completed run's peak measures its config.
  bool from_start() const { return !points_.empty() && !points_.front().step_from; }

  // {"gpu":0,"total_bytes":...,"points":[[at_from,at_to,step_from,step_to,"phase",peak,others]],
  // "gaps":[[from,to]]} (a missing step is null; no "gaps" when there are none): the store's and
  // the fleet store's form.
  std::string to_json() const;
  static Result<GpuTimeline> from_json(std::string_view json);

 private:
  bool joins(const GpuPoint& last, const GpuReading& reading) const;
  void coarsen();

  unsigned gpu_;
  size_t max_points_;
  uint64_t total_bytes_ = 0;
  uint64_t others_peak_ = 0;
  int64_t step_window_ = 1;     // steps per point in training
  int64_t second_window_ = 10;  // seconds per point before the first step
  std::vector<GpuPoint> points_;
  std::vector<GpuGap> gaps_;
};

// When a run is near its card's limit: the peak reached `share` of the memory it may use (the
// card less what other processes hold), or it grew in each of the last kTrendWindows step
// windows, is above kTrendFloor of it, and at that pace reaches `share` within as many more.
// One warning per run; another only once the peak rose kRewarnShare of the usable memory above
// both the share and the peak last warned at (a run that climbs to 96% is warned once).
class NearOomWatch {
 public:
  static constexpr int kTrendWindows = 4;
  static constexpr double kTrendFloor = 0.80;
  static constexpr double kRewarnShare = 0.02;

  explicit NearOomWatch(double share = 0.95) : share_(share) {}

  struct Warning {
    uint64_t peak_bytes = 0;
    uint64_t usable_bytes = 0;
    std::optional<int64_t> step;
    parsers::Phase phase = parsers::Phase::kUnknown;
    bool by_trend = false;  // not there yet: growing toward it
  };
  // Called after each reading is added to `timeline`; a warning to send, at most once per rise.
  std::optional<Warning> check(const GpuTimeline& timeline, const GpuReading& reading);
  // A warning already went out at this memory (read back after a restart).
  void restore(uint64_t warned_bytes) { warned_at_ = warned_bytes; }
  std::optional<uint64_t> warned_bytes() const { return warned_at_; }

 private:
  double share_;
  std::optional<uint64_t> warned_at_;
};

}  // namespace oomtriage::triage
