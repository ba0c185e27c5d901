// daemon/render/web_pages.cc: the jobs list, the fleet overview and the error page of
// `oomtriage serve`, in the report's stylesheet (daemon/render/html_report.cc).
#include "daemon/render/web_pages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <functional>
#include <map>
#include <set>

#include "daemon/common/clock.h"
#include "daemon/common/version.h"
#include "daemon/render/day_chart.h"
#include "daemon/render/html_report.h"
#include "daemon/render/live_html.h"
#include "daemon/render/live_text.h"
#include "parsers/family_names.h"

namespace oomtriage::daemon {
namespace {

std::string esc(std::string_view text) { return html_escape(text); }

// The list's and the overview's own rules on top of the report's stylesheet.
constexpr const char* kPageStyle = R"css(
main{max-width:1240px}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600}td.num,th.num{text-align:right}
form.filters{display:flex;flex-wrap:wrap;gap:8px 12px;align-items:end;margin:10px 0 16px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
input,select,button{font:inherit;font-size:14px;padding:3px 6px;background:var(--card);color:var(--fg);border:1px solid var(--line);border-radius:4px;max-width:100%}
.pager{display:flex;flex-wrap:wrap;gap:18px;margin:14px 0}.quiet{color:#d62728;font-weight:600}
nav.top{display:flex;flex-wrap:wrap;gap:4px 18px;margin:0 0 10px;font-size:14px}
.bar{shape-rendering:crispEdges}.refresh{font-size:13px;margin:0 0 8px}footer{overflow-wrap:anywhere}
a.job{overflow-wrap:anywhere}
@media (max-width:1199px){
table.cards thead{display:none}
table.cards,table.cards tbody,table.cards tr,table.cards td{display:block}
table.cards tr{border:1px solid var(--line);border-radius:8px;padding:6px 10px;margin:0 0 10px;background:var(--card)}
table.cards td{border:0;padding:2px 0;overflow-wrap:anywhere}table.cards td.num{text-align:left}
table.cards td[data-label]::before{content:attr(data-label);display:inline-block;min-width:7em;margin-right:8px;color:var(--muted);font-size:12px}
}
)css";

constexpr std::array<const char*, 8> kOutcomes = {"crashed_oom", "crashed_other", "completed",
                                                  "stopped",     "running",       "unknown"};
constexpr std::array<const char*, 8> kPhases = {
    "model_load", "quantize", "cache_latents", "cache_text_embeddings",
    "train_step", "sampling", "saving",        "unknown"};

std::string head(const std::string& title) {
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
      "<meta name=\"color-scheme\" content=\"light dark\">\n<title>{}</title>\n"
      "<style>{}{}{}{}</style></head>\n<body><main>\n"
      "<nav class=\"top\"><a href=\"/\">Jobs</a><a href=\"/fleet\">Fleet</a></nav>\n",
      esc(title), html_style(), live_style(), kPageStyle, day_chart_style());
}

std::string foot(const std::string& store, const std::string& made_at) {
  return fmt::format("<footer>oomtriage {} · {} · made {}</footer>\n</main></body></html>\n",
                     kVersion, esc(store), esc(made_at));
}

std::string select(const char* name, const char* label, const std::string& current,
                   const auto& options) {
  std::string out =
      fmt::format("<label>{}<select name=\"{}\"><option value=\"\">any</option>", label, name);
  for (const char* option : options) {
    if (option == nullptr) continue;
    out += fmt::format("<option{}>{}</option>", current == option ? " selected" : "", option);
  }
  return out + "</select></label>";
}

std::string text_input(const char* name, const char* label, const std::string& value) {
  return fmt::format("<label>{}<input name=\"{}\" value=\"{}\" size=\"12\"></label>", label, name,
                     esc(value));
}

std::string gib(uint64_t bytes) {
  return fmt::format("{:.1f}", static_cast<double>(bytes) / (1ull << 30));
}

// The colour of a phase (as the report's timeline draws it) or of the n-th model family.
std::string phase_color(const std::string& phase) {
  if (phase == "train_step") return html_colors::kTrainStep;
  if (phase == "sampling") return html_colors::kSampling;
  if (phase == "model_load" || phase == "quantize") return html_colors::kLoading;
  if (phase.starts_with("cache")) return html_colors::kCaching;
  if (phase == "saving") return html_colors::kSaving;
  return "#6b7280";
}
constexpr std::array<const char*, 10> kPalette = {"#4c78a8", "#f58518", "#54a24b", "#e45756",
                                                  "#72b7b2", "#b279a2", "#ff9da6", "#9d755d",
                                                  "#eeca3b", "#bab0ac"};

std::string quiet_for(int64_t seconds) {
  if (seconds < 7200) return fmt::format("{} min", seconds / 60);
  if (seconds < 2 * 86400) return fmt::format("{} h", seconds / 3600);
  return fmt::format("{} days", seconds / 86400);
}

}  // namespace

std::string url_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string jobs_query(const JobsPageFilter& f, size_t page) {
  std::string out;
  const auto add = [&](const char* name, const std::string& value) {
    if (!value.empty())
      out += fmt::format("{}{}={}", out.empty() ? "?" : "&", name, url_encode(value));
  };
  add("host", f.host);
  add("outcome", f.outcome);
  add("phase", f.phase);
  add("trainer", f.trainer);
  add("family", f.family);
  add("since", f.since);
  add("from", f.from);
  add("to", f.to);
  add("q", f.text);
  if (page > 1) add("page", std::to_string(page));
  if (!f.refresh) add("refresh", "0");
  return out;
}

JobRow make_job_row(const db::JobSummary& job, const std::string& shown_name, int64_t now) {
  JobRow row;
  row.key = job.key;
  row.name = shown_name;
  row.host = job.host;
  row.trainer = job.trainer;
  row.outcome = job.outcome;
  row.phase = job.last_phase.empty() ? "-" : job.last_phase;
  row.step = job.last_step ? std::to_string(*job.last_step) : "-";
  row.top_fix = job.top_fix.empty() ? "-" : job.top_fix;
  row.last_seen = utc_time(last_write_or_seen(job), "%Y-%m-%d %H:%M:%S");
  row.runs = job.runs;
  if (job.gpu_peak_bytes && job.gpu_total_bytes) {
    row.gpu =
        fmt::format("{:.1f}/{:.1f} GiB", static_cast<double>(*job.gpu_peak_bytes) / (1ull << 30),
                    static_cast<double>(*job.gpu_total_bytes) / (1ull << 30));
  }
  row.family = job.family.empty() ? "" : parsers::family_display_name(job.family);
  row.status = job.status();
  row.progress = progress_text(job.live.step, job.live.total_steps);
  row.rate = rate_text(job.live.steps_per_second);
  row.eta = eta_text(job);
  row.loss = loss_text(job.live.loss);
  if (row.status == "stalled" && job.live.stalled_since)
    row.silent_for = duration_text(now - *job.live.stalled_since);
  row.marks = warning_marks(job);
  row.runs_now = runs_now(job);
  return row;
}

bool list_refreshes(const JobsPageView& view) {
  return view.filter.refresh && std::any_of(view.rows.begin(), view.rows.end(),
                                            [](const JobRow& r) { return r.runs_now; });
}

namespace {

// What the day filter asks, in words: "Jobs with an OOM in sampling on 2026-12-04."
std::string day_filter_note(const JobsPageFilter& f) {
  if (f.from.empty() && f.to.empty()) return "";
  std::string what = "Jobs with an OOM";
  if (!f.phase.empty()) what += " in " + f.phase;
  if (!f.family.empty()) what += " of family " + f.family;
  if (f.from == f.to) return what + " on " + f.from + " (UTC).";
  if (f.to.empty()) return what + " since " + f.from + " (UTC).";
  if (f.from.empty()) return what + " up to " + f.to + " (UTC).";
  return what + " from " + f.from + " to " + f.to + " (UTC).";
}

// A fix's name with its id beside, linked to where the job's page ranks it.
std::string fix_cell(const std::string& fix_id, const std::string& href) {
  if (fix_id.empty() || fix_id == "-") return "-";
  const std::string name = fix_name(fix_id);
  const std::string text = name.empty()
                               ? fmt::format("<code>{}</code>", esc(fix_id))
                               : fmt::format("{} (<code>{}</code>)", esc(name), esc(fix_id));
  return href.empty() ? text : fmt::format("<a href=\"{}\">{}</a>", href, text);
}

std::string status_cell(const JobRow& r) {
  std::string out =
      fmt::format("<span class=\"badge {}\">{}</span>", status_class(r.status), esc(r.status));
  for (const std::string& mark : r.marks)
    out += fmt::format(" <span class=\"mark\">{}</span>", esc(mark));
  if (!r.silent_for.empty())
    out += fmt::format("<div class=\"silent\">silent {}</div>", esc(r.silent_for));
  return out;
}

}  // namespace

std::string render_jobs_page(const JobsPageView& v) {
  std::string out = head("oomtriage: jobs");
  out +=
      "<header><h1>Jobs</h1><p class=\"sub\">Newest first. A job's name opens its story: where "
      "it died, of what, and the fixes ranked.</p></header>\n";
  // The questions asked most, one click each.
  out +=
      "<nav class=\"top\" id=\"shortcuts\"><a href=\"/?outcome=crashed_oom&amp;since=24h\">OOMs "
      "in the last 24 h</a><a href=\"/?outcome=crashed_oom\">all OOMs</a><a "
      "href=\"/fleet#near-limit\">closest to the limit</a></nav>\n";
  const JobsPageFilter& f = v.filter;
  out += "<form class=\"filters\" method=\"get\" action=\"/\">";
  out += select("outcome", "outcome", f.outcome, kOutcomes);
  out += select("phase", "phase", f.phase, kPhases);
  if (v.fleet) out += text_input("host", "host", f.host);
  out += text_input("trainer", "trainer", f.trainer);
  out += text_input("family", "model family", f.family);
  out += select("since", "seen in", f.since, std::array<const char*, 4>{"1h", "24h", "7d", "30d"});
  out += text_input("q", "name contains", f.text);
  out += fmt::format(
      "<label>OOM from<input type=\"date\" name=\"from\" value=\"{}\"></label><label>OOM to"
      "<input type=\"date\" name=\"to\" value=\"{}\"></label>",
      esc(f.from), esc(f.to));
  if (!f.refresh) out += "<input type=\"hidden\" name=\"refresh\" value=\"0\">";
  out += "<button type=\"submit\">Filter</button>";
  JobsPageFilter unfiltered;
  unfiltered.refresh = f.refresh;
  if (jobs_query(f, 1) != jobs_query(unfiltered, 1))
    out += fmt::format(" <a href=\"/{}\">clear</a>", esc(jobs_query(unfiltered, 1)));
  out += "</form>\n";
  if (const std::string note = day_filter_note(f); !note.empty())
    out += fmt::format("<p class=\"filter-note\">{}</p>\n", esc(note));
  for (const std::string& note : v.notes)
    out += fmt::format("<p class=\"muted filter-note\">{}</p>\n", esc(note));
  // While a job runs the page reloads itself (a Refresh header, no script): say so, and how
  // to stop it where the page stands.
  const bool running =
      std::any_of(v.rows.begin(), v.rows.end(), [](const JobRow& r) { return r.runs_now; });
  if (running) {
    JobsPageFilter toggled = f;
    toggled.refresh = !f.refresh;
    out += f.refresh ? fmt::format(
                           "<p class=\"muted refresh\">A job is under way: this page reloads "
                           "every {} s. <a href=\"/{}\">Stop reloading</a></p>\n",
                           kRefreshSeconds, esc(jobs_query(toggled, f.page)))
                     : fmt::format(
                           "<p class=\"muted refresh\"><a href=\"/{}\">Reload every {} s</a> "
                           "while a job is under way</p>\n",
                           esc(jobs_query(toggled, f.page)), kRefreshSeconds);
  }
  if (v.rows.empty()) {
    out += fmt::format(
        "<p class=\"muted\" id=\"no-jobs\">No jobs{}.</p>\n",
        jobs_query(f, 1) == jobs_query(unfiltered, 1) ? " yet" : " match these filters");
  } else {
    out += "<table id=\"jobs\" class=\"cards\"><thead><tr><th>job</th>";
    if (v.fleet) out += "<th>host</th>";
    out +=
        "<th>status</th><th class=\"num\">step</th><th>rate</th><th>ETA</th><th "
        "class=\"num\">loss</th><th>last OOM</th><th>top fix</th><th class=\"num\">runs</th>"
        "<th>GPU peak</th><th>last seen (UTC)</th></tr></thead><tbody>\n";
    for (const JobRow& r : v.rows) {
      out += fmt::format(
          "<tr><td><a class=\"job\" href=\"/job/{}\">{}</a><div class=\"muted\">{}"
          "</div></td>",
          url_encode(r.key), esc(r.name),
          esc(r.family.empty() ? r.trainer : r.trainer + " · " + r.family));
      if (v.fleet) out += fmt::format("<td data-label=\"host\">{}</td>", esc(r.host));
      const std::string last_oom = r.phase == "-"  ? "-"
                                   : r.step == "-" ? r.phase
                                                   : r.phase + " · step " + r.step;
      out += fmt::format(
          "<td data-label=\"status\">{}</td><td class=\"num\" data-label=\"step\">{}</td>"
          "<td data-label=\"rate\">{}</td><td data-label=\"ETA\">{}</td><td class=\"num\" "
          "data-label=\"loss\">{}</td><td data-label=\"last OOM\">{}</td><td data-label=\"top "
          "fix\">{}</td><td class=\"num\" data-label=\"runs\">{}</td><td data-label=\"GPU "
          "peak\">{}</td><td class=\"mono\" data-label=\"last seen\">{}</td></tr>\n",
          status_cell(r), esc(r.progress), esc(r.rate), esc(r.eta), esc(r.loss), esc(last_oom),
          fix_cell(r.top_fix, "/job/" + url_encode(r.key) + "#fixes"), r.runs,
          r.gpu.empty() ? "-" : esc(r.gpu), esc(r.last_seen));
    }
    out += "</tbody></table>\n";
  }
  out += "<nav class=\"pager\">";
  if (f.page > 1) {
    out += fmt::format("<a rel=\"prev\" href=\"/{}\">← newer</a>", esc(jobs_query(f, f.page - 1)));
  }
  if (f.page > 1 || v.more) out += fmt::format("<span class=\"muted\">page {}</span>", f.page);
  if (v.more)
    out += fmt::format("<a rel=\"next\" href=\"/{}\">older →</a>", esc(jobs_query(f, f.page + 1)));
  out += "</nav>\n";
  return out + foot(v.store, v.made_at);
}

std::string render_job_choice_page(const std::string& asked,
                                   const std::vector<db::JobSummary>& jobs,
                                   const std::vector<std::string>& shown, bool fleet,
                                   const std::string& store, const std::string& made_at) {
  std::string out = head("oomtriage: " + asked);
  out += fmt::format(
      "<header><h1>{}</h1><p class=\"sub\">{} jobs have this name: pick one.</p></header>\n",
      esc(asked), jobs.size());
  out += "<table id=\"choice\" class=\"cards\"><thead><tr><th>job</th>";
  if (fleet) out += "<th>host</th>";
  out += "<th>folder</th><th>last seen (UTC)</th><th>status</th></tr></thead><tbody>\n";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const db::JobSummary& job = jobs[i];
    out += fmt::format("<tr><td><a class=\"job\" href=\"/job/{}\">{}</a></td>", url_encode(job.key),
                       esc(i < shown.size() ? shown[i] : job.name));
    if (fleet) out += fmt::format("<td data-label=\"host\">{}</td>", esc(job.host));
    const std::string status = job.status();
    out += fmt::format(
        "<td class=\"mono\" data-label=\"folder\">{}</td><td class=\"mono\" data-label=\"last "
        "seen\">{}</td><td data-label=\"status\"><span class=\"badge {}\">{}</span></td></tr>\n",
        esc(job.home.empty() ? job.log_dir : job.home),
        esc(utc_time(last_write_or_seen(job), "%Y-%m-%d %H:%M:%S")), status_class(status),
        esc(status));
  }
  out += "</tbody></table>\n";
  return out + foot(store, made_at);
}

std::string render_fleet_page(const FleetPageView& v) {
  const db::FleetOverview& o = v.overview;
  std::string out = head("oomtriage: fleet");
  out += fmt::format(
      "<header><h1>Fleet</h1><p class=\"sub\">The last {} days. A bar or a legend entry lists "
      "its jobs.</p></header>\n",
      v.days);
  out += "<section id=\"by-phase\"><h2>OOMs per day, by phase</h2>\n";
  out += render_day_chart({"chart-phase", "phase", v.day_labels, phase_color, {}}, o.by_phase);
  out += "</section>\n<section id=\"by-family\"><h2>OOMs per day, by model family</h2>\n";
  std::map<std::string, std::string> family_colors;
  std::map<std::string, int64_t> family_totals;
  for (const auto& c : o.by_family) family_totals[c.key] += c.count;
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [family, total] : family_totals) ranked.emplace_back(-total, family);
  std::sort(ranked.begin(), ranked.end());
  for (size_t i = 0; i < ranked.size(); ++i)
    family_colors[ranked[i].second] = kPalette[std::min(i, kPalette.size() - 1)];
  out +=
      render_day_chart({"chart-family", "family", v.day_labels,
                        [&](const std::string& key) { return family_colors[key]; },
                        [](const std::string& key) { return parsers::family_display_name(key); }},
                       o.by_family);
  out += "</section>\n<section id=\"healed-by\"><h2>Fixes that healed jobs</h2>\n";
  if (o.healed_by.empty()) {
    out += "<p class=\"muted\">No job was healed by <code>oomtriage run --heal</code> yet.</p>\n";
  } else {
    out +=
        "<table class=\"cards\"><thead><tr><th>fix</th><th class=\"num\">jobs healed</th></tr>"
        "</thead><tbody>";
    for (const auto& fix : o.healed_by) {
      out += fmt::format("<tr><td>{}</td><td class=\"num\" data-label=\"jobs healed\">{}</td></tr>",
                         fix_cell(fix.fix_id, ""), fix.jobs);
    }
    out += "</tbody></table>\n";
  }
  out += "</section>\n<section id=\"nodes\"><h2>Nodes</h2>\n";
  if (o.nodes.empty()) {
    out += "<p class=\"muted\">No node has shipped yet.</p>\n";
  } else {
    const char* last = v.fleet ? "last shipped" : "last seen";
    out += fmt::format(
        "<table class=\"cards\"><thead><tr><th>node</th><th>{} (UTC)</th><th "
        "class=\"num\">jobs</th><th></th></tr></thead><tbody>",
        last);
    for (const auto& node : o.nodes) {
      const int64_t silent = v.now - node.last_shipped;
      const bool quiet = v.fleet && silent > v.quiet_after_seconds;
      out += fmt::format(
          "<tr{}><td>{}</td><td class=\"mono\" data-label=\"{}\">{}</td><td class=\"num\" "
          "data-label=\"jobs\">{}</td><td>{}</td></tr>",
          quiet ? " class=\"quiet\"" : "", node.host.empty() ? "this node" : esc(node.host), last,
          esc(utc_time(node.last_shipped, "%Y-%m-%d %H:%M")), node.jobs,
          quiet ? "quiet for " + quiet_for(silent) : "");
    }
    out += "</tbody></table>\n";
  }
  out += "</section>\n<section id=\"near-limit\"><h2>Closest to their card's limit</h2>\n";
  if (o.near_limit.empty()) {
    out +=
        "<p class=\"muted\">No sampled GPU memory in the window (the daemon samples it where "
        "NVML is available).</p>\n";
  } else {
    out += "<table class=\"cards\"><thead><tr><th>job</th>";
    if (v.fleet) out += "<th>host</th>";
    out +=
        "<th class=\"num\">peak / card (GiB)</th><th class=\"num\">share</th><th>peak "
        "phase</th></tr></thead><tbody>";
    for (const auto& near : o.near_limit) {
      out += fmt::format("<tr><td><a href=\"/job/{}\">{}</a></td>", url_encode(near.key),
                         esc(near.name));
      if (v.fleet) out += fmt::format("<td data-label=\"host\">{}</td>", esc(near.host));
      out += fmt::format(
          "<td class=\"num\" data-label=\"peak / card\">{} / {}</td><td class=\"num\" "
          "data-label=\"share\">{:.1f}%</td><td data-label=\"peak phase\">{}</td></tr>",
          gib(near.peak_bytes), gib(near.total_bytes),
          100.0 * static_cast<double>(near.peak_bytes) / static_cast<double>(near.total_bytes),
          esc(near.phase));
    }
    out += "</tbody></table>\n";
  }
  out += "</section>\n";
  return out + foot(v.store, v.made_at);
}

std::string render_error_page(int status, const std::string& title, const std::string& detail) {
  std::string out = head(fmt::format("oomtriage: {}", title));
  out += fmt::format("<header><h1>{}</h1><p class=\"sub\">{} · {}</p></header>\n", esc(title),
                     status, esc(detail));
  return out + "</main></body></html>\n";
}

}  // namespace oomtriage::daemon
