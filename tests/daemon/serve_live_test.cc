// tests/daemon/serve_live_test.cc
//
// `oomtriage serve` for jobs that are running (issue 47): the live fields as words
// (daemon/render/live_text.h), the list's and the job page's live columns drawn from JobSummary
// values, fixes by their names, /job/<name> with a choice where names repeat, /fleet's bars and
// legends as links to the jobs they count (on a node's store and on the fleet store), the list
// refreshing itself while a job runs, and every page laid out in headless Chromium at a phone's
// 400 px without reaching past the window.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "daemon/common/clock.h"
#include "daemon/render/day_chart.h"
#include "daemon/render/html_report.h"
#include "daemon/render/live_html.h"
#include "daemon/render/live_text.h"
#include "daemon/render/web_pages.h"
#include "db/fleet_store.h"
#include "db/store.h"
#include "tests/support/browser.h"
#include "tests/support/postgres.h"
#include "tests/support/serve_process.h"
#include "tests/support/store_rows.h"
#include "triage/fix_table.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

constexpr int64_t kDay = 86400;

// One OOM the test stored: which job, when, and how /fleet files it.
struct StoredOom {
  std::string job;
  int64_t created_at = 0;
  std::string phase;
  std::string family;
};

// A store of jobs whose OOMs fall on known days, as the daemon would have written them.
class LiveStore {
 public:
  explicit LiveStore(const fs::path& state) : db_(state / "oomtriage.db") {
    fs::create_directories(state);
    auto opened = db::Store::open(db_.string());
    REQUIRE(opened);
    store_ = std::move(*opened);
  }

  // A job `name` in `home` whose one run ended `outcome`, last written `age` seconds ago, with an
  // OOM at each of `ooms` (age in seconds, phase, family), oldest first.
  void add(const std::string& name, const std::string& home, const std::string& outcome,
           int64_t age, const std::vector<std::tuple<int64_t, std::string, std::string>>& ooms) {
    const int64_t now = daemon::unix_now();
    const int64_t first = ooms.empty() ? now - age : now - std::get<0>(ooms.front());
    db::Progress progress = progress_for_new_job(*store_, name, ++ino_, first, home);
    uint64_t offset = 0;
    for (const auto& [oom_age, phase, family] : ooms) {
      db::EventRow e;
      e.offset = offset += 100;
      e.kind = "cuda";
      e.phase = phase;
      e.model_family = family;
      e.step = 40;
      e.event_json = nlohmann::json{{"kind", "cuda"},
                                    {"phase", phase},
                                    {"step", 40},
                                    {"recovered", false},
                                    {"line", 9},
                                    {"total_steps", 100},
                                    {"message", "CUDA out of memory."}}
                         .dump();
      e.fixes_json = R"([{"id":"disable_sampling","rank":1,"title":"Turn preview sampling off",)"
                     R"("why":"w","changes":[],"cost":"c"}])";
      progress.events = {e};
      progress.offset = offset + 50;
      progress.outcome = outcome;
      REQUIRE(store_->commit_progress(progress, now - oom_age));
      ooms_.push_back({name, now - oom_age, phase, family});
    }
    progress.events.clear();
    progress.outcome = outcome;
    progress.offset = offset + 80;
    REQUIRE(store_->commit_progress(progress, now - age));
    REQUIRE(store_->upsert_job(name, home, "ai-toolkit", "/out", now - age));
  }

  db::Store& store() { return *store_; }
  const fs::path& path() const { return db_; }
  const std::vector<StoredOom>& ooms() const { return ooms_; }

 private:
  fs::path db_;
  std::unique_ptr<db::Store> store_;
  uint64_t ino_ = 0;
  std::vector<StoredOom> ooms_;
};

// The jobs of the tests below: one running, two sharing a name in two folders, a name with a
// space, a hostile name twice, and OOMs spread over the window (one job with two, in two phases
// on two days) and one before it.
void fill(LiveStore& s) {
  s.add("flux_run", "/out/flux_run", "running", 5, {});
  s.add("my_lora", "/out/a/my_lora", "crashed_oom", 3 * kDay, {{3 * kDay, "sampling", "flux.1"}});
  s.add("my_lora", "/out/b/my_lora", "crashed_oom", kDay, {{kDay, "train_step", "sdxl"}});
  s.add("solo lora", "/out/solo lora", "completed", 2 * kDay, {});
  s.add("<b>x</b>", "/out/p/<b>x</b>", "completed", 4 * kDay, {});
  s.add("<b>x</b>", "/out/q/<b>x</b>", "completed", 4 * kDay, {});
  s.add("sampled_today", "/out/sampled_today", "crashed_oom", 60, {{60, "sampling", "flux.1"}});
  s.add("stepped_today", "/out/stepped_today", "crashed_oom", 90, {{90, "train_step", "flux.1"}});
  s.add("twice", "/out/twice", "crashed_oom", kDay + 30,
        {{5 * kDay, "sampling", "flux.1"}, {kDay + 30, "train_step", "flux.1"}});
  s.add("old_sdxl", "/out/old_sdxl", "crashed_oom", 40 * kDay, {{40 * kDay, "sampling", "sdxl"}});
}

// The job links a list page shows: name as shown -> key.
std::multimap<std::string, std::string> listed(const std::string& page) {
  std::multimap<std::string, std::string> out;
  const std::regex link(R"re(<a class="job" href="/job/([^"]+)">([^<]*)</a>)re");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), link); it != std::sregex_iterator();
       ++it) {
    out.emplace((*it)[2], (*it)[1]);
  }
  return out;
}

std::string unescape(std::string text) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 1))
      text.replace(at, from.size(), to);
  }
  return text;
}

// A bar or a legend entry of /fleet: what it counts and where it leads.
struct ChartLink {
  std::string href;
  std::string day;  // "" for a legend entry
  std::string key;
  int count = 0;
};
std::vector<ChartLink> bars(const std::string& page) {
  std::vector<ChartLink> out;
  const std::regex bar(
      R"re(<a href="([^"]+)"><rect class="bar" data-day="([0-9-]+)" data-key="([^"]+)" data-count="(\d+)")re");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), bar); it != std::sregex_iterator();
       ++it) {
    out.push_back({unescape((*it)[1]), (*it)[2], (*it)[3], std::stoi((*it)[4])});
  }
  return out;
}
std::vector<ChartLink> legend_entries(const std::string& page) {
  std::vector<ChartLink> out;
  const std::regex entry(
      R"re(<a class="key" href="([^"]+)"><span class="sw" style="[^"]*"></span>([^<]*) \((\d+)\)</a>)re");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), entry);
       it != std::sregex_iterator(); ++it) {
    out.push_back({unescape((*it)[1]), "", (*it)[2], std::stoi((*it)[3])});
  }
  return out;
}

// Every bar of /fleet leads to the list of the jobs it counts, and every legend entry to the
// jobs of the whole window: as many as it says (each job here has at most one OOM per day and
// key, so jobs and OOMs are the same count), and exactly the ones stored.
void check_fleet_links(const ServeProcess& serve, const std::vector<StoredOom>& ooms) {
  const Fetched fleet = get(serve.url("/fleet"));
  REQUIRE(fleet.status == 200);
  const auto all_bars = bars(fleet.body);
  CHECK(all_bars.size() >= 6);  // phase and family bars of four days
  for (const ChartLink& bar : all_bars) {
    CAPTURE(bar.href);
    std::set<std::string> expected;
    for (const StoredOom& oom : ooms) {
      if (daemon::utc_time(oom.created_at, "%Y-%m-%d") == bar.day &&
          (oom.phase == bar.key || oom.family == bar.key)) {
        expected.insert(oom.job);
      }
    }
    const Fetched list = get(serve.url(bar.href));
    REQUIRE(list.status == 200);
    std::set<std::string> shown;
    for (const auto& [name, key] : listed(list.body))
      shown.insert(unescape(name.substr(0, name.find(" ("))));
    CHECK(static_cast<int>(listed(list.body).size()) == bar.count);
    CHECK(shown == expected);
  }
  const auto legend = legend_entries(fleet.body);
  CHECK(legend.size() >= 4);  // sampling, train_step; FLUX.1, SDXL
  const int64_t window_start = daemon::unix_now() - daemon::unix_now() % kDay - 29 * kDay;
  for (const ChartLink& entry : legend) {
    CAPTURE(entry.href);
    const Fetched list = get(serve.url(entry.href));
    REQUIRE(list.status == 200);
    int events = 0;
    std::set<std::string> expected;
    for (const StoredOom& oom : ooms) {
      const bool key = entry.href.find("phase=" + oom.phase + "&") != std::string::npos ||
                       entry.href.find("family=" + oom.family + "&") != std::string::npos;
      if (!key || oom.created_at < window_start) continue;
      ++events;
      expected.insert(oom.job);
    }
    std::set<std::string> shown;
    for (const auto& [name, key] : listed(list.body))
      shown.insert(unescape(name.substr(0, name.find(" ("))));
    CHECK(shown == expected);
    CHECK(listed(list.body).size() == expected.size());
    CHECK(entry.count == events);
  }
}

// The layout Chromium gives the page `html` in a viewport `width` px wide: the viewport's width,
// the document's scroll width, the right edge of the element reaching furthest (even one a box
// clips), and how many pairs of the day labels shown overlap. The page is the served bytes with
// a measuring script added (the server's own pages allow no script), in an iframe of that width
// (headless Chromium makes no window narrower than 500 px); the script writes its figures into
// the frame's parent, which Chromium's --dump-dom prints.
struct Layout {
  int client_width = 0;
  int scroll_width = 0;
  int max_right = 0;
  std::string widest;
  int overlapping_labels = -1;
};
std::optional<Layout> layout_at(const std::string& html, const fs::path& scratch, int width) {
  static constexpr const char* kMeasure = R"js(<script>
(function(){var d=document.documentElement,m=0,who='',shown=[],overlaps=0;
document.querySelectorAll('body *').forEach(function(e){var r=e.getBoundingClientRect();
if(r.width>0&&r.right>m){m=r.right;who=e.tagName+'.'+e.className+' '+(e.textContent||'').slice(0,40);}});
document.querySelectorAll('.days span').forEach(function(e){if(e.getClientRects().length)shown.push(e.getBoundingClientRect());});
for(var i=0;i<shown.length;i++)for(var j=i+1;j<shown.length;j++)
if(shown[i].left<shown[j].right&&shown[j].left<shown[i].right&&shown[i].top<shown[j].bottom&&shown[j].top<shown[i].bottom)overlaps++;
parent.document.getElementById('measured').textContent='measured '+d.clientWidth+' '+d.scrollWidth+' '+Math.ceil(m)+' '+overlaps+' '+who.replace(/\s+/g,'_');
})();
</script>)js";
  std::string page = html;
  const size_t end = page.rfind("</body>");
  if (end == std::string::npos) return std::nullopt;
  page.insert(end, kMeasure);
  std::string srcdoc;
  for (const char c : page) {
    if (c == '&') {
      srcdoc += "&amp;";
    } else if (c == '"') {
      srcdoc += "&quot;";
    } else {
      srcdoc += c;
    }
  }
  const fs::path file = scratch / "measured.html";
  std::ofstream(file) << "<!doctype html><html><body style=\"margin:0\"><pre id=\"measured\"></pre>"
                      << "<iframe style=\"width:" << width << "px;height:900px;border:0\" srcdoc=\""
                      << srcdoc << "\"></iframe></body></html>";
  const fs::path dom = scratch / "measured-dom.html";
  const std::string command =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--force-device-scale-factor=1 --user-data-dir='" +
      (scratch / "chromium-profile").string() + "' --window-size=" + std::to_string(width + 200) +
      ",1000 --dump-dom 'file://" + file.string() + "' >'" + dom.string() + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) return std::nullopt;
  std::smatch m;
  const std::string text = slurp(dom);
  if (!std::regex_search(text, m, std::regex(R"(measured (\d+) (\d+) (\d+) (-?\d+) (\S*))")))
    return std::nullopt;
  return Layout{std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), m[5], std::stoi(m[4])};
}

db::JobSummary running_job() {
  db::JobSummary job;
  job.key = "7";
  job.name = "flux_run";
  job.trainer = "ai-toolkit";
  job.outcome = "running";
  job.last_seen = 1'764'900'000;
  job.runs = 1;
  job.live.step = 1200;
  job.live.total_steps = 3000;
  job.live.steps_per_second = 1.0 / 1.4;
  job.live.loss = 0.04123;
  job.live.phase = "train_step";
  job.live.last_write = 1'764'903'080;  // 51 min 20 s after last_seen
  job.live.last_line = "step 1200/3000 loss=0.0412 <tag>";
  return job;
}

}  // namespace

TEST_SUITE("daemon::serve_live") {
  TEST_CASE("live_text: rate, durations, progress, loss, ETA, marks and fix names") {
    CHECK(daemon::rate_text(1.0 / 1.4) == "1.40 s/it");
    CHECK(daemon::rate_text(2.31) == "2.3 it/s");
    CHECK(daemon::rate_text(1.0) == "1.0 it/s");
    CHECK(daemon::rate_text(0.05) == "20.0 s/it");
    CHECK(daemon::rate_text(std::nullopt) == "-");
    CHECK(daemon::rate_text(0.0) == "-");
    CHECK(daemon::duration_text(45) == "45s");
    CHECK(daemon::duration_text(750) == "12m 30s");
    CHECK(daemon::duration_text(3 * 3600 + 5 * 60 + 9) == "3h 05m");
    CHECK(daemon::duration_text(2 * kDay + 4 * 3600) == "2d 04h");
    CHECK(daemon::duration_text(std::nullopt) == "-");
    CHECK(daemon::duration_text(-1) == "-");
    CHECK(daemon::percent_done(1200, 3000) == 40);
    CHECK(daemon::percent_done(2999, 3000) == 99);  // 100 only when it is done
    CHECK(daemon::percent_done(3000, 3000) == 100);
    CHECK(!daemon::percent_done(5, std::nullopt));
    CHECK(!daemon::percent_done(5, 0));
    CHECK(daemon::progress_text(1200, 3000) == "1200/3000 (40%)");
    CHECK(daemon::progress_text(1200, std::nullopt) == "1200");
    CHECK(daemon::progress_text(std::nullopt, 3000) == "-");
    CHECK(daemon::loss_text(0.04123) == "0.04123");
    CHECK(daemon::loss_text(1.23456) == "1.235");
    CHECK(daemon::loss_text(std::nullopt) == "-");

    db::JobSummary job = running_job();
    // (3000 - 1200) steps at 1.4 s each.
    CHECK(daemon::eta_text(job) == daemon::duration_text(2520));
    CHECK(daemon::eta_text(job) == "42m 00s");
    CHECK(daemon::runs_now(job));
    CHECK(daemon::last_write_or_seen(job) == job.live.last_write);
    CHECK(daemon::warning_marks(job).empty());
    job.live.stalled_since = job.live.last_write;
    CHECK(job.status() == "stalled");
    CHECK(daemon::eta_text(job) == "-");  // a silent job has no time left to tell
    CHECK(daemon::runs_now(job));
    job.outcome = "crashed_oom";
    CHECK(!daemon::runs_now(job));
    job.predicted_oom = job.near_oom = true;
    CHECK(daemon::warning_marks(job) == std::vector<std::string>{"predicted OOM", "near OOM"});
    job.live = {};
    CHECK(daemon::last_write_or_seen(job) == job.last_seen);

    CHECK(daemon::fix_label("disable_sampling") == "Turn preview sampling off (disable_sampling)");
    CHECK(daemon::fix_label("no_such_fix") == "no_such_fix");
    CHECK(daemon::fix_label("-") == "-");
    CHECK(daemon::fix_label("") == "-");
    // Every fix has a name of its own.
    std::set<std::string_view> names;
    for (const triage::FixRow& row : triage::fix_table()) {
      CAPTURE(row.id);
      CHECK(!row.name.empty());
      CHECK(names.insert(row.name).second);
    }
  }

  TEST_CASE("the jobs list draws live state: stalled marked, rate, ETA, loss, marks, '-'") {
    const int64_t now = 1'764'903'080 + 1000;
    db::JobSummary stalled = running_job();
    stalled.live.stalled_since = stalled.live.last_write;
    stalled.near_oom = true;
    db::JobSummary crashed;
    crashed.key = "8";
    crashed.name = "old_lora";
    crashed.trainer = "kohya";
    crashed.outcome = "crashed_oom";
    crashed.last_seen = 1'764'800'000;
    crashed.last_phase = "sampling";
    crashed.last_step = 500;
    crashed.top_fix = "disable_sampling";
    crashed.predicted_oom = true;
    daemon::JobsPageView view;
    view.rows = {daemon::make_job_row(stalled, "flux_run", now),
                 daemon::make_job_row(crashed, "old_lora", now)};
    const daemon::JobRow& s = view.rows[0];
    CHECK(s.status == "stalled");
    CHECK(s.progress == "1200/3000 (40%)");
    CHECK(s.rate == "1.40 s/it");
    CHECK(s.eta == "-");
    CHECK(s.loss == "0.04123");
    CHECK(s.last_seen == "2025-12-05 02:51:20");  // the live last write, not last_seen
    CHECK(s.silent_for == "16m 40s");
    CHECK(s.marks == std::vector<std::string>{"near OOM"});
    const daemon::JobRow& c = view.rows[1];
    CHECK(c.status == "crashed_oom");
    CHECK(c.progress == "-");
    CHECK(c.rate == "-");
    CHECK(c.loss == "-");
    CHECK(c.phase == "sampling");
    CHECK(c.step == "500");
    CHECK(c.marks == std::vector<std::string>{"predicted OOM"});

    CHECK(daemon::list_refreshes(view));
    const std::string page = daemon::render_jobs_page(view);
    CHECK(page.find("<span class=\"badge stalled\">stalled</span>") != std::string::npos);
    CHECK(page.find("silent 16m 40s") != std::string::npos);
    CHECK(page.find("<td class=\"num\" data-label=\"step\">1200/3000 (40%)</td>") !=
          std::string::npos);
    CHECK(page.find("<td data-label=\"rate\">1.40 s/it</td>") != std::string::npos);
    CHECK(page.find("<td class=\"num\" data-label=\"loss\">0.04123</td>") != std::string::npos);
    CHECK(page.find("<span class=\"mark\">near OOM</span>") != std::string::npos);
    CHECK(page.find("<span class=\"mark\">predicted OOM</span>") != std::string::npos);
    CHECK(page.find("Turn preview sampling off (<code>disable_sampling</code>)") !=
          std::string::npos);
    CHECK(page.find("2025-12-05 02:51:20") != std::string::npos);
    // The refresh can be turned off, keeping the page where it is.
    CHECK(page.find("href=\"/?refresh=0\"") != std::string::npos);
    view.filter.refresh = false;
    CHECK(!daemon::list_refreshes(view));
    view.filter.refresh = true;
    view.rows.pop_back();
    view.rows.front().runs_now = false;
    CHECK(!daemon::list_refreshes(view));
  }

  TEST_CASE("the job page shows where a running job is, and a stalled one's silence") {
    daemon::ReportView view;
    view.name = "flux_run";
    view.trainer = "ai-toolkit";
    view.outcome = "running";
    db::JobSummary job = running_job();
    job.live.stalled_since = job.live.last_write;
    job.predicted_oom = true;
    daemon::set_live(view, job, job.live.last_write + 1000);
    const std::string page = daemon::render_html_report(view);
    CHECK(page.find("<section id=\"now\">") != std::string::npos);
    CHECK(page.find("<span class=\"badge stalled\">stalled</span>") != std::string::npos);
    CHECK(page.find("1200/3000 (40%)") != std::string::npos);
    CHECK(page.find("1.40 s/it") != std::string::npos);
    CHECK(page.find("silent for 16m 40s") != std::string::npos);
    CHECK(page.find("predicted OOM") != std::string::npos);
    CHECK(page.find("step 1200/3000 loss=0.0412 &lt;tag&gt;") != std::string::npos);
    // A job the daemon has no live state for says nothing of it.
    daemon::ReportView quiet;
    quiet.name = "old";
    quiet.outcome = "completed";
    CHECK(daemon::render_html_report(quiet).find("id=\"now\"") == std::string::npos);
  }

  TEST_CASE("/fleet's day labels: today always, evenly spaced, fewer on a phone") {
    CHECK(daemon::label_every(30, 780, 56) == 3);
    CHECK(daemon::label_every(30, 260, 56) == 7);
    CHECK(daemon::label_every(7, 780, 56) == 1);
    CHECK(daemon::short_day("2026-12-05") == "Dec 5");
    CHECK(daemon::short_day("2026-01-31") == "Jan 31");
    CHECK(daemon::short_day("soon") == "soon");
    daemon::DayChart chart;
    chart.id = "c";
    chart.filter = "phase";
    for (int d = 1; d <= 30; ++d) chart.days.push_back(fmt::format("2026-11-{:02}", d));
    chart.color_of = [](const std::string&) { return std::string("#000"); };
    const std::string html = daemon::render_day_chart(chart, {{"2026-11-30", "sampling", 3}});
    // The newest day is labelled (at the right edge), then every third day back.
    CHECK(html.find("style=\"right:0\" title=\"2026-11-30\">Nov 30</span>") != std::string::npos);
    CHECK(html.find(">Nov 27</span>") != std::string::npos);
    CHECK(html.find(">Nov 29</span>") == std::string::npos);
    CHECK(html.find("<a href=\"/?phase=sampling&amp;from=2026-11-30&amp;to=2026-11-30\"><rect "
                    "class=\"bar\" data-day=\"2026-11-30\" data-key=\"sampling\" "
                    "data-count=\"3\"") != std::string::npos);
    CHECK(html.find("<a class=\"key\" href=\"/?phase=sampling&amp;from=2026-11-01\">") !=
          std::string::npos);
  }

  TEST_CASE("serve: /job/<name>, a choice where names repeat, bars that lead to their jobs") {
    TempDir dir;
    LiveStore store(dir.path / "state");
    fill(store);
    ServeProcess serve(
        {"--state-dir", (dir.path / "state").string(), "serve", "--listen", "127.0.0.1:0"},
        dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const Fetched list = get(serve.url("/"));
    REQUIRE(list.status == 200);
    const auto keys = listed(list.body);

    // A name only one job has is that job's page, as its key is.
    const std::string run_key = keys.find("flux_run")->second;
    const Fetched by_name = get(serve.url("/job/flux_run"));
    CHECK(by_name.status == 200);
    CHECK(by_name.body.find("<h1>flux_run</h1>") != std::string::npos);
    CHECK(by_name.body.find("href=\"/job/" + run_key + ".json\"") != std::string::npos);
    CHECK(get(serve.url("/job/" + run_key)).status == 200);  // keys keep working
    CHECK(get(serve.url("/job/flux_run.json")).body.find("\"flux_run\"") != std::string::npos);
    CHECK(get(serve.url("/job/solo%20lora")).status == 200);
    // The name two folders share: a choice of both, each leading to its page.
    const Fetched choice = get(serve.url("/job/my_lora"));
    CHECK(choice.status == 200);
    CHECK(choice.body.find("id=\"choice\"") != std::string::npos);
    CHECK(choice.body.find("/out/a/my_lora") != std::string::npos);
    CHECK(choice.body.find("/out/b/my_lora") != std::string::npos);
    size_t both = 0;
    for (const auto& [name, key] : keys) {
      if (name.starts_with("my_lora ("))
        both += choice.body.find("href=\"/job/" + key + "\"") != std::string::npos;
    }
    CHECK(both == 2);
    CHECK(keys.count("my_lora (out/b)") == 1);
    CHECK(choice.body.find("crashed_oom") != std::string::npos);
    // Its shown name is one job.
    const Fetched shown = get(serve.url("/job/my_lora%20(out%2Fb)"));
    CHECK(shown.status == 200);
    CHECK(shown.body.find("id=\"choice\"") == std::string::npos);
    CHECK(shown.body.find("href=\"/job/" + keys.find("my_lora (out/b)")->second + ".json\"") !=
          std::string::npos);
    // A hostile name is text on the choice page.
    const Fetched hostile = get(serve.url("/job/%3Cb%3Ex%3C%2Fb%3E"));
    CHECK(hostile.status == 200);
    CHECK(hostile.body.find("<b>x") == std::string::npos);
    CHECK(hostile.body.find("&lt;b&gt;x&lt;/b&gt;") != std::string::npos);
    CHECK(get(serve.url("/job/nobody")).status == 404);

    // Each bar and legend entry of /fleet lists the jobs it counts.
    check_fleet_links(serve, store.ooms());
    // A day's filter picks the OOM of that day: `twice` ended in train_step, but it is among
    // the sampling jobs of the day it crashed in sampling, and not among today's.
    const std::string five_days_ago = daemon::utc_time(daemon::unix_now() - 5 * kDay, "%Y-%m-%d");
    CHECK(listed(get(serve.url("/?phase=sampling")).body).count("twice") == 0);
    CHECK(
        listed(
            get(serve.url("/?phase=sampling&from=" + five_days_ago + "&to=" + five_days_ago)).body)
            .count("twice") == 1);
    CHECK(get(serve.url("/?from=yesterday")).status == 400);
    CHECK(serve.stop() == 0);
  }

  TEST_CASE("serve: the list and a running job's page refresh every 10 s, off with refresh=0") {
    TempDir dir;
    LiveStore store(dir.path / "state");
    fill(store);
    ServeProcess serve(
        {"--state-dir", (dir.path / "state").string(), "serve", "--listen", "127.0.0.1:0"},
        dir.path / "serve.err");
    REQUIRE(serve.port() != 0);
    const auto refreshes = [](const Fetched& f) {
      return f.headers.find("\nRefresh: 10\r") != std::string::npos;
    };
    const Fetched all = get(serve.url("/?q=_"));
    CHECK(all.status == 200);
    CHECK(refreshes(all));  // flux_run runs
    CHECK(all.body.find("href=\"/?q=_&amp;refresh=0\"") != std::string::npos);
    const Fetched off = get(serve.url("/?q=_&refresh=0"));
    CHECK(!refreshes(off));
    // The way back on keeps the filter; the form and the pager keep it off.
    CHECK(off.body.find("href=\"/?q=_\"") != std::string::npos);
    CHECK(off.body.find("<input type=\"hidden\" name=\"refresh\" value=\"0\">") !=
          std::string::npos);
    CHECK(!refreshes(get(serve.url("/?outcome=completed"))));  // nothing runs in it
    const auto keys = listed(get(serve.url("/")).body);
    REQUIRE(keys.count("flux_run") == 1);
    REQUIRE(keys.count("twice") == 1);
    const std::string running = keys.find("flux_run")->second;
    CHECK(refreshes(get(serve.url("/job/" + running))));
    CHECK(refreshes(get(serve.url("/job/flux_run"))));
    CHECK(!refreshes(get(serve.url("/job/" + running + "?refresh=0"))));
    CHECK(!refreshes(get(serve.url("/job/" + keys.find("twice")->second))));
    CHECK(!refreshes(get(serve.url("/fleet"))));
  }

  TEST_CASE("serve in Chromium at 400 px: nothing reaches past the window, labels apart") {
    if (!have_program("chromium")) {
      skip_test("Chromium is not installed (Debian: chromium)");
      return;
    }
    TempDir dir;
    LiveStore store(dir.path / "state");
    fill(store);
    // A long name and a long fix in the list: what a phone must fit.
    store.add("a_rather_long_job_name_for_a_phone_screen_v2", "/out/long", "crashed_oom", 10,
              {{10, "cache_text_embeddings", "flux.1"}});
    ServeProcess serve(
        {"--state-dir", (dir.path / "state").string(), "serve", "--listen", "127.0.0.1:0"},
        dir.path / "serve.err");
    REQUIRE(serve.port() != 0);
    const auto keys = listed(get(serve.url("/")).body);
    // The check can fail: the list as a plain table (its phone rules taken out, as it was
    // before them) reaches past a 400 px window.
    {
      std::string table = get(serve.url("/?refresh=0")).body;
      const size_t rules = table.find("@media (max-width:1199px){\ntable.cards");
      REQUIRE(rules != std::string::npos);
      table.erase(rules, table.find("\n}\n", rules) + 3 - rules);
      const auto cut = layout_at(table, dir.path, 400);
      REQUIRE(cut);
      CHECK(cut->max_right > cut->client_width);
      CHECK(cut->scroll_width > cut->client_width);
    }
    const std::vector<std::string> pages = {"/?refresh=0", "/fleet",
                                            "/job/" + keys.find("twice")->second + "?refresh=0",
                                            "/job/my_lora"};
    for (const std::string& path : pages) {
      CAPTURE(path);
      const Fetched page = get(serve.url(path));
      REQUIRE(page.status == 200);
      const auto phone = layout_at(page.body, dir.path, 400);
      REQUIRE(phone);
      CAPTURE(phone->widest);
      CHECK(phone->client_width == 400);
      CHECK(phone->scroll_width <= phone->client_width);
      CHECK(phone->max_right <= phone->client_width);
      CHECK(phone->overlapping_labels == 0);
      const auto wide = layout_at(page.body, dir.path, 1000);
      REQUIRE(wide);
      CHECK(wide->scroll_width <= wide->client_width);
      CHECK(wide->overlapping_labels == 0);
    }
  }

  TEST_CASE("serve over the fleet store: names on two hosts, bars that lead to their jobs") {
    PostgresCluster pg;
    if (!pg.ok()) {
      skip_test(pg.error());
      return;
    }
    TempDir dir;
    LiveStore store(dir.path / "state");
    fill(store);
    REQUIRE(store.store().set_fleet_outbox(pg.url()));
    auto fleet = db::FleetStore::open(pg.url());
    REQUIRE(fleet);
    // The node's jobs shipped as two nodes' (its store id and another), so every name is on
    // two hosts.
    const std::string id = *store.store().store_id();
    std::vector<db::FleetBatch> batches;
    for (;;) {
      auto batch = store.store().fleet_batch(500);
      REQUIRE(batch);
      if (batch->empty()) break;
      REQUIRE((*fleet)->ship(*batch, id, "gpu-node-07"));
      REQUIRE((*fleet)->ship(*batch, "00000000-0000-4000-8000-000000000008", "gpu-node-08"));
      REQUIRE(store.store().fleet_shipped(batch->last_seq));
    }
    ServeProcess serve(
        {"--store", pg.url(), "serve", "--listen", "127.0.0.1:0", "--allow-writer-role"},
        dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const Fetched choice = get(serve.url("/job/flux_run"));
    CHECK(choice.status == 200);
    CHECK(choice.body.find("id=\"choice\"") != std::string::npos);
    CHECK(choice.body.find("gpu-node-07") != std::string::npos);
    CHECK(choice.body.find("gpu-node-08") != std::string::npos);
    const std::regex link(R"re(href="/job/([0-9a-f-]{36}\.\d+)")re");
    std::smatch m;
    REQUIRE(std::regex_search(choice.body, m, link));
    CHECK(get(serve.url("/job/" + std::string(m[1]))).status == 200);
    CHECK(get(serve.url("/job/nobody")).status == 404);
    // Both hosts' bars: an event is stored once (by its uuid, with the copy of its job that
    // shipped it first), and its bar lists that job.
    check_fleet_links(serve, store.ooms());

    // One host's bars and legends: each host's list has what the bar counted.
    ServeProcess one({"--store", pg.url(), "serve", "--listen", "127.0.0.1:0",
                      "--allow-writer-role", "--host", "gpu-node-07"},
                     dir.path / "one.err");
    REQUIRE(one.port() != 0);
    CHECK(get(one.url("/job/flux_run")).body.find("id=\"choice\"") == std::string::npos);
    check_fleet_links(one, store.ooms());
  }
}
