// daemon/render/day_chart.h
//
// /fleet's charts (daemon/render/web_pages.cc): stacked bars of counts per day, each bar and
// each legend entry a link to the jobs list filtered to what it counts. No script: the bars are
// SVG stretched to the page's width (so they fit a phone as well as a wide screen), and the
// numbers and day labels are HTML text beside them, so they stay readable at any width; the day
// labels are thinned by CSS, fewer on a narrow screen, never overlapping.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "db/store.h"

namespace oomtriage::daemon {

struct DayChart {
  std::string id;                 // the element's id ("chart-phase")
  std::string filter;             // the jobs list's parameter a key filters by: "phase" or "family"
  std::vector<std::string> days;  // "2026-12-05", oldest first, one per day of the window
  std::function<std::string(const std::string&)> color_of;
  std::function<std::string(const std::string&)> label_of;  // unset: the key itself
};

// Every how many days a label is written so that labels of `width_px` fit side by side on a
// plot `plot_px` wide: 1 when all fit.
size_t label_every(size_t days, double plot_px, double label_px);

// "Dec 5" for "2026-12-05"; the text as it is when it is not such a day.
std::string short_day(const std::string& day);

// The chart of `counts` (DayCount::key is the phase or family) with its legend.
std::string render_day_chart(const DayChart& chart, const std::vector<db::DayCount>& counts);

// The stylesheet the charts need, added to the pages' own.
const char* day_chart_style();

}  // namespace oomtriage::daemon
