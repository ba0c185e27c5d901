// tests/daemon/top_view_test.cc: `oomtriage top`'s frame (daemon/render/top_view.h) from jobs made
// here: the order of attention, the live fields as people read them, every line within the
// width, and no escape code unless colour is asked for.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "daemon/render/live_text.h"
#include "daemon/render/top_view.h"

using namespace oomtriage;

namespace {

constexpr int64_t kNow = 1'800'000'000;

db::JobSummary job(const std::string& name, const std::string& outcome, int64_t written_ago) {
  db::JobSummary out;
  out.key = name;
  out.name = name;
  out.home = "/out/" + name;
  out.trainer = "ai-toolkit";
  out.outcome = outcome;
  out.last_seen = kNow - written_ago;
  out.live.last_write = kNow - written_ago;
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Columns a terminal gives a line of UTF-8.
size_t columns(const std::string& line) {
  size_t n = 0;
  for (const char c : line) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// The job lines of a frame (below the header and the titles), each one's first word its name.
std::vector<std::string> order_of(const std::string& frame) {
  std::vector<std::string> names;
  const std::vector<std::string> lines = lines_of(frame);
  for (size_t i = 2; i < lines.size(); ++i) names.push_back(lines[i].substr(0, lines[i].find(' ')));
  return names;
}

// A fleet of every kind: a finished job, a running one, one whose log went silent, one that
// crashed, one that came near the card's limit, one a pre-flight check predicted an OOM for.
std::vector<db::JobSummary> fleet() {
  db::JobSummary done = job("done", "completed", 60);
  db::JobSummary old_done = job("old_done", "completed", 7200);
  db::JobSummary running = job("running", "running", 2);
  running.live.step = 1200;
  running.live.total_steps = 3000;
  running.live.steps_per_second = 0.5;  // 2.00 s/it
  running.live.loss = 0.0421;
  running.live.phase = "train_step";
  running.gpu_peak_bytes = uint64_t{20} << 30;
  running.gpu_total_bytes = uint64_t{24} << 30;
  db::JobSummary stalled = job("stalled", "running", 1800);
  stalled.live.step = 400;
  stalled.live.total_steps = 1000;
  stalled.live.steps_per_second = 3.25;
  stalled.live.stalled_since = kNow - 1800;
  db::JobSummary crashed = job("crashed", "crashed_oom", 30);
  crashed.last_phase = "sampling";
  crashed.last_step = 500;
  crashed.top_fix = "cheapen_previews";
  db::JobSummary near = job("near", "running", 5);
  near.near_oom = true;
  db::JobSummary predicted = job("predicted", "completed", 9000);
  predicted.predicted_oom = true;
  return {done, old_done, running, stalled, crashed, near, predicted};
}

}  // namespace

TEST_SUITE("daemon::top_view") {
  TEST_CASE("jobs are in the order of attention: stalled, near OOM, crashed, running, the rest") {
    const std::vector<db::JobSummary> sorted = daemon::by_attention(fleet());
    std::vector<std::string> names;
    for (const auto& j : sorted) names.push_back(j.name);
    // Within a rank the newest written first (near before predicted, done before old_done).
    CHECK(names == std::vector<std::string>{"stalled", "near", "predicted", "crashed", "running",
                                            "done", "old_done"});
    CHECK(daemon::attention_rank(sorted[0]) == 0);
    CHECK(daemon::attention_rank(sorted.back()) == 4);

    daemon::TopFrame frame;
    frame.width = 200;
    frame.now = kNow;
    CHECK(order_of(daemon::render_top(fleet(), frame)) == names);
  }

  TEST_CASE("a frame shows each job's live state as people read it") {
    daemon::TopFrame frame;
    frame.width = 200;
    frame.now = kNow;
    frame.source = "/var/lib/oomtriage/oomtriage.db";
    const std::string text = daemon::render_top(fleet(), frame);
    const std::vector<std::string> lines = lines_of(text);
    REQUIRE(lines.size() == 2 + 7);
    CAPTURE(text);
    // The header: the time (UTC) and the counts.
    CHECK(lines[0].find("2027-01-15 08:00:00 UTC") != std::string::npos);
    CHECK(lines[0].find("7 jobs: 1 stalled, 2 near OOM, 1 crashed, 2 running") !=
          std::string::npos);
    CHECK(lines[0].find("store /var/lib/oomtriage/oomtriage.db") != std::string::npos);
    for (const char* title : {"JOB", "STATUS", "STEP", "RATE", "ETA", "LOSS", "GPU", "FREE",
                              "MARKS", "LAST OOM", "TOP FIX"}) {
      CAPTURE(title);
      CHECK(lines[1].find(title) != std::string::npos);
    }
    const auto line_of = [&](const std::string& name) {
      for (const std::string& line : lines) {
        if (line.starts_with(name + " ")) return line;
      }
      FAIL("no line for " << name);
      return std::string();
    };
    const std::string running = line_of("running");
    CHECK(running.find("1200/3000") != std::string::npos);
    CHECK(running.find("40%") != std::string::npos);
    CHECK(running.find("2.00 s/it") != std::string::npos);
    CHECK(running.find("1h 00m") != std::string::npos);  // 1800 steps at 2 s each
    CHECK(running.find("0.0421") != std::string::npos);
    CHECK(running.find("20.0G/24.0G") != std::string::npos);
    CHECK(running.find(" 4.0G") != std::string::npos);  // the headroom
    CHECK(running.find("train_step") != std::string::npos);
    const std::string stalled = line_of("stalled");
    CHECK(stalled.find("stalled") != stalled.rfind("stalled"));  // its name and its status
    CHECK(stalled.find(" it/s") != std::string::npos);
    CHECK(stalled.find("30m 00s") != std::string::npos);  // silent that long
    CHECK(stalled.find("3m 04s") == std::string::npos);   // no time left for a stalled job
    const std::string crashed = line_of("crashed");
    CHECK(crashed.find("crashed_oom") != std::string::npos);
    CHECK(crashed.find("sampling@500") != std::string::npos);
    CHECK(crashed.find("cheapen_previews") != std::string::npos);
    CHECK(line_of("near").find("near-oom") != std::string::npos);
    CHECK(line_of("predicted").find("predicted") != line_of("predicted").rfind("predicted"));
  }

  TEST_CASE("every line fits the width - the least needed columns go first, then the name is cut") {
    std::vector<db::JobSummary> jobs = fleet();
    jobs[0].name = "a_job_whose_name_runs_on_well_past_any_terminal_column_limit";
    for (const int width : {200, 120, 100, 80, 60, 40, 24}) {
      CAPTURE(width);
      daemon::TopFrame frame;
      frame.width = width;
      frame.now = kNow;
      frame.source = "/a/long/path/to/the/store/oomtriage.db";
      const std::string text = daemon::render_top(jobs, frame);
      for (const std::string& line : lines_of(text)) {
        CAPTURE(line);
        CHECK(columns(line) <= static_cast<size_t>(width));
      }
      // The name and the status stay whatever the width.
      CHECK(text.find("crashed_oom") != std::string::npos);
      CHECK(text.find("stalled ") != std::string::npos);
    }
    daemon::TopFrame frame;
    frame.now = kNow;
    frame.width = 80;
    const std::string narrow = daemon::render_top(jobs, frame);
    CHECK(narrow.find("LOSS") == std::string::npos);  // the first to go
    CHECK(narrow.find("STEP") != std::string::npos);
    CHECK(narrow.find("…") != std::string::npos);  // the long name, cut
    CHECK(narrow.find("a_job_whose_name_runs_on_well_past") == std::string::npos);
  }

  TEST_CASE("no escape code without colour - stalled, crashed and near OOM coloured with it") {
    daemon::TopFrame frame;
    frame.width = 200;
    frame.now = kNow;
    std::vector<db::JobSummary> jobs = fleet();
    jobs[0].name = "evil\x1b]0;owned\x07name";  // a folder named to drive the terminal
    const std::string plain = daemon::render_top(jobs, frame);
    CHECK(plain.find('\x1b') == std::string::npos);
    CHECK(plain.find('\x07') == std::string::npos);
    CHECK(plain.find("evil?]0;owned?name") != std::string::npos);

    frame.color = true;
    const std::string coloured = daemon::render_top(jobs, frame);
    CHECK(coloured.find("\x1b[31mcrashed_oom") != std::string::npos);  // red
    CHECK(coloured.find("\x1b[33m") != std::string::npos);             // stalled: yellow
    CHECK(coloured.find("\x1b[35m") != std::string::npos);             // near OOM: magenta
    CHECK(coloured.find("\x1b]0") == std::string::npos);  // the name's own escape, still not
  }

  TEST_CASE("rows: what does not fit the screen is counted - no jobs says so") {
    daemon::TopFrame frame;
    frame.width = 100;
    frame.now = kNow;
    frame.rows = 4;
    const std::vector<std::string> lines = lines_of(daemon::render_top(fleet(), frame));
    REQUIRE(lines.size() == 2 + 4);
    CHECK(lines[2].starts_with("stalled"));  // the most urgent stay
    CHECK(lines.back() == "… 4 more");
    const std::string empty = daemon::render_top({}, frame);
    CHECK(empty.find("no jobs yet") != std::string::npos);
  }

  TEST_CASE("rates, times left and silences in the words every list shares (live_text.h)") {
    CHECK(daemon::rate_text(1.4321) == "1.4 it/s");
    CHECK(daemon::rate_text(0.5) == "2.00 s/it");
    CHECK(daemon::rate_text(1.0 / 250) == "250.0 s/it");
    CHECK(daemon::duration_text(45) == "45s");
    CHECK(daemon::duration_text(750) == "12m 30s");
    CHECK(daemon::duration_text(7500) == "2h 05m");
    CHECK(daemon::duration_text(3 * 86400 + 4 * 3600 + 59) == "3d 04h");
  }
}
