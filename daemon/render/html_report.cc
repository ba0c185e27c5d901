// daemon/render/html_report.cc: the job's story as one HTML page with inline SVG charts.
#include "daemon/render/html_report.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "daemon/common/human_units.h"
#include "daemon/common/version.h"
#include "daemon/render/live_html.h"
#include "parsers/family_names.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;
namespace colors = html_colors;

// The newest events and longest texts a page shows: the page stays small (well under 1 MB) and
// quick to open for a job that crashed a thousand times; `report --json` has everything.
constexpr size_t kMaxEvents = 20;
constexpr size_t kMaxLossPoints = 800;
constexpr size_t kMaxMessage = 600;
constexpr size_t kMaxEvidence = 300;
constexpr size_t kMaxDiffLines = 300;
constexpr size_t kMaxDiffLine = 300;
constexpr size_t kMaxRuns = 30;
constexpr size_t kMaxSnapshots = 10;

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control characters (a stray ESC from a coloured log) are not text.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? '?' : c;
    }
  }
  return out;
}

namespace {

std::string escape(std::string_view text) { return html_escape(text); }

bool recovered(const ordered_json& event) { return event.value("recovered", false); }

// "crashed", "completed", "running" or "other": the class an outcome is coloured by.
std::string outcome_class(std::string_view outcome) {
  if (outcome.starts_with("crashed")) return "crashed";
  if (outcome == "completed" || outcome == "healed") return "completed";
  if (outcome == "running") return "running";
  return "other";
}

// Round tick values covering [lo, hi]: 1, 2 or 5 times a power of ten apart.
std::vector<double> ticks(double lo, double hi, int wanted) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(hi - lo)) return {lo};
  const double raw = (hi - lo) / wanted;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  // A step below the values' precision would never move v: a few ticks at most, always.
  for (double v = std::ceil(lo / step) * step;
       v <= hi + step * 1e-9 && out.size() < 4 * static_cast<size_t>(wanted); v += step) {
    out.push_back(v);
  }
  return out;
}

// Each point's loss as the mean of its neighbours within `radius` points (fewer at the ends).
std::vector<parsers::LossPoint> moving_mean(const std::vector<parsers::LossPoint>& points,
                                            size_t radius) {
  std::vector<double> prefix(points.size() + 1, 0.0);
  for (size_t i = 0; i < points.size(); ++i) prefix[i + 1] = prefix[i] + points[i].loss;
  std::vector<parsers::LossPoint> out = points;
  for (size_t i = 0; i < points.size(); ++i) {
    const size_t lo = i >= radius ? i - radius : 0;
    const size_t hi = std::min(points.size(), i + radius + 1);
    out[i].loss = (prefix[hi] - prefix[lo]) / static_cast<double>(hi - lo);
  }
  return out;
}

std::string step_label(double step) {
  if (step >= 10000) return fmt::format("{:g}k", step / 1000);
  return fmt::format("{:g}", step);
}

constexpr const char* kStyle = R"css(
:root{--bg:#ffffff;--fg:#1c1e21;--muted:#5f6670;--line:#d8dce3;--card:#f8f9fb;--plot:#eef1f8;
--grid:#d9dee8;--add:#1a7f37;--addbg:#e6f4ea;--del:#b42318;--delbg:#fdecea;--accent:#2a9d8f;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#14161b;--fg:#e4e6ea;--muted:#9aa1ab;--line:#333844;
--card:#1a1d24;--plot:#1d212a;--grid:#2c313c;--add:#6fd18a;--addbg:#15301f;--del:#ff8a80;--delbg:#3a1a1a}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif}
main{max-width:980px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:0 0 6px}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}
pre{white-space:pre-wrap;word-break:break-word;margin:6px 0}
.muted{color:var(--muted)}.sub{margin:0;color:var(--muted)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:13px;font-weight:600;color:#fff}
.badge.crashed{background:#d62728}.badge.completed{background:#2e8540}.badge.running{background:#4c78a8}.badge.other{background:#6b7280}
.verdict{margin:14px 0 0;padding:12px 14px;border-left:4px solid #d62728;background:var(--card)}
.verdict.completed{border-left-color:#2e8540}
.timeline{list-style:none;margin:0;padding:0 0 0 8px}
.timeline li{position:relative;padding:4px 0 10px 26px;border-left:2px solid var(--line)}
.timeline li:last-child{border-left-color:transparent}
.timeline .dot{position:absolute;left:-8px;top:7px;width:14px;height:14px;border-radius:50%}
.dot.crashed{background:#d62728}.dot.completed{background:#2e8540}.dot.running{background:#4c78a8}.dot.other{background:#6b7280}
.timeline li.fix{padding-top:0;color:var(--muted)}
.timeline li.fix::before{content:"↓";position:absolute;left:-6px;top:-2px;color:var(--muted)}
svg{display:block;width:100%;height:auto}
svg text{fill:var(--fg);font:12px system-ui,"DejaVu Sans",sans-serif}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px;margin:2px 0 16px}
.sw{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px;border-radius:2px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px;margin:10px 0}
.fix.top{border:2px solid var(--accent)}
.diff span{display:block;min-height:1.4em}.diff .add{color:var(--add);background:var(--addbg)}
.diff .del{color:var(--del);background:var(--delbg)}.diff .hunk{color:var(--muted)}
dl{margin:6px 0;display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dt{color:var(--muted)}dd{margin:0}
footer{margin-top:40px;color:var(--muted);font-size:12px}
a{color:var(--accent)}.pagenav{display:flex;flex-wrap:wrap;gap:4px 18px;margin:0 0 14px;font-size:14px}
@media print{:root{--bg:#fff;--fg:#000;--card:#fff;--plot:#eef1f8}main{max-width:none;padding:0}
.pagenav,form{display:none}
section,.card,svg{break-inside:avoid}.badge,.dot,.sw,rect,.diff span{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
)css";

void header(std::string& out, const ReportView& r) {
  // Served pages (`oomtriage serve`) lead back to the list and on to the other forms.
  if (!r.nav.empty()) {
    out += "<nav class=\"pagenav\">";
    for (const auto& [href, text] : r.nav)
      out += fmt::format("<a href=\"{}\">{}</a>", escape(href), escape(text));
    out += "</nav>\n";
  }
  out += fmt::format(
      "<header><h1>{}</h1><p class=\"sub\">{} · model {} · <span class=\"badge {}\">{}"
      "</span></p>\n",
      escape(r.name), escape(r.trainer), escape(parsers::family_label(r.model_family)),
      outcome_class(r.outcome), escape(r.outcome));
  out += fmt::format("<p class=\"sub mono\">{}{}</p>\n", escape(r.log_dir),
                     r.host.empty() ? "" : " · host " + escape(r.host));
  // The one-sentence verdict: the newest fatal crash and the fix to try first.
  const ordered_json* last = nullptr;
  for (const auto& event : r.events) {
    if (!recovered(event)) last = &event;
  }
  if (last != nullptr) {
    std::string verdict = fmt::format("Run {} ran out of memory: {}.",
                                      r.run_number(integer_of(*last, "run_id").value_or(0)),
                                      escape(event_title(*last)));
    if (!r.fixes.empty() && r.fixes[0].is_object()) {
      verdict +=
          fmt::format(" {}: <b>{}</b> <code>{}</code>.",
                      r.completed_since ? "The fix ranked first was" : "Try first",
                      escape(text_of(r.fixes[0], "title")), escape(text_of(r.fixes[0], "id")));
    }
    if (r.completed_since) verdict += " A later run completed.";
    out += fmt::format("<p class=\"verdict{}\">{}</p>\n", r.completed_since ? " completed" : "",
                       verdict);
  } else if (r.events.empty()) {
    out += "<p class=\"verdict completed\">No out-of-memory event was seen in this job.</p>\n";
  }
  if (r.unread_log) {
    out += fmt::format(
        "<p class=\"card\">The daemon started while <code>{}</code> was already there and read it "
        "from "
        "its end: a crash before that is not in this report. <code>oomtriage scan {}</code> reads "
        "it all.</p>\n",
        escape(*r.unread_log), escape(shell_quote(*r.unread_log)));
  }
  out += "</header>\n";
}

void runs_timeline(std::string& out, const ReportView& r) {
  out += "<section id=\"runs\"><h2>Runs</h2>\n";
  const size_t first = r.runs.size() > kMaxRuns ? r.runs.size() - kMaxRuns : 0;
  if (first > 0) {
    out +=
        fmt::format("<p class=\"muted\">The newest {} of {} runs.</p>\n", kMaxRuns, r.runs.size());
  }
  out += "<ol class=\"timeline\">\n";
  for (size_t i = first; i < r.runs.size(); ++i) {
    const RunView& run = r.runs[i];
    if (!run.carried_fixes.empty()) {
      std::string ids;
      for (const auto& id : run.carried_fixes) {
        ids += (ids.empty() ? "" : ", ") + fmt::format("<code>{}</code>", escape(id));
      }
      out +=
          fmt::format("<li class=\"fix\">applied {} → {}</li>\n", ids, escape(run.carried_result));
    }
    // The run's first fatal crash, said beside it.
    std::string crash;
    for (const auto& event : r.events) {
      if (integer_of(event, "run_id") == run.id && !recovered(event)) {
        crash = event_title(event);
        break;
      }
    }
    out += fmt::format(
        "<li id=\"run-{}\"><span class=\"dot {}\"></span><b>Run {}</b> <span class=\"badge "
        "{}\">{}</span> "
        "<span class=\"muted\">started {}</span>{}{}<br><span class=\"mono "
        "muted\">{}</span></li>\n",
        run.number, outcome_class(run.outcome), run.number, outcome_class(run.outcome),
        escape(run.outcome), escape(run.started_at), crash.empty() ? "" : " · " + escape(crash),
        run.attempt.empty() ? "" : "<br>" + escape(run.attempt), escape(run.log_path));
  }
  if (r.runs.empty()) out += "<li>no run recorded</li>\n";
  out += "</ol></section>\n";
}

// The loss over the steps, with a red line at each crash's step.
void loss_chart(std::string& out, const ReportView& r,
                const std::vector<const ordered_json*>& shown) {
  constexpr double kWidth = 900, kHeight = 320, kLeft = 64, kRight = 16, kTop = 34, kBottom = 44;
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kTop, y1 = kHeight - kBottom;
  const std::vector<parsers::LossPoint> points = parsers::thin_curve(r.loss.points, kMaxLossPoints);
  double max_step = 0;
  for (const auto& p : points) max_step = std::max(max_step, static_cast<double>(p.step));
  std::vector<const ordered_json*> crashes;
  for (const ordered_json* event : shown) {
    if (!integer_of(*event, "step")) continue;
    crashes.push_back(event);
    max_step = std::max(max_step, static_cast<double>(*integer_of(*event, "step")));
    max_step =
        std::max(max_step, static_cast<double>(integer_of(*event, "total_steps").value_or(0)));
  }
  if (max_step <= 0) max_step = 1;
  const auto x_of = [&](double step) { return x0 + (x1 - x0) * step / max_step; };

  out += "<section id=\"curve\"><h2>Loss and steps</h2>\n";
  out +=
      fmt::format("<svg viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"training loss by step\">\n",
                  kWidth, kHeight);
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" style=\"fill:var(--plot)\"/>\n", x0, y0,
      x1 - x0, y1 - y0);
  for (const double t : ticks(0, max_step, 6)) {
    const double x = x_of(t);
    out += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" "
        "style=\"stroke:var(--grid)\"/><text x=\"{0:.1f}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        x, y0, y1, y1 + 16, step_label(t));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n", (x0 + x1) / 2,
                     kHeight - 6);
  if (!points.empty()) {
    double lo = points.front().loss, hi = lo;
    for (const auto& p : points) lo = std::min(lo, p.loss), hi = std::max(hi, p.loss);
    // A flat curve (equal losses, or means a few ulps apart) gets room around it.
    const bool flat = hi - lo <= 1e-6 * std::max(1.0, std::abs(hi));
    const double pad = flat ? std::max(std::abs(hi) * 0.1, 0.01) : (hi - lo) * 0.08;
    lo -= pad;
    hi += pad;
    const auto y_of = [&](double loss) { return y1 - (y1 - y0) * (loss - lo) / (hi - lo); };
    for (const double t : ticks(lo, hi, 5)) {
      out += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
          "style=\"stroke:var(--grid)\"/><text x=\"{3}\" y=\"{4:.1f}\" "
          "text-anchor=\"end\">{5:.3g}</text>\n",
          x0, x1, y_of(t), x0 - 6, y_of(t) + 4, t);
    }
    out += fmt::format(
        "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" "
        "text-anchor=\"middle\">loss</text>\n",
        (y0 + y1) / 2, (y0 + y1) / 2);
    const auto path_of = [&](const std::vector<parsers::LossPoint>& curve) {
      std::string path;
      for (const auto& p : curve) {
        path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L",
                            x_of(static_cast<double>(p.step)), y_of(p.loss));
      }
      if (curve.size() == 1) path += " h1";  // one point: a visible dash
      return path;
    };
    // Step-to-step noise drawn faint, the trend over it: what a person reads a loss curve for.
    out += fmt::format(
        "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-opacity=\"0.25\" "
        "stroke-width=\"1\"/>\n",
        path_of(points), colors::kLoss);
    out += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       path_of(moving_mean(points, std::max<size_t>(1, points.size() / 40))),
                       colors::kLoss);
  } else {
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"muted\">no loss "
        "recorded: the log's training bar shows none and there is no "
        "loss_log.db</text>\n",
        (x0 + x1) / 2, (y0 + y1) / 2);
  }
  // Crashes last, over the curve; labels stagger so that neighbours stay readable.
  for (size_t i = 0; i < crashes.size(); ++i) {
    const ordered_json& event = *crashes[i];
    const double x = x_of(static_cast<double>(*integer_of(event, "step")));
    const bool fatal = !recovered(event);
    const char* color = fatal ? colors::kCrash : colors::kRecovered;
    out += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"{3}\" "
        "stroke-width=\"2.5\"{4}><title>{5}</title></line>\n",
        x, y0, y1, color, fatal ? "" : " stroke-dasharray=\"5 3\"", escape(event_title(event)));
    const bool right_side = x > x0 + (x1 - x0) * 0.7;
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\">{} · {} · step {}</text>\n",
                       right_side ? x - 5 : x + 5, y0 - 20 + 14 * static_cast<double>(i % 2) + 0,
                       right_side ? "end" : "start", fatal ? "OOM" : "recovered OOM",
                       escape(text_of(event, "phase")), *integer_of(event, "step"));
  }
  out += "</svg>\n<div class=\"legend\">";
  if (!points.empty()) {
    out += fmt::format(
        "<span><span class=\"sw\" style=\"background:{}\"></span>training loss "
        "(from {}; faint: each step, bold: the trend)</span>",
        colors::kLoss, escape(r.loss.source));
  }
  out += fmt::format(
      "<span><span class=\"sw\" style=\"background:{}\"></span>out-of-memory crash</span>",
      colors::kCrash);
  size_t stepless = 0;
  for (const ordered_json* event : shown) stepless += integer_of(*event, "step") ? 0 : 1;
  if (stepless > 0) {
    out += fmt::format("<span class=\"muted\">{} event{} at an unknown step, not drawn</span>",
                       stepless, stepless == 1 ? "" : "s");
  }
  out += "</div></section>\n";
}

// Capacity as one bar (in use, other processes, free) and what the allocator tried below it.
void memory_bars(std::string& out, const ReportView& r,
                 const std::vector<const ordered_json*>& shown) {
  out += "<section id=\"memory\"><h2>GPU memory at each crash</h2>\n";
  bool any = false;
  for (const ordered_json* event : shown) {
    const MemoryAtCrash m = memory_at_crash(*event);
    if (m.capacity == 0) continue;
    any = true;
    constexpr double kWidth = 900;
    // A request larger than what was free sticks out past the card's capacity: the scale leaves
    // room for it.
    const uint64_t scale = std::max(m.capacity, m.in_use + m.other + m.tried);
    const auto w = [&](uint64_t bytes) {
      return kWidth * static_cast<double>(bytes) / static_cast<double>(scale);
    };
    out += fmt::format(
        "<h3>Run {} · {}{}</h3>\n", r.run_number(integer_of(*event, "run_id").value_or(0)),
        escape(event_title(*event)),
        integer_of(*event, "gpu_index") ? fmt::format(" · GPU {}", *integer_of(*event, "gpu_index"))
                                        : "");
    out += "<svg viewBox=\"0 0 900 58\" role=\"img\" aria-label=\"GPU memory at the crash\">\n";
    double x = 0;
    const auto segment = [&](uint64_t bytes, const char* color, const std::string& what, double y,
                             double h) {
      const double width = std::min(w(bytes), kWidth - x);
      if (width <= 0) return;
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\">"
          "<title>{}: {}</title></rect>\n",
          x, y, width, h, color, what, format_bytes(bytes));
      x += width;
    };
    segment(m.in_use, colors::kInUse, "in use by the crashed process", 2, 30);
    if (m.free) {
      segment(m.other, colors::kOther, "other processes and the driver", 2, 30);
      segment(*m.free, colors::kFree, "free", 2, 30);
    } else {
      segment(m.capacity - m.in_use, colors::kOther, "not in use by it (free not given)", 2, 30);
    }
    // The request starts where free memory does: it is what did not fit there.
    x = w(m.in_use + m.other);
    if (m.tried > 0) segment(m.tried, colors::kTried, "tried to allocate", 38, 18);
    if (scale > m.capacity) {
      out += fmt::format(
          "<line x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"0\" y2=\"58\" "
          "style=\"stroke:var(--fg)\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\">"
          "<title>capacity {1}</title></line>\n",
          w(m.capacity) - 0.75, format_bytes(m.capacity));
    }
    out += "</svg>\n<div class=\"legend\">";
    const auto key = [&](const char* color, const std::string& text) {
      out += fmt::format("<span><span class=\"sw\" style=\"background:{}\"></span>{}</span>", color,
                         text);
    };
    key(colors::kInUse, "in use by the crashed process " + format_bytes(m.in_use));
    if (m.free) {
      key(colors::kOther, "other processes and the driver " + format_bytes(m.other));
      key(colors::kFree, "free " + format_bytes(*m.free));
    }
    if (m.tried > 0) {
      std::string tried = "tried to allocate " + format_bytes(m.tried);
      if (m.free && m.tried > *m.free)
        tried += " (" + format_bytes(m.tried - *m.free) + " more than was free)";
      key(colors::kTried, tried);
    }
    out += fmt::format("<span class=\"muted\">of {}</span></div>\n", format_bytes(m.capacity));
  }
  if (!any) out += "<p class=\"muted\">No crash message gave the GPU's figures.</p>\n";
  out += "</section>\n";
}

const char* phase_color(parsers::Phase phase) {
  switch (phase) {
    case parsers::Phase::kTrainStep: return colors::kTrainStep;
    case parsers::Phase::kSampling: return colors::kSampling;
    case parsers::Phase::kModelLoad:
    case parsers::Phase::kQuantize: return colors::kLoading;
    case parsers::Phase::kCacheLatents:
    case parsers::Phase::kCacheTextEmbeddings: return colors::kCaching;
    case parsers::Phase::kSaving: return colors::kSaving;
    case parsers::Phase::kUnknown: break;
  }
  return "#bdbdbd";
}

// Each sampled run's memory against its steps: a bar per window coloured by its phase, what
// other processes held stacked over it, the card's size, and the run's crashes in red. Windows
// before the first step (loading, caching) share a band at the left, in time order.
void memory_timeline(std::string& out, const ReportView& r) {
  if (r.gpu_memory.empty()) return;
  constexpr size_t kMaxCharts = 6;
  constexpr double kWidth = 900, kHeight = 260, kLeft = 64, kRight = 16, kTop = 24, kBottom = 40;
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kTop, y1 = kHeight - kBottom;
  out += "<section id=\"gpu-timeline\"><h2>GPU memory over the run</h2>\n";
  const size_t first = r.gpu_memory.size() > kMaxCharts ? r.gpu_memory.size() - kMaxCharts : 0;
  for (size_t c = first; c < r.gpu_memory.size(); ++c) {
    const GpuMemoryView& gpu = r.gpu_memory[c];
    out += fmt::format("<h3>Run {} · GPU {} · {}</h3>\n", gpu.run_number, gpu.gpu,
                       escape(gpu_peak_text(gpu)));
    for (const triage::GpuGap& gap : gpu.gaps) {
      out += fmt::format(
          "<p class=\"gap\">Not sampled for {} s from {:%Y-%m-%d %H:%M:%S} UTC: GPU {} did not "
          "answer NVML.</p>\n",
          gap.to - gap.from, fmt::gmtime(static_cast<time_t>(gap.from)), gpu.gpu);
    }
    size_t before_steps = 0;
    int64_t lo_step = 0, hi_step = 0;
    bool any_step = false;
    uint64_t top = gpu.total_bytes;
    for (const triage::GpuPoint& p : gpu.points) {
      top = std::max(top, p.peak_bytes + p.others_bytes);
      if (!p.step_from) {
        ++before_steps;
        continue;
      }
      lo_step = any_step ? std::min(lo_step, *p.step_from) : *p.step_from;
      hi_step = any_step ? std::max(hi_step, *p.step_to) : *p.step_to;
      any_step = true;
    }
    std::vector<std::pair<int64_t, const ordered_json*>> crashes;
    for (const auto& event : r.events) {
      if (integer_of(event, "run_id") != gpu.run_id || !integer_of(event, "step")) continue;
      crashes.emplace_back(*integer_of(event, "step"), &event);
      hi_step = std::max(hi_step, *integer_of(event, "step"));
    }
    if (top == 0) top = 1;
    const double band = before_steps == 0 ? 0 : (any_step ? 0.12 : 1.0) * (x1 - x0);
    const double step_span = static_cast<double>(std::max<int64_t>(1, hi_step - lo_step + 1));
    const auto x_of_step = [&](double step) {
      return x0 + band + (x1 - x0 - band) * (step - static_cast<double>(lo_step)) / step_span;
    };
    const auto y_of = [&](uint64_t bytes) {
      return y1 - (y1 - y0) * static_cast<double>(bytes) / static_cast<double>(top);
    };
    out += fmt::format(
        "<svg viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"GPU {} memory by step, run "
        "{}\">\n<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
        "style=\"fill:var(--plot)\"/>\n",
        kWidth, kHeight, gpu.gpu, gpu.run_number, x0, y0, x1 - x0, y1 - y0);
    for (const double t : ticks(0, static_cast<double>(top) / (1ull << 30), 4)) {
      const double y = y_of(static_cast<uint64_t>(t * (1ull << 30)));
      out += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
          "style=\"stroke:var(--grid)\"/><text x=\"{3}\" y=\"{4:.1f}\" "
          "text-anchor=\"end\">{5:g} GiB</text>\n",
          x0, x1, y, x0 - 6, y + 4, t);
    }
    if (any_step) {
      for (const double t : ticks(static_cast<double>(lo_step), static_cast<double>(hi_step), 6)) {
        out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                           x_of_step(t), y1 + 16, step_label(t));
      }
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n",
                         (x0 + band + x1) / 2, kHeight - 4);
    }
    if (band > 0) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" class=\"muted\">before step "
          "1</text>\n",
          x0 + band / 2, y1 + 16);
    }
    size_t pre = 0;
    for (const triage::GpuPoint& p : gpu.points) {
      double left, width;
      if (p.step_from) {
        left = x_of_step(static_cast<double>(*p.step_from));
        width = std::max(1.0, x_of_step(static_cast<double>(*p.step_to + 1)) - left);
      } else {
        width = band / static_cast<double>(before_steps);
        left = x0 + width * static_cast<double>(pre++);
      }
      const std::string when =
          p.step_from
              ? (*p.step_from == *p.step_to ? fmt::format("step {}", *p.step_from)
                                            : fmt::format("steps {}-{}", *p.step_from, *p.step_to))
              : "before step 1";
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
          "data-phase=\"{}\"><title>{}, {}: {}</title></rect>\n",
          left, y_of(p.peak_bytes), width, y1 - y_of(p.peak_bytes), phase_color(p.phase),
          parsers::to_string(p.phase), when, parsers::to_string(p.phase),
          format_bytes(p.peak_bytes));
      if (p.others_bytes > 0) {
        out += fmt::format(
            "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
            "fill-opacity=\"0.6\" class=\"others\"><title>{}: other processes "
            "{}</title></rect>\n",
            left, y_of(p.peak_bytes + p.others_bytes), width,
            y_of(p.peak_bytes) - y_of(p.peak_bytes + p.others_bytes), colors::kOther, when,
            format_bytes(p.others_bytes));
      }
    }
    if (gpu.total_bytes > 0) {
      out += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
          "style=\"stroke:var(--fg)\" stroke-dasharray=\"4 3\" class=\"card-size\"><title>the "
          "card: {3}</title></line>\n",
          x0, x1, y_of(gpu.total_bytes), format_bytes(gpu.total_bytes));
    }
    for (const auto& [step, event] : crashes) {
      const double x = x_of_step(static_cast<double>(step));
      out += fmt::format(
          "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"{3}\" "
          "stroke-width=\"2.5\" class=\"crash\"><title>{4}</title></line>\n",
          x, y0, y1, recovered(*event) ? colors::kRecovered : colors::kCrash,
          escape(event_title(*event)));
    }
    out += "</svg>\n<div class=\"legend\">";
    for (const auto& [phase, peak] : gpu.phase_peaks) {
      // Its colour from a point of that phase (a lambda may not capture a structured binding
      // in clang 14, so a loop).
      parsers::Phase named = parsers::Phase::kUnknown;
      for (const triage::GpuPoint& p : gpu.points) {
        if (parsers::to_string(p.phase) == phase) named = p.phase;
      }
      out +=
          fmt::format("<span><span class=\"sw\" style=\"background:{}\"></span>{} (peak {})</span>",
                      phase_color(named), escape(phase), format_bytes(peak));
    }
    if (gpu.others_peak_bytes > 0) {
      out += fmt::format(
          "<span><span class=\"sw\" style=\"background:{}\"></span>other processes on GPU {} "
          "(up to {})</span>",
          colors::kOther, gpu.gpu, format_bytes(gpu.others_peak_bytes));
    }
    if (!crashes.empty()) {
      out += fmt::format(
          "<span><span class=\"sw\" style=\"background:{}\"></span>out-of-memory crash</span>",
          colors::kCrash);
    }
    out += "</div>\n";
  }
  out += "</section>\n";
}

void evidence(std::string& out, const ReportView& r,
              const std::vector<const ordered_json*>& shown) {
  out += "<section id=\"events\"><h2>Where it crashed</h2>\n";
  if (r.events.empty()) out += "<p class=\"muted\">No out-of-memory event.</p>\n";
  if (r.events.size() > shown.size()) {
    out += fmt::format(
        "<p class=\"muted\">The newest {} of {} events; <code>{} --json</code> has them "
        "all.</p>\n",
        shown.size(), r.events.size(), escape(r.report_command));
  }
  for (const ordered_json* event : shown) {
    out += fmt::format(
        "<div class=\"card\"><h3>{}</h3><div class=\"muted\">run {} · line {} · "
        "stored {}</div>\n<pre>{}</pre>\n<dl>",
        escape(event_title(*event)), r.run_number(integer_of(*event, "run_id").value_or(0)),
        escape(text_of(*event, "line")), escape(text_of(*event, "stored_at")),
        escape(cut(text_of(*event, "message"), kMaxMessage)));
    for (const auto& [key, what] :
         {std::pair{"phase_evidence", "phase"}, std::pair{"step_evidence", "step"}}) {
      const auto it = event->find(key);
      if (it == event->end() || !it->is_object()) continue;
      out += fmt::format("<dt>{}</dt><dd>from the {} at line {}: <code>{}</code></dd>", what,
                         escape(text_of(*it, "source")), escape(text_of(*it, "line")),
                         escape(cut(text_of(*it, "text"), kMaxEvidence)));
    }
    out += "</dl></div>\n";
  }
  out += "</section>\n";
}

void fixes(std::string& out, const ReportView& r) {
  out += fmt::format("<section id=\"fixes\"><h2>Fixes for the last incident, best first{}</h2>\n",
                     r.completed_since ? " (the job completed in a later run)" : "");
  if (r.fixes.empty()) out += "<p class=\"muted\">No fix to suggest.</p>\n";
  for (const auto& fix : r.fixes) {
    if (!fix.is_object()) continue;
    const bool top = integer_of(fix, "rank") == 1;
    out +=
        fmt::format("<div class=\"card fix{}\"><h3>{}. {} <code>{}</code></h3>\n<p>{}</p>\n",
                    top ? " top" : "", escape(text_of(fix, "rank")), escape(text_of(fix, "title")),
                    escape(text_of(fix, "id")), escape(text_of(fix, "why")));
    const auto changes = fix.find("changes");
    if (changes != fix.end() && changes->is_array() && !changes->empty()) {
      out += "<pre class=\"diff\">";
      if (const auto target = fix.find("target"); target != fix.end() && target->is_object()) {
        out += fmt::format("<span class=\"hunk\">in {} {}</span>", escape(text_of(*target, "kind")),
                           escape(text_of(*target, "path")));
      }
      for (const auto& change : *changes) {
        const std::string path = escape(text_of(change, "path"));
        const auto from = change.find("from");
        if (from != change.end() && !from->is_null()) {
          out += fmt::format("<span class=\"del\">- {}: {}</span>", path, escape(from->dump()));
        }
        const auto to = change.find("to");
        if (to != change.end() && !to->is_null()) {
          out += fmt::format("<span class=\"add\">+ {}: {}</span>", path, escape(to->dump()));
        }
      }
      out += "</pre>\n";
    }
    out += "<dl>";
    out += fmt::format("<dt>cost</dt><dd>{}</dd>", escape(text_of(fix, "cost")));
    if (const auto peak = integer_of(fix, "predicted_peak_bytes")) {
      const auto fits = fix.find("fits");
      out += fmt::format("<dt>peak</dt><dd>about {}{}</dd>",
                         format_bytes(static_cast<uint64_t>(*peak)),
                         fits != fix.end() && fits->is_boolean()
                             ? (fits->get<bool>() ? " (fits)" : " (still too much)")
                             : "");
    }
    if (const std::string estimate = text_of(fix, "estimate"); !estimate.empty()) {
      out += fmt::format("<dt>estimate</dt><dd>{}</dd>", escape(estimate));
    }
    if (const std::string check = text_of(fix, "check"); !check.empty()) {
      out += fmt::format("<dt>check</dt><dd>{}</dd>", escape(check));
    }
    out += "</dl></div>\n";
  }
  out += "</section>\n";
}

void config_diffs(std::string& out, const ReportView& r) {
  out += "<section id=\"config\"><h2>Config between runs</h2>\n";
  if (r.snapshots.empty()) out += "<p class=\"muted\">No config file was seen.</p>\n";
  const size_t first = r.snapshots.size() > kMaxSnapshots ? r.snapshots.size() - kMaxSnapshots : 0;
  if (first > 0) {
    out += fmt::format("<p class=\"muted\">The newest {} of {} snapshots.</p>\n", kMaxSnapshots,
                       r.snapshots.size());
  }
  for (size_t i = first; i < r.snapshots.size(); ++i) {
    const SnapshotView& s = r.snapshots[i];
    out += fmt::format(
        "<div class=\"card\" id=\"snapshot-{}\"><h3>snapshot {} <code>{}</code></h3><div "
        "class=\"muted\">taken {} · <span class=\"mono\">{}</span></div>\n",
        s.id, s.id, escape(s.sha256.substr(0, 12)), escape(s.seen_at), escape(s.path));
    if (!s.diff_from_previous.empty()) {
      out += "<pre class=\"diff\">";
      size_t lines = 0;
      for (size_t at = 0, next; at < s.diff_from_previous.size(); at = next + 1) {
        next = s.diff_from_previous.find('\n', at);
        if (next == std::string::npos) next = s.diff_from_previous.size();
        if (++lines > kMaxDiffLines) {
          out += "<span class=\"hunk\">…</span>";
          break;
        }
        const std::string_view line(s.diff_from_previous.data() + at, next - at);
        const char* cls =
            line.starts_with("+++") || line.starts_with("---") || line.starts_with("@@") ? "hunk"
            : line.starts_with("+")                                                      ? "add"
            : line.starts_with("-")                                                      ? "del"
                                                                                         : "ctx";
        out += fmt::format("<span class=\"{}\">{}</span>", cls, escape(cut(line, kMaxDiffLine)));
      }
      out += "</pre>\n";
    } else if (&s != &r.snapshots.front()) {
      out += "<p class=\"muted\">unchanged</p>\n";
    }
    out += "</div>\n";
  }
  out += "</section>\n";
}

}  // namespace

std::string render_html_report(const ReportView& r) {
  // The newest events, oldest first as the story goes.
  std::vector<const ordered_json*> shown;
  for (const auto& event : r.events) shown.push_back(&event);
  if (shown.size() > kMaxEvents) shown.erase(shown.begin(), shown.end() - kMaxEvents);

  std::string out;
  out.reserve(64 << 10);
  out += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n";
  out += "<meta name=\"color-scheme\" content=\"light dark\">\n";
  out +=
      fmt::format("<title>oomtriage report: {}</title>\n<style>{}{}</style></head>\n<body><main>\n",
                  escape(r.name), kStyle, live_style());
  header(out, r);
  out += live_section(r);
  runs_timeline(out, r);
  loss_chart(out, r, shown);
  memory_bars(out, r, shown);
  memory_timeline(out, r);
  evidence(out, r, shown);
  fixes(out, r);
  config_diffs(out, r);
  out += fmt::format("<footer>oomtriage {} · report made {}</footer>\n</main></body></html>\n",
                     kVersion, escape(r.made_at));
  return out;
}

const char* html_style() { return kStyle; }

}  // namespace oomtriage::daemon
