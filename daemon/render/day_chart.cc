// daemon/render/day_chart.cc: /fleet's stacked bars per day, linked to the jobs list
// (daemon/render/day_chart.h).
#include "daemon/render/day_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "daemon/render/html_report.h"
#include "daemon/render/web_pages.h"

namespace oomtriage::daemon {
namespace {

// The plot's width the labels are thinned for: a wide screen's plot at its narrowest (a window
// of 900 px, the breakpoint in day_chart_style()), and a phone's (a window of 320 px).
constexpr double kWidePlotPx = 780;
constexpr double kNarrowPlotPx = 260;
constexpr double kLabelPx = 56;  // "Dec 12" in 12 px text, with room between labels

// The list of jobs a bar or legend entry stands for: those with an OOM of `key` in the days.
std::string list_link(const DayChart& chart, const std::string& key, const std::string& from,
                      const std::string& to) {
  JobsPageFilter f;
  (chart.filter == "family" ? f.family : f.phase) = key;
  f.from = from;
  f.to = to;
  return "/" + jobs_query(f, 1);
}

}  // namespace

size_t label_every(size_t days, double plot_px, double label_px) {
  if (days == 0 || plot_px <= 0) return 1;
  const double slot = plot_px / static_cast<double>(days);
  return std::max<size_t>(1, static_cast<size_t>(std::ceil(label_px / slot)));
}

std::string short_day(const std::string& day) {
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (day.size() != 10 || day[4] != '-' || day[7] != '-') return day;
  const int month = std::atoi(day.substr(5, 2).c_str());
  const int date = std::atoi(day.substr(8, 2).c_str());
  if (month < 1 || month > 12 || date < 1 || date > 31) return day;
  return fmt::format("{} {}", kMonths[static_cast<size_t>(month - 1)], date);
}

std::string render_day_chart(const DayChart& chart, const std::vector<db::DayCount>& counts) {
  const auto label = [&](const std::string& key) {
    return chart.label_of ? chart.label_of(key) : key;
  };
  const std::vector<std::string>& days = chart.days;
  std::map<std::string, std::map<std::string, int64_t>> by_day;
  std::map<std::string, int64_t> totals;
  for (const auto& c : counts) {
    by_day[c.day][c.key] += c.count;
    totals[c.key] += c.count;
  }
  // Keys by total, biggest at the bottom of each bar.
  std::vector<std::string> keys;
  for (const auto& [key, total] : totals) keys.push_back(key);
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const auto& a, const auto& b) { return totals[a] > totals[b]; });
  int64_t top = 1;
  for (const auto& [day, parts] : by_day) {
    int64_t sum = 0;
    for (const auto& [key, n] : parts) sum += n;
    top = std::max(top, sum);
  }
  // One unit of 10 per day, 100 high: the SVG is stretched to the plot's box (non-scaling
  // strokes keep its lines thin), so nothing in it is text.
  const size_t n = std::max<size_t>(1, days.size());
  const double width = 10.0 * static_cast<double>(n);
  std::string out = fmt::format(
      "<div class=\"chart\"><div class=\"plot\"><span class=\"tick\" style=\"top:0\">{}</span>"
      "<span class=\"tick\" style=\"top:50%\">{}</span>\n"
      "<svg id=\"{}\" viewBox=\"0 0 {} 100\" preserveAspectRatio=\"none\" role=\"img\" "
      "aria-label=\"OOMs per day\">\n<rect x=\"0\" y=\"0\" width=\"{}\" height=\"100\" "
      "fill=\"var(--plot)\"/>\n",
      top, top / 2, html_escape(chart.id), width, width);
  for (const double y : {0.0, 100.0 * (1.0 - static_cast<double>(top / 2) / top)}) {
    out += fmt::format(
        "<line x1=\"0\" x2=\"{}\" y1=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"var(--grid)\" "
        "vector-effect=\"non-scaling-stroke\"/>\n",
        width, y, y);
  }
  for (size_t i = 0; i < days.size(); ++i) {
    const auto it = by_day.find(days[i]);
    if (it == by_day.end()) continue;
    double y = 100.0;
    for (const auto& key : keys) {
      const auto part = it->second.find(key);
      if (part == it->second.end()) continue;
      const double h = 100.0 * static_cast<double>(part->second) / static_cast<double>(top);
      y -= h;
      out += fmt::format(
          "<a href=\"{}\"><rect class=\"bar\" data-day=\"{}\" data-key=\"{}\" data-count=\"{}\" "
          "x=\"{:.2f}\" y=\"{:.2f}\" width=\"7.6\" height=\"{:.2f}\" fill=\"{}\"><title>{}: {} "
          "{}</title></rect></a>\n",
          html_escape(list_link(chart, key, days[i], days[i])), html_escape(days[i]),
          html_escape(key), part->second, 10.0 * static_cast<double>(i) + 1.2, y, h,
          chart.color_of(key), html_escape(days[i]), part->second, html_escape(label(key)));
    }
  }
  out += "</svg></div>\n<div class=\"days\">";
  // Labels counted back from the newest day, so today always has one and the spacing is even.
  const size_t wide = label_every(days.size(), kWidePlotPx, kLabelPx);
  const size_t narrow = label_every(days.size(), kNarrowPlotPx, kLabelPx);
  for (size_t i = 0; i < days.size(); ++i) {
    const size_t back = days.size() - 1 - i;
    const bool w = back % wide == 0, nr = back % narrow == 0;
    if (!w && !nr) continue;
    // The newest label ends at the plot's right edge, the oldest begins at its left: neither
    // reaches past the page.
    const double center = 100.0 * (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    const std::string place = back == 0 ? "right:0"
                              : i == 0  ? "left:0"
                                        : fmt::format("left:{:.2f}%", center);
    out += fmt::format("<span class=\"{}{}{}\" style=\"{}\" title=\"{}\">{}</span>", w ? "w" : "",
                       w && nr ? " " : "", nr ? "n" : "",
                       place + (back == 0 || i == 0 ? "" : ";transform:translateX(-50%)"),
                       html_escape(days[i]), html_escape(short_day(days[i])));
  }
  out += "</div></div>\n<div class=\"legend\">";
  const std::string first = days.empty() ? "" : days.front();
  for (const auto& key : keys) {
    out += fmt::format(
        "<a class=\"key\" href=\"{}\"><span class=\"sw\" style=\"background:{}\"></span>{} "
        "({})</a>",
        html_escape(list_link(chart, key, first, "")), chart.color_of(key), html_escape(label(key)),
        totals[key]);
  }
  if (keys.empty()) out += "<span class=\"muted\">no OOMs in the window</span>";
  return out + "</div>\n";
}

const char* day_chart_style() {
  return R"css(
.chart{margin:0 0 4px 36px}
.chart .plot{position:relative}
.chart svg{width:100%;height:180px}
.chart .tick{position:absolute;left:-36px;width:32px;text-align:right;font-size:12px;line-height:1;color:var(--muted)}
.chart .days{position:relative;height:20px;font-size:12px;color:var(--muted)}
.chart .days span{position:absolute;top:3px;white-space:nowrap;line-height:1;display:none}
.chart .days span.w{display:inline}
.legend a.key{color:inherit;text-decoration:none}.legend a.key:hover{text-decoration:underline}
@media (max-width:899px){.chart .days span.w{display:none}.chart .days span.n{display:inline}}
)css";
}

}  // namespace oomtriage::daemon
