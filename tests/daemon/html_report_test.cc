// tests/daemon/html_report_test.cc
//
// `report --html` and `--markdown` as a person sees them. The README's example job (the daemon
// following examples/training_folder/my_lora) and a job healed by `run --heal` are rendered in
// Debian's headless Chromium: the screenshot's pixels must put the crash marker at the crash's
// step and give the memory bar the allocator's proportions, and the printed page's text must
// name the runs and the top fix. Hostile text stays text, the page has no external reference and
// stays small, and AI Toolkit's loss_log.db feeds the curve when it is there.
#include <doctest/doctest.h>

#include <sqlite3.h>

#include <fmt/format.h>

#include <climits>
#include <regex>

#include "daemon/common/clock.h"
#include "daemon/render/html_report.h"
#include "db/store.h"
#include "tests/support/browser.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;
namespace colors = oomtriage::daemon::html_colors;

namespace {

const fs::path kExample =
    fs::path(OOMTRIAGE_SOURCE_DIR) / "examples" / "training_folder" / "my_lora";

bool have_browser() { return have_program("chromium") && have_program("pdftotext"); }

struct Box {
  int left = INT_MAX, right = -1, top = INT_MAX, bottom = -1;
  bool empty() const { return right < 0; }
  int width() const { return right - left + 1; }
  int height() const { return bottom - top + 1; }
};

// The solid rectangle of `color` (the chart's plot area): the rows in which it fills much of the
// width (gridlines cross it), and the columns it fills in most of those rows. Antialiased text
// elsewhere that happens to come near the colour is left out.
Box solid_box(const Screenshot& shot, const Rgb& color, int tolerance) {
  std::vector<int> per_row(shot.height);
  for (int y = 0; y < shot.height; ++y) {
    for (int x = 0; x < shot.width; ++x) per_row[y] += shot.at(x, y).near(color, tolerance) ? 1 : 0;
  }
  Box box;
  for (int y = 0; y < shot.height; ++y) {
    if (per_row[y] * 5 < shot.width * 2) continue;
    box.top = std::min(box.top, y);
    box.bottom = y;
  }
  if (box.bottom < 0) return {};
  for (int x = 0; x < shot.width; ++x) {
    int n = 0;
    for (int y = box.top; y <= box.bottom; ++y) n += shot.at(x, y).near(color, tolerance) ? 1 : 0;
    if (n * 2 < box.height()) continue;
    box.left = std::min(box.left, x);
    box.right = std::max(box.right, x);
  }
  return box;
}

// The bounding box of `color` inside `within`.
Box box_of(const Screenshot& shot, const Rgb& color, int tolerance, const Box& within) {
  Box box;
  for (int y = within.top; y <= within.bottom; ++y) {
    for (int x = within.left; x <= within.right; ++x) {
      if (!shot.at(x, y).near(color, tolerance)) continue;
      box.left = std::min(box.left, x);
      box.right = std::max(box.right, x);
      box.top = std::min(box.top, y);
      box.bottom = std::max(box.bottom, y);
    }
  }
  return box;
}

// The columns inside `area` where `color` fills at least half the height: a vertical line.
std::vector<int> vertical_lines(const Screenshot& shot, const Rgb& color, const Box& area) {
  std::vector<int> centres;
  int run_start = -1;
  for (int x = area.left; x <= area.right + 1; ++x) {
    int count = 0;
    if (x <= area.right) {
      for (int y = area.top; y <= area.bottom; ++y) count += shot.at(x, y).near(color, 40) ? 1 : 0;
    }
    const bool line = count * 2 >= area.height();
    if (line && run_start < 0) run_start = x;
    if (!line && run_start >= 0) {
      centres.push_back((run_start + x - 1) / 2);
      run_start = -1;
    }
  }
  return centres;
}

// The row holding the most pixels of `color`, and that count per colour along it.
int busiest_row(const Screenshot& shot, const Rgb& color, int* count = nullptr) {
  int best = -1, best_count = 0;
  for (int y = 0; y < shot.height; ++y) {
    int n = 0;
    for (int x = 0; x < shot.width; ++x) n += shot.at(x, y).near(color) ? 1 : 0;
    if (n > best_count) best = y, best_count = n;
  }
  if (count) *count = best_count;
  return best;
}

struct Span {
  int first = -1, last = -1, count = 0;
};
Span span_in_row(const Screenshot& shot, int y, const Rgb& color) {
  Span s;
  for (int x = 0; x < shot.width; ++x) {
    if (!shot.at(x, y).near(color)) continue;
    if (s.first < 0) s.first = x;
    s.last = x;
    ++s.count;
  }
  return s;
}

double step_at(int x, const Box& plot, double max_step) {
  return max_step * (x - plot.left) / static_cast<double>(plot.width() - 1);
}

// Attributes or rules that would make the page fetch something.
std::vector<std::string> external_references(const std::string& html) {
  std::vector<std::string> found;
  static const std::regex attribute(
      R"re(\b(?:src|href|xlink:href|action|data|poster)\s*=\s*["']?\s*(?:[a-z]+:|//))re",
      std::regex::icase);
  static const std::regex element(
      R"re(<(?:script|link|iframe|object|embed|img|image|audio|video|source|base)\b)re",
      std::regex::icase);
  static const std::regex css(R"re(url\s*\(|@import)re", std::regex::icase);
  for (const std::regex* r : {&attribute, &element, &css}) {
    std::smatch m;
    if (std::regex_search(html, m, *r)) found.push_back(m.str());
  }
  return found;
}

std::pair<int, std::string> oomtriage_with(const fs::path& state, const std::string& args) {
  return oomtriage_says("--color never --state-dir '" + state.string() + "' " + args);
}

// The daemon follows a fresh training folder while the README's example job is written into
// it, as scripts/demo.sh does.
void follow_example(const TempDir& dir) {
  const fs::path job = dir.path / "output" / "my_lora";
  fs::create_directories(job);
  DaemonProcess daemon(dir.path / "state", {"watch", (dir.path / "output").string()},
                       dir.path / "daemon.err");
  fs::copy_file(kExample / "config.yaml", job / "config.yaml");
  write_slowly(job / "log.txt", slurp(kExample / "log.txt"), 4096);
  StoreView store{dir.path / "state" / "oomtriage.db"};
  REQUIRE(wait_until([&] { return store.events("my_lora") == 1; }));
  daemon.stop(SIGTERM);
}

}  // namespace

TEST_SUITE("daemon::html_report") {
  TEST_CASE(
      "the README's example job in headless Chromium: the run, the crash at its step, the "
      "memory bar and the top fix") {
    if (!have_browser()) {
      OOMTRIAGE_SKIP("Debian's chromium and poppler-utils (pdftotext) are not installed");
    }
    TempDir dir;
    follow_example(dir);
    const fs::path page = dir.path / "my_lora.html";
    const auto [code, said] =
        oomtriage_with(dir.path / "state", "report my_lora --html '" + page.string() + "' 2>&1");
    REQUIRE(code == 0);
    CHECK(said.find("loss from the log's progress bar") != std::string::npos);
    const std::string html = slurp(page);
    CHECK(html.size() < 1'000'000);
    CHECK(external_references(html).empty());

    const auto shot = screenshot(page, dir.path, 1000, 2400);
    REQUIRE(shot);
    // The loss chart's plot area, and the one crash line in it at step 500 of 3000.
    const Box plot = solid_box(*shot, Rgb::hex(colors::kPlotLight), 3);
    REQUIRE_FALSE(plot.empty());
    CHECK(plot.width() > 600);
    const std::vector<int> crashes = vertical_lines(*shot, Rgb::hex(colors::kCrash), plot);
    REQUIRE(crashes.size() == 1);
    CHECK(step_at(crashes[0], plot, 3000) == doctest::Approx(500).epsilon(0.02));
    // The loss is drawn from the start of training up to the crash, not after it.
    const Box loss = box_of(*shot, Rgb::hex(colors::kLoss), 30, plot);
    REQUIRE_FALSE(loss.empty());
    CHECK(step_at(loss.left, plot, 3000) < 40);
    CHECK(step_at(loss.right, plot, 3000) == doctest::Approx(500).epsilon(0.03));
    CHECK(loss.height() > 20);  // the example's loss falls: the curve is not flat

    // The memory bar: 22.51 GiB in use, 252.96 MiB other, 812 MiB free of 23.55 GiB, and the
    // 1.50 GiB request starting where free memory starts and sticking out past the capacity.
    const int bar_row = busiest_row(*shot, Rgb::hex(colors::kInUse));
    REQUIRE(bar_row >= 0);
    const Span in_use = span_in_row(*shot, bar_row, Rgb::hex(colors::kInUse));
    const Span other = span_in_row(*shot, bar_row, Rgb::hex(colors::kOther));
    const Span free = span_in_row(*shot, bar_row, Rgb::hex(colors::kFree));
    REQUIRE(free.count > 0);
    const double capacity_px = free.last - in_use.first + 1;
    CHECK(in_use.count / capacity_px == doctest::Approx(22.51 / 23.55).epsilon(0.01));
    CHECK(free.count / capacity_px == doctest::Approx(812.0 / (23.55 * 1024)).epsilon(0.2));
    CHECK(other.first > in_use.last);
    CHECK(free.first > other.last);
    const int tried_row = busiest_row(*shot, Rgb::hex(colors::kTried));
    REQUIRE(tried_row > bar_row);
    const Span tried = span_in_row(*shot, tried_row, Rgb::hex(colors::kTried));
    CHECK(std::abs(tried.first - free.first) <= 2);
    CHECK(tried.last > free.last + 5);
    CHECK((tried.last - tried.first + 1) / capacity_px ==
          doctest::Approx(1.5 / 23.55).epsilon(0.1));

    // What the printed page says.
    const std::string text = printed_text(page, dir.path);
    REQUIRE_FALSE(text.empty());
    for (const char* expected :
         {"my_lora", "Run 1", "crashed_oom", "OOM · sampling · step 500",
          "cuda in sampling, step 500/3000", "Make preview samples cheaper", "cheapen_previews",
          "config.process[0].sample.width: 768", "of 23.55 GiB", "from the frame at line 89"}) {
      CAPTURE(std::string(expected));
      CHECK(text.find(expected) != std::string::npos);
    }
    // The top fix comes before the second.
    CHECK(text.find("cheapen_previews") < text.find("disable_sampling"));

    // In the dark scheme the page is dark and the chart still shows the crash at its step.
    const auto dark = screenshot(page, dir.path, 1000, 1200, true);
    REQUIRE(dark);
    const Rgb corner = dark->at(2, 2);
    CHECK(corner.r + corner.g + corner.b < 3 * 60);
    const Box dark_plot = solid_box(*dark, Rgb::hex(colors::kPlotDark), 3);
    REQUIRE_FALSE(dark_plot.empty());
    const std::vector<int> dark_crashes =
        vertical_lines(*dark, Rgb::hex(colors::kCrash), dark_plot);
    REQUIRE(dark_crashes.size() == 1);
    CHECK(step_at(dark_crashes[0], dark_plot, 3000) == doctest::Approx(500).epsilon(0.02));
    const Rgb light_corner = shot->at(2, 2);
    CHECK(light_corner.r + light_corner.g + light_corner.b > 3 * 240);
  }

  TEST_CASE(
      "a healed job's page: each run, the fix carried into the next, the crashes at their "
      "steps and the config diff") {
    if (!have_browser()) {
      OOMTRIAGE_SKIP("Debian's chromium and poppler-utils (pdftotext) are not installed");
    }
    if (std::system("/usr/bin/python3 -c 'import tqdm, yaml' >/dev/null 2>&1") != 0) {
      OOMTRIAGE_SKIP("/usr/bin/python3 with tqdm and yaml is absent");
    }
    TempDir dir;
    fs::copy_file(fs::path(OOMTRIAGE_SOURCE_DIR) / "examples" / "heal_job" / "job.yaml",
                  dir.path / "job.yaml");
    const std::string run = fmt::format(
        "cd '{}' && FAKE_VRAM_GIB=15 '{}' --state-dir state run --heal --backoff 0 --log train.log "
        "-- /usr/bin/python3 '{}/tests/fake_trainers/ai_toolkit.py' job.yaml >/dev/null 2>&1",
        dir.path.string(), OOMTRIAGE_BINARY, OOMTRIAGE_SOURCE_DIR);
    REQUIRE(std::system(run.c_str()) == 0);
    const fs::path page = dir.path / "heal.html";
    REQUIRE(oomtriage_with(dir.path / "state", "report heal_lora --html '" + page.string() + "'")
                .first == 0);
    const std::string html = slurp(page);
    CHECK(external_references(html).empty());

    const std::string text = printed_text(page, dir.path);
    REQUIRE_FALSE(text.empty());
    for (const char* expected : {"Run 1", "Run 2", "Run 3", "applied cheapen_previews", "completed",
                                 "A later run", "snapshot 3"}) {
      CAPTURE(std::string(expected));
      CHECK(text.find(expected) != std::string::npos);
    }
    // The config diff between the first two runs, after its snapshot.
    CHECK(text.find("+          width: 768", text.find("snapshot 2")) != std::string::npos);
    // On the timeline, in order: the first run, the fix it passed on, the second run.
    const size_t runs = text.find("Runs");
    REQUIRE(runs != std::string::npos);
    CHECK(text.find("Run 1", runs) < text.find("applied cheapen_previews", runs));
    CHECK(text.find("applied cheapen_previews", runs) < text.find("Run 2", runs));

    // Two crashes (sampling at step 150, a training step at 199) on a 400-step axis.
    const auto shot = screenshot(page, dir.path, 1000, 2400);
    REQUIRE(shot);
    const Box plot = solid_box(*shot, Rgb::hex(colors::kPlotLight), 3);
    REQUIRE_FALSE(plot.empty());
    const std::vector<int> crashes = vertical_lines(*shot, Rgb::hex(colors::kCrash), plot);
    REQUIRE(crashes.size() == 2);
    CHECK(step_at(crashes[0], plot, 400) == doctest::Approx(150).epsilon(0.04));
    CHECK(step_at(crashes[1], plot, 400) == doctest::Approx(199).epsilon(0.04));
  }

  TEST_CASE(
      "hostile text stays text - a thousand crashes make a small page - loss_log.db feeds the "
      "curve - Markdown says the same") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fs::create_directories(state);
    const fs::path job_dir = dir.path / "out" / "evil";
    fs::create_directories(job_dir);
    const std::string name = "<script>alert(1)</script>";
    {
      auto store = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(store);
      const int64_t now = daemon::unix_now();
      const int64_t job =
          *(*store)->upsert_job(name, job_dir.string(), "ai-toolkit", job_dir.string(), now);
      const int64_t run =
          *(*store)->start_run(job, (job_dir / "log.txt").string(), std::nullopt, now);
      db::FileRow file;
      file.path = (job_dir / "log.txt").string();
      file.dev = 1;
      file.ino = 7;
      file.job_id = job;
      file.run_id = run;
      db::Progress progress;
      progress.file_id = *(*store)->insert_file(file, now);
      progress.job_id = job;
      progress.run_id = run;
      progress.outcome = "crashed_oom";
      for (int i = 0; i < 1000; ++i) {
        db::EventRow e;
        e.offset = 100 + static_cast<uint64_t>(i);
        e.kind = "cuda";
        e.phase = "train_step";
        e.step = 10 + i;
        e.event_json = nlohmann::json{{"kind", "cuda"},
                                      {"phase", "train_step"},
                                      {"step", 10 + i},
                                      {"total_steps", 2000},
                                      {"recovered", false},
                                      {"line", 5 + i},
                                      {"total_capacity_bytes", 24ull << 30},
                                      {"free_bytes", 1ull << 30},
                                      {"this_process_in_use_bytes", 22ull << 30},
                                      {"tried_to_allocate_bytes", 2ull << 30},
                                      {"message", "</pre><img src=x onerror=alert(2)> " +
                                                      std::string(2000, 'x')}}
                           .dump();
        e.fixes_json = nlohmann::json::array({{{"id", "lower_batch_size"},
                                               {"rank", 1},
                                               {"title", "<b onmouseover=alert(3)>t</b>"},
                                               {"why", "\"><svg onload=alert(4)>"},
                                               {"changes", nlohmann::json::array()},
                                               {"cost", "c"}}})
                           .dump();
        progress.events.push_back(e);
      }
      REQUIRE((*store)->commit_progress(progress, now));
    }
    // AI Toolkit's loss database, as logging_aitk.py makes it: 0-based step_num, the loss and
    // the learning rate as metrics.
    {
      sqlite3* db = nullptr;
      REQUIRE(sqlite3_open((job_dir / "loss_log.db").c_str(), &db) == SQLITE_OK);
      std::string sql =
          "CREATE TABLE steps(step INTEGER PRIMARY KEY, wall_time REAL);"
          "CREATE TABLE metric_keys(key TEXT PRIMARY KEY, first_seen_step INTEGER, last_seen_step "
          "INTEGER);"
          "CREATE TABLE metrics(step INTEGER, key TEXT, value_real REAL, value_text TEXT, PRIMARY "
          "KEY(step, key));";
      for (int s = 0; s < 1009; ++s) {
        sql += fmt::format(
            "INSERT INTO metrics VALUES({0}, 'loss/loss', {1}, NULL);"
            "INSERT INTO metrics VALUES({0}, 'learning_rate', 0.0001, NULL);",
            s, 0.5 - s * 0.0001);
      }
      REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
      sqlite3_close(db);
    }
    const fs::path page = dir.path / "evil.html";
    const auto [code, said] =
        oomtriage_with(state, "report '" + name + "' --html '" + page.string() + "' 2>&1");
    REQUIRE(code == 0);
    CHECK(said.find("loss from loss_log.db") != std::string::npos);
    const std::string html = slurp(page);
    CHECK(html.size() < 1'000'000);
    CHECK(external_references(html).empty());
    for (const char* raw : {"<script>", "<img", "<b onmouseover", "<svg onload", "\"><svg"}) {
      CAPTURE(raw);
      CHECK(html.find(raw) == std::string::npos);
    }
    CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(html.find("The newest 20 of 1000 events") != std::string::npos);
    CHECK(html.find("training loss (from loss_log.db;") != std::string::npos);

    const auto [md_code, markdown] = oomtriage_with(state, "report '" + name + "' --markdown");
    REQUIRE(md_code == 0);
    CHECK(markdown.find("## OOM report: \\<script\\>alert(1)\\</script\\>") != std::string::npos);
    CHECK(markdown.find("**Run 1 ran out of memory: cuda in train_step, step 1009/2000.**") !=
          std::string::npos);
    CHECK(markdown.find("22.00 GiB in use, tried 2.00 GiB, 1024.00 MiB free of 24.00 GiB (1024.00 "
                        "MiB short)") != std::string::npos);
    CHECK(markdown.find("| 1 |") != std::string::npos);
    CHECK(markdown.find("\\<img") != std::string::npos);  // a literal '<' in Markdown
    CHECK(markdown.size() < 4000);

    // --html, --json and --markdown exclude each other.
    CHECK(oomtriage_with(state, "report x --json --markdown 2>/dev/null").first != 0);
  }

  TEST_CASE(
      "odd curves draw and big stories stay small: a flat loss, means a few ulps apart, one "
      "point, a thousand runs, a one-line config") {
    for (const std::vector<parsers::LossPoint>& points :
         {std::vector<parsers::LossPoint>(3000, parsers::LossPoint{0, 0.1}),
          std::vector<parsers::LossPoint>{{1, 0.7}, {2, std::nextafter(0.7, 1.0)}},
          std::vector<parsers::LossPoint>{{5, 0.3456}}, std::vector<parsers::LossPoint>{}}) {
      daemon::ReportView view;
      view.name = "flat";
      view.loss.points = points;
      if (view.loss.points.size() > 2) {
        for (size_t i = 0; i < view.loss.points.size(); ++i) {
          view.loss.points[i].step = static_cast<int64_t>(i);
        }
      }
      view.loss.source = "test";
      const std::string html = daemon::render_html_report(view);
      CHECK(html.find("nan") == std::string::npos);
      CHECK(html.find("inf") == std::string::npos);
      CHECK(html.size() < 100'000);
    }
    daemon::ReportView big;
    big.name = "big";
    for (int i = 1; i <= 1000; ++i) {
      daemon::RunView run;
      run.number = i;
      run.id = i;
      run.log_path = "/out/big/log.txt";
      run.outcome = "crashed_oom";
      big.runs.push_back(run);
      big.snapshots.push_back({i, "/out/big/.job_config.json", "abc", "t",
                               "-" + std::string(50'000, 'a') + "\n+" + std::string(50'000, 'b')});
      big.events.push_back({{"kind", "cuda"},
                            {"phase", "train_step"},
                            {"step", i},
                            {"recovered", false},
                            {"line", i},
                            {"run_id", i}});
    }
    const std::string html = daemon::render_html_report(big);
    CHECK(html.size() < 1'000'000);
    CHECK(html.find("The newest 30 of 1000 runs") != std::string::npos);
    CHECK(html.find("The newest 10 of 1000 snapshots") != std::string::npos);
  }

  TEST_CASE(
      "Markdown of the README's example job: the verdict, the memory, the runs and the top "
      "fix as a diff") {
    TempDir dir;
    follow_example(dir);
    const auto [code, markdown] = oomtriage_with(dir.path / "state", "report my_lora --markdown");
    REQUIRE(code == 0);
    for (const char* expected :
         {"## OOM report: my_lora", "**Run 1 ran out of memory: cuda in sampling, step 500/3000.**",
          "GPU 0: 22.51 GiB in use, tried 1.50 GiB, 812.00 MiB free of 23.55 GiB",
          "| Run | Started | Outcome | Crash | Carried fix |",
          "1. **Make preview samples cheaper** (`cheapen_previews`)", "   ```diff",
          "   - config.process[0].sample.width: 1024", "   + config.process[0].sample.width: 768",
          "- step from the bar at line 67: "}) {
      CAPTURE(std::string(expected));
      CHECK(markdown.find(expected) != std::string::npos);
    }
  }
}
