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
#include "daemon/render/html_report.h"
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
input,select,button{font:inherit;font-size:14px;padding:3px 6px;background:var(--card);color:var(--fg);border:1px solid var(--line);border-radius:4px}
.pager{display:flex;gap:18px;margin:14px 0}.quiet{color:#d62728;font-weight:600}
nav.top{display:flex;gap:18px;margin:0 0 10px;font-size:14px}
.bar{shape-rendering:crispEdges}
)css";

constexpr std::array<const char*, 8> kOutcomes = {"crashed_oom", "crashed_other", "completed",
                                                  "stopped",     "running",       "unknown"};
constexpr std::array<const char*, 8> kPhases = {
    "model_load", "quantize", "cache_latents", "cache_text_embeddings",
    "train_step", "sampling", "saving",        "unknown"};

std::string badge_class(std::string_view outcome) {
  if (outcome.starts_with("crashed")) return "crashed";
  if (outcome == "completed") return "completed";
  if (outcome == "running") return "running";
  return "other";
}

std::string head(const std::string& title) {
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
      "<meta name=\"color-scheme\" content=\"light dark\">\n<title>{}</title>\n"
      "<style>{}{}</style></head>\n<body><main>\n"
      "<nav class=\"top\"><a href=\"/\">Jobs</a><a href=\"/fleet\">Fleet</a></nav>\n",
      esc(title), html_style(), kPageStyle);
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

// Stacked bars of counts per day: one <rect class="bar"> per day and key, with its figures in
// data- attributes and a <title> for the pointer.
std::string day_chart(const std::vector<db::DayCount>& counts, const std::vector<std::string>& days,
                      const char* id,
                      const std::function<std::string(const std::string&)>& color_of,
                      const std::function<std::string(const std::string&)>& label_of = {}) {
  const auto label = [&](const std::string& key) { return label_of ? label_of(key) : key; };
  std::map<std::string, std::map<std::string, int64_t>> by_day;
  std::map<std::string, int64_t> totals;
  for (const auto& c : counts) {
    by_day[c.day][c.key] += c.count;
    totals[c.key] += c.count;
  }
  // Keys by total, biggest at the bottom of each bar.
  std::vector<std::string> keys;
  for (const auto& [key, total] : totals) keys.push_back(key);
  std::sort(keys.begin(), keys.end(),
            [&](const auto& a, const auto& b) { return totals[a] > totals[b]; });
  int64_t top = 1;
  for (const auto& [day, parts] : by_day) {
    int64_t sum = 0;
    for (const auto& [key, n] : parts) sum += n;
    top = std::max(top, sum);
  }
  constexpr double kWidth = 940, kHeight = 220, kLeft = 44, kBottom = 24, kTop = 8;
  const double slot = (kWidth - kLeft) / std::max<size_t>(1, days.size());
  std::string out = fmt::format(
      "<svg id=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"OOMs per day\">\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"var(--plot)\"/>\n",
      id, kWidth, kHeight, kLeft, kTop, kWidth - kLeft, kHeight - kTop - kBottom);
  const double plot = kHeight - kTop - kBottom;
  for (const int64_t tick : {top, top / 2}) {
    const double y = kTop + plot * (1.0 - static_cast<double>(tick) / top);
    out += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"var(--grid)\"/><text "
        "x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kLeft, kWidth, y, y, kLeft - 4, y + 4, tick);
  }
  for (size_t i = 0; i < days.size(); ++i) {
    const double x = kLeft + slot * i + slot * 0.12;
    double y = kTop + plot;
    const auto it = by_day.find(days[i]);
    if (it != by_day.end()) {
      for (const auto& key : keys) {
        const auto part = it->second.find(key);
        if (part == it->second.end()) continue;
        const double h = plot * static_cast<double>(part->second) / top;
        y -= h;
        out += fmt::format(
            "<rect class=\"bar\" data-day=\"{}\" data-key=\"{}\" data-count=\"{}\" x=\"{:.1f}\" "
            "y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}: {} {}</title>"
            "</rect>\n",
            days[i], esc(key), part->second, x, y, slot * 0.76, h, color_of(key), days[i],
            part->second, esc(label(key)));
      }
    }
    if (i % 7 == 0 || i + 1 == days.size()) {
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                         kLeft + slot * (i + 0.5), kHeight - 6, days[i].substr(5));
    }
  }
  out += "</svg>\n<div class=\"legend\">";
  for (const auto& key : keys) {
    out += fmt::format("<span><span class=\"sw\" style=\"background:{}\"></span>{} ({})</span>",
                       color_of(key), esc(label(key)), totals[key]);
  }
  if (keys.empty()) out += "<span class=\"muted\">no OOMs in the window</span>";
  return out + "</div>\n";
}

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
  add("q", f.text);
  if (page > 1) add("page", std::to_string(page));
  return out;
}

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
  out += "<button type=\"submit\">Filter</button>";
  if (!jobs_query(f, 1).empty()) out += " <a href=\"/\">clear</a>";
  out += "</form>\n";
  for (const std::string& note : v.notes)
    out += fmt::format("<p class=\"muted filter-note\">{}</p>\n", esc(note));
  if (v.rows.empty()) {
    out += fmt::format("<p class=\"muted\" id=\"no-jobs\">No jobs{}.</p>\n",
                       jobs_query(f, 1).empty() ? " yet" : " match these filters");
  } else {
    out += "<table id=\"jobs\"><thead><tr><th>job</th>";
    if (v.fleet) out += "<th>host</th>";
    out +=
        "<th>outcome</th><th>phase</th><th class=\"num\">step</th><th>top fix</th><th "
        "class=\"num\">runs</th><th>GPU peak</th><th>last seen (UTC)</th></tr></thead>"
        "<tbody>\n";
    for (const JobRow& r : v.rows) {
      out += fmt::format(
          "<tr><td><a class=\"job\" href=\"/job/{}\">{}</a><div class=\"muted\">{}"
          "</div></td>",
          url_encode(r.key), esc(r.name),
          esc(r.family.empty() ? r.trainer : r.trainer + " · " + r.family));
      if (v.fleet) out += fmt::format("<td>{}</td>", esc(r.host));
      out += fmt::format(
          "<td><span class=\"badge {}\">{}</span></td><td>{}</td><td class=\"num\">{}</td>"
          "<td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"mono\">{}</td></tr>\n",
          badge_class(r.outcome), esc(r.outcome), esc(r.phase), esc(r.step),
          r.top_fix == "-" ? "-"
                           : fmt::format("<a href=\"/job/{}#fixes\"><code>{}</code></a>",
                                         url_encode(r.key), esc(r.top_fix)),
          r.runs, r.gpu.empty() ? "-" : esc(r.gpu), esc(r.last_seen));
    }
    out += "</tbody></table>\n";
  }
  out += "<nav class=\"pager\">";
  if (f.page > 1) {
    const std::string q = jobs_query(f, f.page - 1);
    out += fmt::format("<a rel=\"prev\" href=\"/{}\">← newer</a>", q);
  }
  if (f.page > 1 || v.more) out += fmt::format("<span class=\"muted\">page {}</span>", f.page);
  if (v.more)
    out += fmt::format("<a rel=\"next\" href=\"/{}\">older →</a>", jobs_query(f, f.page + 1));
  out += "</nav>\n";
  return out + foot(v.store, v.made_at);
}

std::string render_fleet_page(const FleetPageView& v) {
  const db::FleetOverview& o = v.overview;
  std::string out = head("oomtriage: fleet");
  out += fmt::format("<header><h1>Fleet</h1><p class=\"sub\">The last {} days.</p></header>\n",
                     v.days);
  out += "<section id=\"by-phase\"><h2>OOMs per day, by phase</h2>\n";
  out += day_chart(o.by_phase, v.day_labels, "chart-phase", phase_color);
  out += "</section>\n<section id=\"by-family\"><h2>OOMs per day, by model family</h2>\n";
  std::map<std::string, std::string> family_colors;
  std::map<std::string, int64_t> family_totals;
  for (const auto& c : o.by_family) family_totals[c.key] += c.count;
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [family, total] : family_totals) ranked.emplace_back(-total, family);
  std::sort(ranked.begin(), ranked.end());
  for (size_t i = 0; i < ranked.size(); ++i)
    family_colors[ranked[i].second] = kPalette[std::min(i, kPalette.size() - 1)];
  out += day_chart(
      o.by_family, v.day_labels, "chart-family",
      [&](const std::string& key) { return family_colors[key]; },
      [](const std::string& key) { return parsers::family_display_name(key); });
  out += "</section>\n<section id=\"healed-by\"><h2>Fixes that healed jobs</h2>\n";
  if (o.healed_by.empty()) {
    out += "<p class=\"muted\">No job was healed by <code>oomtriage run --heal</code> yet.</p>\n";
  } else {
    out += "<table><thead><tr><th>fix</th><th class=\"num\">jobs healed</th></tr></thead><tbody>";
    for (const auto& fix : o.healed_by) {
      out += fmt::format("<tr><td><code>{}</code></td><td class=\"num\">{}</td></tr>",
                         esc(fix.fix_id), fix.jobs);
    }
    out += "</tbody></table>\n";
  }
  out += "</section>\n<section id=\"nodes\"><h2>Nodes</h2>\n";
  if (o.nodes.empty()) {
    out += "<p class=\"muted\">No node has shipped yet.</p>\n";
  } else {
    out += fmt::format(
        "<table><thead><tr><th>node</th><th>last {} (UTC)</th><th "
        "class=\"num\">jobs</th><th></th></tr></thead><tbody>",
        v.fleet ? "shipped" : "seen");
    for (const auto& node : o.nodes) {
      const int64_t silent = v.now - node.last_shipped;
      const bool quiet = v.fleet && silent > v.quiet_after_seconds;
      out += fmt::format(
          "<tr{}><td>{}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
          quiet ? " class=\"quiet\"" : "", node.host.empty() ? "this node" : esc(node.host),
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
    out += "<table><thead><tr><th>job</th>";
    if (v.fleet) out += "<th>host</th>";
    out +=
        "<th class=\"num\">peak / card (GiB)</th><th class=\"num\">share</th><th>peak "
        "phase</th></tr></thead><tbody>";
    for (const auto& near : o.near_limit) {
      out += fmt::format("<tr><td><a href=\"/job/{}\">{}</a></td>", url_encode(near.key),
                         esc(near.name));
      if (v.fleet) out += fmt::format("<td>{}</td>", esc(near.host));
      out += fmt::format(
          "<td class=\"num\">{} / {}</td><td class=\"num\">{:.1f}%</td><td>{}</td></tr>",
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
