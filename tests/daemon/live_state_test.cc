// tests/daemon/live_state_test.cc: a log's last line as the live state shows it, when a silent
// job is stalled, and the texts the alerts use.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>

#include "daemon/alerts/alert_payload.h"
#include "daemon/common/human_units.h"
#include "daemon/common/metrics.h"
#include "daemon/service/live_state.h"

using namespace oomtriage;

TEST_SUITE("daemon::live") {
  TEST_CASE("the last line: the newest redraw of a bar, without escapes, cut, valid UTF-8") {
    using daemon::last_line_of;
    CHECK(last_line_of("Running 1 job\nmy_lora:   1%| 1/100\rmy_lora:   2%| 2/100\r") ==
          "my_lora:   2%| 2/100");
    // What follows the last line end may still be being written.
    CHECK(last_line_of("saving\nmy_lora:   3%| 3/1") == "saving");
    CHECK(last_line_of("no line end yet") == "");
    // Blank lines and empty redraws are passed over; ANSI colours go.
    CHECK(last_line_of("\x1b[31mERROR\x1b[0m stuck\n\n  \r\n") == "ERROR stuck");
    const std::string cut = last_line_of(std::string(500, 'x') + "\n");
    CHECK(cut == std::string(200, 'x'));
    CHECK(last_line_of("bad \xff byte\n") == "bad \xef\xbf\xbd byte");
  }

  TEST_CASE("a log's tail read through its descriptor, or by its path when it was closed") {
    char name[] = "/tmp/oomtriage-tail-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    const std::string text = "Running 1 job\nsteps:  5%| 5/100\r";
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    const daemon::LogEnd open = daemon::read_log_tail(fd, name);
    const daemon::LogEnd closed = daemon::read_log_tail(-1, name);
    CHECK(open.last_line == "steps:  5%| 5/100");
    CHECK(closed.last_line == open.last_line);
    CHECK(closed.last_write > 0);
    CHECK(closed.last_write == open.last_write);
    ::close(fd);
    ::unlink(name);
    CHECK(daemon::read_log_tail(-1, name).last_write == 0);  // gone: nothing, not an error
  }

  TEST_CASE("stalled after the configured time, or 20 times a slow job's step time") {
    using std::chrono::seconds;
    CHECK(daemon::stall_after(900, std::nullopt) == seconds(900));
    CHECK(daemon::stall_after(900, 0.5) == seconds(900));        // 2 s/it: 40 s < 900 s
    CHECK(daemon::stall_after(900, 1.0 / 60) == seconds(1200));  // 60 s/it
    CHECK(daemon::stall_after(2, 10.0) == seconds(2));
    CHECK(daemon::stall_after(900, 0.0) == seconds(900));
  }

  TEST_CASE("the time left: at the bar's rate, none without a rate or a total, none for nonsense") {
    db::LiveState live;
    live.step = 500;
    live.total_steps = 3000;
    CHECK_FALSE(live.eta_seconds());
    live.steps_per_second = 1 / 1.4;
    CHECK(live.eta_seconds() == 3500);
    live.steps_per_second = 1e-20;  // "100000000000000000000s/it"
    CHECK_FALSE(live.eta_seconds());
    live.step = 3000;
    CHECK(live.eta_seconds() == 0);
  }

  TEST_CASE("durations in words - the stalled jobs' gauge names each") {
    CHECK(daemon::duration_words(45) == "45 s");
    CHECK(daemon::duration_words(17 * 60 + 5) == "17 min");
    CHECK(daemon::duration_words(2 * 3600 + 5 * 60) == "2 h 05 min");
    CHECK(daemon::duration_words(3 * 86400 + 4 * 3600) == "3 d 4 h");
    daemon::Metrics metrics;
    metrics.stalled_jobs["my_lora"] = 1;
    metrics.stalled_warnings = 3;
    const std::string text = metrics.render();
    CHECK(text.find("oomtriage_jobs_stalled 1\n") != std::string::npos);
    CHECK(text.find("oomtriage_job_stalled{job=\"my_lora\"} 1\n") != std::string::npos);
    CHECK(text.find("oomtriage_stalled_warnings_total 3\n") != std::string::npos);
  }
}

TEST_SUITE("daemon::live") {
  TEST_CASE("a stall and its resolve in every receiver's shape, linked to the job's page") {
    daemon::AlertContent a;
    a.event_id = 7;
    a.job = "my lora";
    a.host = "gpu-1";
    a.phase = "train_step";
    a.step = "500 of 3000";
    a.message = "Last line: my_lora: 17%";
    a.starts_at = "2026-12-05T10:00:00Z";
    a.stalled = daemon::AlertContent::Stall{1764928800, "17 min", "my_lora: 17%", false};
    a.url = daemon::job_page_url("https://oom.example.com", a.job);
    CHECK(a.url == "https://oom.example.com/job/my%20lora");
    CHECK(daemon::job_page_url("", "x").empty());
    CHECK(a.title() == "Training stalled: my lora (silent for 17 min)");
    CHECK(a.webhook_id() == "stalled_7_1764928800");
    nlohmann::json webhook = daemon::alertmanager_webhook_payload(a, "hook");
    CHECK(webhook["status"] == "firing");
    CHECK(webhook["alerts"][0]["labels"]["alertname"] == "TrainingStalled");
    CHECK(webhook["alerts"][0]["labels"]["severity"] == "warning");
    CHECK(webhook["alerts"][0]["generatorURL"] == a.url);
    CHECK(webhook["alerts"][0]["annotations"]["silent_for"] == "17 min");
    CHECK(webhook["alerts"][0]["annotations"]["url"] == a.url);
    CHECK(daemon::alertmanager_api_payload(a)[0]["generatorURL"] == a.url);
    CHECK(daemon::slack_payload(a).dump().find("<" + a.url + "|the job's page>") !=
          std::string::npos);
    const nlohmann::json discord = daemon::discord_payload(a);
    CHECK(discord["embeds"][0]["url"] == a.url);
    CHECK(discord["embeds"][0]["color"] == 0xE67E22);

    a.stalled->resolved = true;
    a.ends_at = "2026-12-05T10:20:00Z";
    CHECK(a.title() == "Training going on again: my lora");
    CHECK(a.webhook_id() == "stalled_7_1764928800_resolved");
    webhook = daemon::alertmanager_webhook_payload(a, "hook");
    CHECK(webhook["status"] == "resolved");
    CHECK(webhook["alerts"][0]["status"] == "resolved");
    CHECK(webhook["alerts"][0]["endsAt"] == "2026-12-05T10:20:00Z");
    CHECK(daemon::discord_payload(a)["embeds"][0]["color"] == 0x2ECC71);

    // Without web_url nothing changes: no link anywhere.
    a.url.clear();
    webhook = daemon::alertmanager_webhook_payload(a, "hook");
    CHECK(webhook["alerts"][0]["generatorURL"] == "");
    CHECK_FALSE(webhook["alerts"][0]["annotations"].contains("url"));
    CHECK_FALSE(daemon::discord_payload(a)["embeds"][0].contains("url"));
  }
}
