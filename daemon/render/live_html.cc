// daemon/render/live_html.cc: the job page's "Now" section (daemon/render/live_html.h).
#include "daemon/render/live_html.h"

#include <fmt/format.h>

#include "daemon/common/clock.h"
#include "daemon/render/html_report.h"
#include "daemon/render/live_text.h"

namespace oomtriage::daemon {

void set_live(ReportView& view, const db::JobSummary& job, int64_t now) {
  view.live = LiveView{job, now};
}

std::string status_class(std::string_view status) {
  if (status.starts_with("crashed")) return "crashed";
  if (status == "completed" || status == "running" || status == "stalled")
    return std::string(status);
  return "other";
}

std::string live_section(const ReportView& view) {
  if (!view.live) return "";
  const db::JobSummary& job = view.live->job;
  const db::LiveState& live = job.live;
  const std::vector<std::string> marks = warning_marks(job);
  if (live.empty() && !runs_now(job) && marks.empty()) return "";
  const std::string status = job.status();
  std::string out =
      fmt::format("<section id=\"now\"><h2>Now</h2>\n<p><span class=\"badge {}\">{}</span>",
                  status_class(status), html_escape(status));
  for (const std::string& mark : marks)
    out += fmt::format(" <span class=\"mark\">{}</span>", html_escape(mark));
  if (status == "stalled" && live.stalled_since) {
    out += fmt::format(" <b class=\"silent\">silent for {}</b>",
                       duration_text(view.live->now - *live.stalled_since));
  }
  out += "</p>\n<dl class=\"live\">";
  const auto fact = [&](const char* label, const std::string& value, const char* cls = "") {
    out += fmt::format("<dt>{}</dt><dd{}>{}</dd>", label,
                       *cls ? fmt::format(" class=\"{}\"", cls) : "", html_escape(value));
  };
  fact("step", progress_text(live.step, live.total_steps));
  fact("rate", rate_text(live.steps_per_second));
  fact("ETA", eta_text(job));
  fact("loss", loss_text(live.loss));
  fact("phase", live.phase.empty() ? "-" : live.phase);
  fact("last write (UTC)", utc_time(last_write_or_seen(job), "%Y-%m-%d %H:%M:%S"), "mono");
  if (!live.last_line.empty()) fact("last line", live.last_line, "mono");
  return out + "</dl></section>\n";
}

const char* live_style() {
  return R"css(
.badge.stalled{background:#b45309}.mark{display:inline-block;padding:0 6px;margin:1px 0;border:1px solid #d62728;border-radius:8px;font-size:12px;color:#d62728;white-space:nowrap}
.silent{color:#b45309}dl.live dd{overflow-wrap:anywhere}
main{overflow-wrap:break-word}dd,.sub,pre,code{overflow-wrap:anywhere}
@media (max-width:600px){main{padding:16px 12px 32px}h1{font-size:22px}}
)css";
}

}  // namespace oomtriage::daemon
