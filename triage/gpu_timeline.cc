// triage/gpu_timeline.cc: readings into windows, the coarsening that bounds them, their JSON, and
// the near-OOM watch.
#include "triage/gpu_timeline.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace oomtriage::triage {
namespace {

using nlohmann::json;

// Floor division: windows are aligned to multiples of their width, so two timelines of one run
// coarsened at different times still agree on where a window starts.
int64_t window_of(int64_t value, int64_t width) {
  return value >= 0 ? value / width : -((-value + width - 1) / width);
}

void absorb(GpuPoint& into, const GpuPoint& point) {
  into.at_from = std::min(into.at_from, point.at_from);
  into.at_to = std::max(into.at_to, point.at_to);
  if (point.step_from) {
    into.step_from = into.step_from ? std::min(*into.step_from, *point.step_from) : point.step_from;
    into.step_to = into.step_to ? std::max(*into.step_to, *point.step_to) : point.step_to;
  }
  if (point.peak_bytes > into.peak_bytes) {
    into.peak_bytes = point.peak_bytes;
    into.phase = point.phase;  // a pair merged across phases keeps the phase of its peak
  }
  into.others_bytes = std::max(into.others_bytes, point.others_bytes);
}

std::optional<parsers::Phase> phase_named(const std::string& name) {
  for (int p = 0; p <= static_cast<int>(parsers::Phase::kSaving); ++p) {
    const auto phase = static_cast<parsers::Phase>(p);
    if (parsers::to_string(phase) == name) return phase;
  }
  return std::nullopt;
}

}  // namespace

bool GpuTimeline::joins(const GpuPoint& last, const GpuReading& reading) const {
  if (last.phase != reading.phase) return false;
  if (last.step_from.has_value() != reading.step.has_value()) return false;
  if (reading.step) {
    return window_of(*reading.step, step_window_) == window_of(*last.step_from, step_window_);
  }
  return window_of(reading.at, second_window_) == window_of(last.at_from, second_window_);
}

void GpuTimeline::add(const GpuReading& reading) {
  total_bytes_ = std::max(total_bytes_, reading.total_bytes);
  others_peak_ = std::max(others_peak_, reading.others_bytes);
  GpuPoint point{reading.at,    reading.at,        reading.step,        reading.step,
                 reading.phase, reading.job_bytes, reading.others_bytes};
  if (!points_.empty() && joins(points_.back(), reading)) {
    absorb(points_.back(), point);
    return;
  }
  points_.push_back(point);
  if (points_.size() > max_points_) coarsen();
}

// Doubles the windows and merges the points that now share one. Phases that alternate every
// window (a preview every few steps) do not merge that way, so while the timeline is still
// over three quarters full, neighbours are merged in pairs whatever their phase.
void GpuTimeline::coarsen() {
  // A window wider than the whole timeline merges nothing more (and would overflow in the end).
  std::optional<int64_t> first_step, last_step;
  for (const GpuPoint& point : points_) {
    if (!point.step_from) continue;
    if (!first_step) first_step = point.step_from;
    last_step = point.step_to;
  }
  if (first_step && step_window_ <= *last_step - *first_step) step_window_ *= 2;
  if (second_window_ <= points_.back().at_to - points_.front().at_from) second_window_ *= 2;
  std::vector<GpuPoint> merged;
  merged.reserve(points_.size());
  for (const GpuPoint& point : points_) {
    if (!merged.empty()) {
      GpuPoint& last = merged.back();
      const bool same_window = last.phase == point.phase &&
                               last.step_from.has_value() == point.step_from.has_value() &&
                               (point.step_from ? window_of(*point.step_from, step_window_) ==
                                                      window_of(*last.step_from, step_window_)
                                                : window_of(point.at_from, second_window_) ==
                                                      window_of(last.at_from, second_window_));
      if (same_window) {
        absorb(last, point);
        continue;
      }
    }
    merged.push_back(point);
  }
  while (merged.size() > max_points_ * 3 / 4) {
    std::vector<GpuPoint> pairs;
    pairs.reserve(merged.size() / 2 + 1);
    for (size_t i = 0; i < merged.size(); i += 2) {
      pairs.push_back(merged[i]);
      if (i + 1 < merged.size()) absorb(pairs.back(), merged[i + 1]);
    }
    merged = std::move(pairs);
  }
  points_ = std::move(merged);
}

void GpuTimeline::add_gap(int64_t from, int64_t to) {
  if (to < from) std::swap(from, to);
  if (!gaps_.empty() && from <= gaps_.back().to) {
    gaps_.back().to = std::max(gaps_.back().to, to);
    return;
  }
  gaps_.push_back({from, to});
  if (gaps_.size() > kMaxGpuGaps) {
    gaps_[1].from = gaps_[0].from;
    gaps_.erase(gaps_.begin());
  }
}

const GpuPoint* GpuTimeline::peak() const {
  const GpuPoint* best = nullptr;
  for (const GpuPoint& point : points_) {
    if (best == nullptr || point.peak_bytes > best->peak_bytes) best = &point;
  }
  return best;
}

std::map<parsers::Phase, uint64_t> GpuTimeline::phase_peaks() const {
  std::map<parsers::Phase, uint64_t> peaks;
  for (const GpuPoint& point : points_) {
    uint64_t& peak = peaks[point.phase];
    peak = std::max(peak, point.peak_bytes);
  }
  return peaks;
}

std::string GpuTimeline::to_json() const {
  json points = json::array();
  const auto step = [](const std::optional<int64_t>& s) { return s ? json(*s) : json(nullptr); };
  for (const GpuPoint& p : points_) {
    points.push_back({p.at_from, p.at_to, step(p.step_from), step(p.step_to),
                      parsers::to_string(p.phase), p.peak_bytes, p.others_bytes});
  }
  json doc{{"gpu", gpu_},
           {"total_bytes", total_bytes_},
           {"others_peak_bytes", others_peak_},
           {"step_window", step_window_},
           {"second_window", second_window_},
           {"points", std::move(points)}};
  if (!gaps_.empty()) {
    json gaps = json::array();
    for (const GpuGap& gap : gaps_) gaps.push_back({gap.from, gap.to});
    doc["gaps"] = std::move(gaps);
  }
  return doc.dump();
}

Result<GpuTimeline> GpuTimeline::from_json(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  const auto bad = [](const std::string& why) {
    return make_error(ErrorCode::kBadInput, "GPU timeline: " + why);
  };
  if (!doc.is_object() || !doc.contains("points") || !doc["points"].is_array()) {
    return bad("not an object with points");
  }
  const auto number = [&](const char* key) -> std::optional<uint64_t> {
    const auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<uint64_t>();
  };
  // Stored text is trusted no further than its shape: sizes within what a card can hold, steps
  // and windows within what arithmetic on them cannot overflow, no more points than a timeline
  // keeps.
  constexpr uint64_t kMaxBytes = uint64_t{1} << 50;  // 1 PiB
  constexpr int64_t kMaxStep = int64_t{1} << 40;
  const auto in_range = [](const json& v, int64_t limit) {
    return v.is_number_integer() && v.get<int64_t>() >= -limit && v.get<int64_t>() <= limit;
  };
  const auto bytes = [&](const json& v) {
    return v.is_number_unsigned() && v.get<uint64_t>() <= kMaxBytes;
  };
  const auto window = [&](const char* key, uint64_t otherwise) {
    return static_cast<int64_t>(
        std::clamp<uint64_t>(number(key).value_or(otherwise), 1, uint64_t{1} << 40));
  };
  if (doc["points"].size() > kMaxGpuPoints) return bad("more points than a timeline keeps");
  GpuTimeline timeline(static_cast<unsigned>(std::min<uint64_t>(number("gpu").value_or(0), 1024)));
  timeline.total_bytes_ = std::min(number("total_bytes").value_or(0), kMaxBytes);
  timeline.others_peak_ = std::min(number("others_peak_bytes").value_or(0), kMaxBytes);
  timeline.step_window_ = window("step_window", 1);
  timeline.second_window_ = window("second_window", 10);
  for (const json& p : doc["points"]) {
    if (!p.is_array() || p.size() != 7 || !in_range(p[0], kMaxStep) || !in_range(p[1], kMaxStep) ||
        !(p[2].is_null() || in_range(p[2], kMaxStep)) ||
        !(p[3].is_null() || in_range(p[3], kMaxStep)) || !p[4].is_string() || !bytes(p[5]) ||
        !bytes(p[6])) {
      return bad("a point is not [at_from, at_to, step_from, step_to, phase, peak, others]");
    }
    GpuPoint point;
    point.at_from = p[0].get<int64_t>();
    point.at_to = p[1].get<int64_t>();
    if (!p[2].is_null()) point.step_from = p[2].get<int64_t>();
    if (!p[3].is_null()) point.step_to = p[3].get<int64_t>();
    point.phase = phase_named(p[4].get<std::string>()).value_or(parsers::Phase::kUnknown);
    point.peak_bytes = p[5].get<uint64_t>();
    point.others_bytes = p[6].get<uint64_t>();
    timeline.points_.push_back(point);
  }
  if (const auto gaps = doc.find("gaps"); gaps != doc.end()) {
    if (!gaps->is_array() || gaps->size() > kMaxGpuGaps) return bad("gaps are not a short array");
    for (const json& g : *gaps) {
      if (!g.is_array() || g.size() != 2 || !in_range(g[0], kMaxStep) ||
          !in_range(g[1], kMaxStep)) {
        return bad("a gap is not [from, to]");
      }
      timeline.add_gap(g[0].get<int64_t>(), g[1].get<int64_t>());
    }
  }
  return timeline;
}

std::optional<NearOomWatch::Warning> NearOomWatch::check(const GpuTimeline& timeline,
                                                         const GpuReading& reading) {
  if (reading.total_bytes <= reading.others_bytes) return std::nullopt;
  const uint64_t usable = reading.total_bytes - reading.others_bytes;
  const double limit = share_ * static_cast<double>(usable);
  const double now = static_cast<double>(reading.job_bytes);
  Warning warning{reading.job_bytes, usable, reading.step, reading.phase, false};
  if (now >= limit) {
    const double floor = std::max(limit, static_cast<double>(warned_at_.value_or(0)));
    if (warned_at_ && now < floor + kRewarnShare * static_cast<double>(usable)) return std::nullopt;
    warned_at_ = reading.job_bytes;
    return warning;
  }
  if (warned_at_ || now < kTrendFloor * static_cast<double>(usable)) return std::nullopt;
  // The trend: the newest kTrendWindows + 1 step windows of this phase, each above the last.
  std::vector<uint64_t> peaks;
  for (auto it = timeline.points().rbegin(); it != timeline.points().rend(); ++it) {
    if (!it->step_from || it->phase != reading.phase) break;
    peaks.push_back(it->peak_bytes);
    if (peaks.size() == kTrendWindows + 1) break;
  }
  if (peaks.size() < kTrendWindows + 1) return std::nullopt;
  std::reverse(peaks.begin(), peaks.end());
  const double least_rise = 0.005 * static_cast<double>(usable);
  for (size_t i = 1; i < peaks.size(); ++i) {
    if (static_cast<double>(peaks[i]) < static_cast<double>(peaks[i - 1]) + least_rise) {
      return std::nullopt;
    }
  }
  const double per_window = static_cast<double>(peaks.back() - peaks.front()) / kTrendWindows;
  if (static_cast<double>(peaks.back()) + per_window * kTrendWindows < limit) return std::nullopt;
  warned_at_ = reading.job_bytes;
  warning.by_trend = true;
  return warning;
}

}  // namespace oomtriage::triage
