// daemon/render/html_report.h
//
// `oomtriage report JOB --html FILE`: one self-contained page (inline CSS and SVG, no script, no
// network) to look at rather than read: the runs on a timeline with the fix each carried, the loss
// curve with each crash at its step, the GPU memory at each crash as a stacked bar, the phase and
// step with the lines that showed them, the ranked fixes as diffs, and the config diff between
// runs. Light and dark follow the reader's setting; it prints.
#pragma once

#include <string>
#include <string_view>

#include "daemon/render/report_view.h"

namespace oomtriage::daemon {

std::string render_html_report(const ReportView& report);

// Text made safe inside HTML elements and quoted attributes (control characters become '?').
std::string html_escape(std::string_view text);
// The pages' stylesheet (light, dark and print), for the other pages `oomtriage serve` draws.
const char* html_style();

// The colours the page draws with, in both schemes: tests find the chart's parts by them.
namespace html_colors {
inline constexpr const char* kInUse = "#4c78a8";
inline constexpr const char* kOther = "#9d755d";
inline constexpr const char* kFree = "#54a24b";
inline constexpr const char* kTried = "#f58518";
inline constexpr const char* kCrash = "#d62728";
inline constexpr const char* kRecovered = "#e6a700";
inline constexpr const char* kLoss = "#7b4fd0";
inline constexpr const char* kPlotLight = "#eef1f8";
inline constexpr const char* kPlotDark = "#1d212a";
// The GPU memory timeline's phases.
inline constexpr const char* kTrainStep = "#4c78a8";
inline constexpr const char* kSampling = "#f58518";
inline constexpr const char* kLoading = "#8c8c8c";
inline constexpr const char* kCaching = "#54a24b";
inline constexpr const char* kSaving = "#b279a2";
}  // namespace html_colors

}  // namespace oomtriage::daemon
