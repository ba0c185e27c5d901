// tests/daemon/alerts_test.cc
//
// Alerts: the payloads (escaping, limits, Alertmanager's webhook v4 shape, Standard Webhooks
// signatures), then the real daemon delivering its outbox to real HTTP servers on loopback:
// a receiver down for a while, 429 with Retry-After, 500s, one that never answers, a slow one
// beside a fast one, HMAC checked by the receiver, TLS with a test CA (and refused with the wrong
// one), a real Alertmanager, and `oomtriage alert test`. Where a test says what must not come
// (no third alert, no retry of a refusal), the daemon's loop runs in process on virtual time
// (tests/support/virtual_daemon.h): the window is passed on the clock the daemon waits on.
#include <doctest/doctest.h>

#include <atomic>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/alerts/retry_policy.h"
#include "daemon/alerts/webhook_signature.h"
#include "daemon/alerts/alert_payload.h"
#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/skip.h"
#include "tests/support/virtual_daemon.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

daemon::AlertContent sample_alert(const std::string& message) {
  daemon::AlertContent a;
  a.event_id = 7;
  a.job = "my_lora";
  a.host = "gpu-node-1";
  a.trainer = "ai-toolkit";
  a.model_family = "flux.1";
  a.kind = "cuda";
  a.phase = "sampling";
  a.step = "500 of 3000";
  a.figures = "tried 1.50 GiB";
  a.message = message;
  a.log_path = "/out/my_lora/log.txt";
  a.line = 67;
  a.starts_at = "2026-11-30T08:00:00Z";
  a.fixes.push_back({"cheapen_previews",
                     "Make preview samples cheaper",
                     {"config.process[0].sample.sample_steps: 30 -> 20"},
                     "Lower-quality previews"});
  return a;
}

// A training folder with one AI Toolkit job, and a daemon config with these receivers.
struct AlertRig {
  TempDir dir;
  fs::path out = dir.path / "output";
  fs::path config = dir.path / "oomtriage.yaml";
  explicit AlertRig(const std::string& receivers_yaml) {
    fs::create_directories(out);
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
                          << "\nalert_group_seconds: 1\nalerts:\n"
                          << receivers_yaml;
  }
  void crash(const std::string& job, const std::string& golden = "aitk_gc_off_oom_step2.log") {
    fs::create_directories(out / job);
    write_slowly(out / job / "log.txt", slurp(kGolden / golden), 4096);
  }
};

std::string receiver(const std::string& name, const std::string& type, const std::string& url,
                     const std::string& extra = "") {
  return "  - name: " + name + "\n    type: " + type + "\n    url: " + url +
         "\n    retry_initial_ms: 200\n    timeout_ms: 500\n" + extra;
}

const ScriptedResponse kOk{};

}  // namespace

TEST_SUITE("daemon::alerts") {
  TEST_CASE("Slack: log text arrives inert, sections within 3,000 characters") {
    const auto payload = daemon::slack_payload(
        sample_alert("@everyone <!channel> *bold* ```code``` " + std::string(5000, 'x')));
    const std::string dumped = payload.dump();
    CHECK(dumped.find("<!channel>") == std::string::npos);
    CHECK(dumped.find("&lt;!channel&gt;") != std::string::npos);
    for (const auto& block : payload["blocks"]) {
      if (block.contains("text") && block["text"].contains("text")) {
        CHECK(block["text"]["text"].get<std::string>().size() <= 3000 * 3);
        CHECK(daemon::truncate_utf8(block["text"]["text"].get<std::string>(), 3000) ==
              block["text"]["text"].get<std::string>());
      }
    }
    const std::string log_block = payload["blocks"][2]["text"]["text"];
    CHECK(log_block.rfind("```", 0) == 0);
    CHECK(log_block.find("```code```") == std::string::npos);  // cannot close the code block
    CHECK(payload["text"].get<std::string>().find("my_lora") != std::string::npos);
  }
  TEST_CASE("Discord: no mentions, markdown escaped, limits kept") {
    const auto payload =
        daemon::discord_payload(sample_alert("@everyone **pwn** <@123> " + std::string(9000, 'y')));
    CHECK(payload["allowed_mentions"]["parse"] == json::array());
    const std::string description = payload["embeds"][0]["description"];
    CHECK(description.find("@everyone") == std::string::npos);
    CHECK(description.find("@\u200beveryone") != std::string::npos);
    CHECK(description.find("\\*\\*pwn\\*\\*") != std::string::npos);
    CHECK(daemon::truncate_utf8(description, 4096) == description);
    CHECK(payload["content"].get<std::string>().size() <= 2000 * 4);
  }
  TEST_CASE("generic webhook: Prometheus Alertmanager's webhook v4 JSON") {
    const auto payload =
        daemon::alertmanager_webhook_payload(sample_alert("CUDA out of memory."), "hook");
    CHECK(payload["version"] == "4");
    CHECK(payload["status"] == "firing");
    CHECK(payload["receiver"] == "hook");
    REQUIRE(payload["alerts"].size() == 1);
    const auto& alert = payload["alerts"][0];
    CHECK(alert["labels"]["alertname"] == "TrainingOOM");
    CHECK(alert["labels"]["training_job"] == "my_lora");
    CHECK_FALSE(alert["labels"].contains("job"));  // Prometheus' own label, not ours
    CHECK(payload["groupLabels"]["training_job"] == "my_lora");
    CHECK(alert["labels"]["kind"] == "cuda");
    CHECK(alert["labels"]["phase"] == "sampling");
    CHECK(alert["annotations"]["report"] == "oomtriage report my_lora");
    CHECK(alert["annotations"]["top_fix"] == "cheapen_previews");
    CHECK(alert["startsAt"] == "2026-11-30T08:00:00Z");
    CHECK(alert["fingerprint"].get<std::string>().size() == 16);
  }
  TEST_CASE("a hand-edited row with fields of the wrong type gives an alert, never an exception") {
    daemon::AlertContent a;
    CHECK_NOTHROW(a = daemon::alert_content(1, "my_lora", "gpu-1", "ai-toolkit", "flux.1", "/l",
                                            R"({"kind": 5, "phase": [], "step": "x"})",
                                            R"([1, {"id": 2, "changes": [3]}])", "now"));
    CHECK(a.job == "my_lora");
    CHECK(a.log_path == "/l");
  }
  TEST_CASE("Standard Webhooks signature matches the spec's example") {
    CHECK(daemon::standard_webhook_signature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                                             "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
                                             R"({"test": 2432232314})") ==
          "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  }
  TEST_CASE(
      "the retry policy: 2xx delivered, refusals failed, backoff doubles to its cap, Retry-After "
      "wins") {
    daemon::Receiver r;
    r.retry_initial_ms = 1000;
    r.retry_max_ms = 5000;
    r.retry_horizon_seconds = 3600;
    const auto response = [](int status, std::string body = "",
                             std::optional<double> after = {}) -> Result<daemon::HttpResponse> {
      if (status == 0) return make_error(ErrorCode::kIo, "connect: connection refused");
      daemon::HttpResponse h;
      h.status = status;
      h.body = std::move(body);
      h.retry_after_seconds = after;
      if (status == 302) h.location = "https://elsewhere/";
      return h;
    };
    using V = daemon::DeliveryVerdict;
    CHECK(daemon::judge_response(response(200), r, 1, 0, 1.0).kind == V::kDelivered);
    CHECK(daemon::judge_response(response(204), r, 9, 99999, 1.0).kind == V::kDelivered);
    const V refused = daemon::judge_response(response(404), r, 1, 0, 1.0);
    CHECK(refused.kind == V::kFailed);
    CHECK(refused.reason == "HTTP 404");
    CHECK(refused.log.find("refused") != std::string::npos);
    const V redirect = daemon::judge_response(response(302), r, 1, 0, 1.0);
    CHECK(redirect.kind == V::kFailed);
    CHECK(redirect.reason.find("elsewhere") != std::string::npos);
    // 408 and 5xx and network errors are retried: 1 s, 2 s, 4 s, then the 5 s cap; jitter scales.
    CHECK(daemon::judge_response(response(408), r, 1, 0, 1.0).kind == V::kRetry);
    CHECK(daemon::judge_response(response(503), r, 1, 0, 1.0).delay ==
          std::chrono::milliseconds(1000));
    CHECK(daemon::judge_response(response(503), r, 2, 0, 1.0).delay ==
          std::chrono::milliseconds(2000));
    CHECK(daemon::judge_response(response(0), r, 3, 0, 1.0).delay ==
          std::chrono::milliseconds(4000));
    CHECK(daemon::judge_response(response(0), r, 4, 0, 1.0).delay ==
          std::chrono::milliseconds(5000));
    CHECK(daemon::judge_response(response(500), r, 30, 0, 1.0).delay ==
          std::chrono::milliseconds(5000));
    CHECK(daemon::judge_response(response(500), r, 1, 0, 0.5).delay ==
          std::chrono::milliseconds(500));
    CHECK(daemon::judge_response(response(500), r, 1, 0, 1.5).delay ==
          std::chrono::milliseconds(1500));
    // Milliseconds as configured, not rounded to seconds.
    r.retry_initial_ms = 250;
    CHECK(daemon::judge_response(response(502), r, 1, 0, 1.0).delay ==
          std::chrono::milliseconds(250));
    // 429: the header, else Discord's body, else the backoff.
    CHECK(daemon::judge_response(response(429, "", 7.5), r, 1, 0, 1.5).delay ==
          std::chrono::milliseconds(7500));
    CHECK(daemon::judge_response(response(429, R"({"retry_after": 1.25})"), r, 1, 0, 1.5).delay ==
          std::chrono::milliseconds(1250));
    CHECK(daemon::judge_response(response(429, "slow down"), r, 1, 0, 1.0).delay ==
          std::chrono::milliseconds(250));
    // Past the horizon: failed, with the count in the log line.
    const V late = daemon::judge_response(response(503), r, 12, 3601, 1.0);
    CHECK(late.kind == V::kFailed);
    CHECK(late.log == "giving up after 12 attempts: HTTP 503");
  }

  TEST_CASE(
      "a traceback that arrives after the alert amends the event: one update, same id family") {
    // AI Toolkit's "Error running job:" after a training bar, then a pause longer than the
    // traceback wait: the daemon stores and alerts it as a training-step OOM. The traceback
    // arrives later, a line every 50 ms, and shows a preview being sampled: the stored event
    // becomes scan's verdict on the final file, and because the top fix changed, one update
    // alert follows the first, marked as one.
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    AlertRig rig(receiver("hook", "webhook", server.url("/oom")));
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    std::string log = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const size_t samples = log.find("Generating Samples");
    const size_t error = log.find("Error running job");
    REQUIRE(samples < error);
    log.erase(samples, error - samples);
    const size_t traceback = log.find("Traceback");
    REQUIRE(traceback != std::string::npos);
    fs::create_directories(rig.out / "my_lora");
    const fs::path path = rig.out / "my_lora" / "log.txt";
    write_slowly(path, std::string_view(log).substr(0, traceback), 4096);
    REQUIRE(daemon.run_until([&] { return server.count() == 1; }, 15s));
    daemon.pass(500ms);
    std::istringstream rest(log.substr(traceback));
    for (std::string line; std::getline(rest, line);) {
      std::ofstream(path, std::ios::app) << line << "\n";
      daemon.pass(50ms);
    }
    const auto [scan_rc, scanned] = oomtriage_says("scan --json '" + path.string() + "'");
    REQUIRE(scan_rc == 0);
    const auto scan = json::parse(scanned)["logs"][0];
    REQUIRE(scan["events"].size() == 1);
    const std::string report =
        "--state-dir '" + (rig.dir.path / "state").string() + "' report my_lora --json 2>/dev/null";
    json reported;
    REQUIRE(daemon.run_until([&] {
      const auto [rc, text] = oomtriage_says(report);
      if (rc != 0) return false;
      reported = json::parse(text);
      return reported["events"].size() == 1 &&
             reported["events"][0]["phase"] == scan["events"][0]["phase"];
    }));
    for (const char* key : {"phase", "step", "phase_evidence", "step_evidence", "exception"}) {
      CAPTURE(key);
      CHECK(reported["events"][0][key] == scan["events"][0][key]);
    }
    CHECK(reported["events"][0]["revision"].get<int>() >= 1);
    REQUIRE(daemon.run_until([&] { return server.count() >= 2; }, 10s));
    daemon.pass(1500ms);  // no third
    const auto requests = server.requests();
    REQUIRE(requests.size() == 2);
    // The key is the event's UUID, and the update is of the same family.
    const std::string key = requests[0].headers.at("webhook-id");
    CHECK(std::regex_match(
        key,
        std::regex("evt_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
    CHECK(requests[1].headers.at("webhook-id").starts_with(key + "_r"));
    // Alertmanager's fingerprint names the alert, not the revision.
    CHECK(json::parse(requests[0].body)["alerts"][0]["fingerprint"] ==
          json::parse(requests[1].body)["alerts"][0]["fingerprint"]);
    const json first = json::parse(requests[0].body)["alerts"][0];
    const json update = json::parse(requests[1].body)["alerts"][0];
    CHECK(first["labels"]["phase"] == "train_step");
    CHECK(update["labels"]["phase"] == "sampling");
    CHECK(update["annotations"]["summary"].get<std::string>().starts_with("Update: "));
    CHECK(update["annotations"]["top_fix"] == scan["fixes"][0]["id"]);
    CHECK(first["annotations"]["top_fix"] != update["annotations"]["top_fix"]);
    CHECK(daemon.stderr_text().find("amended: ") != std::string::npos);
  }
  TEST_CASE("a receiver down for a while gets every alert when it comes back, once, in order") {
    ReservedPort port;  // refused until the server takes it over
    // One message per alert (no storm window): the backlog comes back as the alerts it was.
    AlertRig rig(receiver("hook", "webhook",
                          "http://127.0.0.1:" + std::to_string(port.port()) + "/oom",
                          "    group_wait_ms: 0\n"));
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    StoreView view{rig.dir.path / "state" / "oomtriage.db"};
    // One after the other: two logs written in bursts are both polled, in either order.
    rig.crash("job_a");
    REQUIRE(daemon.run_until([&] { return view.events("job_a") == 1; }));
    rig.crash("job_b", "aitk_host_sigkill.log");
    REQUIRE(daemon.run_until([&] { return view.events("job_b") == 1; }));
    daemon.pass(1500ms);  // retries fail meanwhile
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; }, std::move(port));
    REQUIRE(daemon.run_until([&] { return server.count() >= 2; }, 15s));
    daemon.pass(1500ms);
    const auto requests = server.requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].headers.at("webhook-id").starts_with("evt_"));
    CHECK(requests[1].headers.at("webhook-id").starts_with("evt_"));
    CHECK(requests[0].headers.at("webhook-id") != requests[1].headers.at("webhook-id"));
    CHECK(json::parse(requests[0].body)["alerts"][0]["labels"]["training_job"] == "job_a");
    CHECK(json::parse(requests[1].body)["alerts"][0]["labels"]["kind"] == "host_killed");
    CHECK(daemon.stderr_text().find("retrying") != std::string::npos);
  }
  TEST_CASE("SIGHUP while a request is in flight: no use after free, the alert lands once") {
    // The old dispatcher keeps its lanes until the slow receiver answers; the new one waits so
    // that the row in flight is not sent twice. Under ASan (scripts/test_sanitized.sh) this is
    // the proof that nothing touches a freed lane.
    HttpTestServer server([](const ReceivedRequest&, size_t) {
      ScriptedResponse slow;
      slow.delay = 1500ms;
      return slow;
    });
    AlertRig rig("  - name: hook\n    type: webhook\n    url: " + server.url("/oom") +
                 "\n    retry_initial_ms: 200\n    timeout_ms: 5000\n");
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    rig.crash("job_a");
    REQUIRE(daemon.run_until([&] { return server.count() == 1; }));
    ::raise(SIGHUP);  // the daemon's loop, in this process, hears it
    REQUIRE(daemon.run_until(
        [&] { return daemon.stderr_text().find("SIGHUP: config reloaded") != std::string::npos; }));
    auto store = db::Store::open((rig.dir.path / "state" / "oomtriage.db").string());
    REQUIRE(store);
    // The slow answer arrives after the reload; then the new dispatcher is let go.
    REQUIRE(daemon.run_until([&] { return *(*store)->count_alerts("delivered") == 1; }));
    daemon.pass(2500ms);
    CHECK(server.count() == 1);
    CHECK(*(*store)->count_alerts("delivered") == 1);
    CHECK(*(*store)->count_alerts("pending") == 0);
  }
  TEST_CASE(
      "a 2xx with a huge body is delivered once, and a 307 is followed, a 302 fails with where") {
    const std::string huge(8 << 20, 'x');
    HttpTestServer target([](const ReceivedRequest&, size_t) { return kOk; });
    HttpTestServer server([&](const ReceivedRequest& request, size_t) {
      ScriptedResponse r;
      if (request.target == "/big") {
        r.body = huge;
      } else if (request.target == "/moved") {
        r.status = 307;
        r.location = target.url("/landed");
      } else {
        r.status = 302;
        r.location = "/elsewhere";
      }
      return r;
    });
    AlertRig rig(receiver("big", "webhook", server.url("/big")) +
                 receiver("moved", "webhook", server.url("/moved")) +
                 receiver("found", "webhook", server.url("/found")));
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    rig.crash("job_a");
    REQUIRE(daemon.run_until([&] { return target.count() == 1; }, 15s));
    daemon.pass(1500ms);  // no resend of the big one, no retry of the 302
    size_t big = 0, found = 0;
    for (const auto& request : server.requests()) {
      big += request.target == "/big";
      found += request.target == "/found";
    }
    CHECK(big == 1);
    CHECK(found == 1);
    CHECK(target.requests()[0].target == "/landed");
    CHECK(json::parse(target.requests()[0].body)["alerts"][0]["labels"]["training_job"] == "job_a");
    CHECK(daemon.stderr_text().find("HTTP 302 redirect to") != std::string::npos);
  }
  TEST_CASE("429 with Retry-After is honoured, 500s are retried, each alert lands once") {
    HttpTestServer limited([](const ReceivedRequest&, size_t i) {
      return i == 0 ? ScriptedResponse{.status = 429, .body = "rate_limited", .retry_after = "2"}
                    : kOk;
    });
    HttpTestServer failing([](const ReceivedRequest&, size_t i) {
      return i < 2 ? ScriptedResponse{.status = 503, .body = "busy"} : kOk;
    });
    AlertRig rig(receiver("limited", "webhook", limited.url()) +
                 receiver("failing", "webhook", failing.url()));
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    rig.crash("job");
    REQUIRE(daemon.run_until([&] { return limited.count() >= 1; }, 15s));
    daemon.pass(1900ms);  // Retry-After: 2 on the daemon's clock
    CHECK(limited.count() == 1);
    REQUIRE(daemon.run_until([&] { return limited.count() >= 2 && failing.count() >= 3; }, 15s));
    daemon.pass(1500ms);
    CHECK(limited.count() == 2);
    CHECK(failing.count() == 3);
  }
  TEST_CASE("a receiver that never answers times out and is retried, a slow one delays no other") {
    HttpTestServer hanging([](const ReceivedRequest&, size_t i) {
      return i == 0 ? ScriptedResponse{.hang = true} : kOk;
    });
    HttpTestServer slow(
        [](const ReceivedRequest&, size_t) { return ScriptedResponse{.delay = 3000ms}; });
    HttpTestServer fast([](const ReceivedRequest&, size_t) { return kOk; });
    AlertRig rig(receiver("hanging", "webhook", hanging.url()) +
                 receiver("slow", "webhook", slow.url(), "    timeout_ms: 10000\n") +
                 receiver("fast", "webhook", fast.url()));
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    const auto start = std::chrono::steady_clock::now();
    rig.crash("job");
    REQUIRE(wait_until([&] { return fast.count() == 1; }, 5s));
    CHECK(std::chrono::steady_clock::now() - start < 2500ms);  // not behind the slow one
    REQUIRE(wait_until([&] { return hanging.count() >= 2 && slow.count() >= 1; }, 15s));
    CHECK(daemon.stderr_text().find("timed out") != std::string::npos);
  }
  TEST_CASE("the receiver verifies the HMAC signature over the raw body") {
    TempDir keys;
    const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    std::ofstream(keys.path / "hook.key") << secret << "\n";
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    AlertRig rig(receiver("signed", "webhook", server.url(),
                          "    hmac_secret_file: " + (keys.path / "hook.key").string() + "\n"));
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    rig.crash("job");
    REQUIRE(wait_until([&] { return server.count() == 1; }));
    const auto request = server.requests()[0];
    const std::string expected =
        daemon::standard_webhook_signature(secret, request.headers.at("webhook-id"),
                                           request.headers.at("webhook-timestamp"), request.body);
    CHECK(request.headers.at("webhook-signature") == expected);
    CHECK(std::abs(std::stoll(request.headers.at("webhook-timestamp")) -
                   std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count()) < 60);
    CHECK(slurp(rig.dir.path / "err").find(secret) == std::string::npos);
  }
  TEST_CASE("TLS to a local server with a test CA, and refused with the wrong CA") {
    TempDir pki;
    const std::string p = pki.path.string();
    const std::string script =
        "cd " + p +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem "
        "-days 2 -subj /CN=oomtriage-test-ca 2>/dev/null && "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "
        "/CN=127.0.0.1 "
        "2>/dev/null && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > san.ext && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
        "-days 2 -extfile san.ext 2>/dev/null && "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 "
        "-subj /CN=other-ca 2>/dev/null";
    REQUIRE(std::system(script.c_str()) == 0);
    auto tls = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
    tls->use_certificate_chain_file(p + "/server.pem");
    tls->use_private_key_file(p + "/server.key", boost::asio::ssl::context::pem);
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; }, tls);
    AlertRig rig(
        receiver("trusted", "webhook", server.url(), "    ca_file: " + p + "/ca.pem\n") +
        receiver("untrusted", "webhook", server.url(), "    ca_file: " + p + "/other.pem\n"));
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    rig.crash("job");
    REQUIRE(daemon.run_until([&] { return server.count() == 1; }));
    REQUIRE(daemon.run_until(
        [&] { return daemon.stderr_text().find("alert untrusted") != std::string::npos; }));
    CHECK(daemon.stderr_text().find("tls handshake") != std::string::npos);
    daemon.pass(500ms);
    CHECK(server.count() == 1);  // the untrusted lane never completed a request
  }
  TEST_CASE("a real Alertmanager receives the alert and shows it in its API") {
    const char* binary = "/usr/bin/prometheus-alertmanager";
    if (!fs::exists(binary)) {
      OOMTRIAGE_SKIP("prometheus-alertmanager is not installed (scripts/setup.sh installs it)");
    }
    TempDir am;
    std::ofstream(am.path / "am.yml") << "route:\n  receiver: none\nreceivers:\n  - name: none\n";
    const KillOnExit stop{am.path / "pid"};
    std::string address;
    std::string query;
    const unsigned short port = serve_on_free_port([&](unsigned short candidate) {
      address = "127.0.0.1:" + std::to_string(candidate);
      query = "curl -sf http://" + address + "/api/v2/alerts > " +
              (am.path / "alerts.json").string() + " 2>/dev/null";
      const std::string start =
          std::string(binary) + " --config.file=" + (am.path / "am.yml").string() +
          " --storage.path=" + (am.path / "data").string() + " --web.listen-address=" + address +
          " --cluster.listen-address= > " + (am.path / "am.log").string() + " 2>&1 & echo $! > " +
          (am.path / "pid").string();
      if (std::system(start.c_str()) != 0) return false;
      const auto taken = [&] {
        return slurp(am.path / "am.log").find("address already in use") != std::string::npos;
      };
      wait_until([&] { return taken() || std::system(query.c_str()) == 0; }, 15s);
      if (!taken() && std::system(query.c_str()) == 0) return true;
      KillOnExit{am.path / "pid"};  // another process has the port: stop it and take another
      return false;
    });
    INFO("alertmanager's log: " << slurp(am.path / "am.log"));
    REQUIRE(port != 0);
    AlertRig rig(receiver("am", "alertmanager", "http://" + address));
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    rig.crash("my_job");
    REQUIRE(wait_until(
        [&] {
          std::system(query.c_str());
          return slurp(am.path / "alerts.json").find("TrainingOOM") != std::string::npos;
        },
        15s));
    const auto alerts = json::parse(slurp(am.path / "alerts.json"));
    REQUIRE(alerts.size() == 1);
    CHECK(alerts[0]["labels"]["training_job"] == "my_job");
    CHECK(alerts[0]["labels"]["kind"] == "cuda");
    CHECK(alerts[0]["labels"]["phase"] == "train_step");
    CHECK(alerts[0]["annotations"]["report"] == "oomtriage report my_job");
  }
  TEST_CASE(
      "a log line with @everyone, <!channel> and markdown arrives inert in Slack and Discord") {
    HttpTestServer slack([](const ReceivedRequest&, size_t) { return kOk; });
    HttpTestServer discord(
        [](const ReceivedRequest&, size_t) { return ScriptedResponse{.status = 204, .body = ""}; });
    TempDir secrets;
    std::ofstream(secrets.path / "slack.url") << slack.url("/services/T000/B000/SECRET") << "\n";
    std::ofstream(secrets.path / "discord.url") << discord.url("/api/webhooks/1/SECRET") << "\n";
    AlertRig rig("  - type: slack\n    url_file: " + (secrets.path / "slack.url").string() +
                 "\n  - type: discord\n    url_file: " + (secrets.path / "discord.url").string() +
                 "\n");
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    fs::create_directories(rig.out / "evil");
    write_slowly(
        rig.out / "evil" / "log.txt",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB @everyone <!channel> "
        "*bold* [link](http://x)\n");
    REQUIRE(wait_until([&] { return slack.count() == 1 && discord.count() == 1; }));
    const std::string slack_body = slack.requests()[0].body;
    CHECK(slack_body.find("<!channel>") == std::string::npos);
    CHECK(slack_body.find("&lt;!channel&gt;") != std::string::npos);
    const auto discord_body = json::parse(discord.requests()[0].body);
    CHECK(discord_body["allowed_mentions"]["parse"] == json::array());
    CHECK(discord_body.dump().find("@everyone") == std::string::npos);
    CHECK(discord.requests()[0].target == "/api/webhooks/1/SECRET");
    CHECK(daemon.stderr_text().find("SECRET") == std::string::npos);
  }
  TEST_CASE("a Slack URL written inline in the config is refused: it is a secret") {
    auto config = daemon::parse_daemon_config(
        "watch:\n  - logs: /x/*/log.txt\nalerts:\n  - type: slack\n    url: "
        "https://hooks.slack.com/services/T/B/X\n",
        "c.yaml");
    REQUIRE_FALSE(config);
    CHECK(config.error().message.find("c.yaml:5:") == 0);
    CHECK(config.error().message.find("url_file or url_env") != std::string::npos);
  }
  TEST_CASE("oomtriage alert test sends a sample alert") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    AlertRig rig(receiver("hook", "webhook", server.url()));
    const std::string command = std::string(OOMTRIAGE_BINARY) + " alert test --config " +
                                rig.config.string() + " > " + (rig.dir.path / "out").string();
    CHECK(std::system(command.c_str()) == 0);
    CHECK(std::system(command.c_str()) == 0);
    REQUIRE(server.count() == 2);
    const auto alert = json::parse(server.requests()[0].body)["alerts"][0];
    CHECK(alert["labels"]["training_job"] == "oomtriage-test");
    // It says it is a test: labelled, paged on by nobody, resolving itself.
    CHECK(alert["labels"]["test"] == "true");
    CHECK(alert["labels"]["severity"] == "info");
    CHECK(alert["endsAt"] != "0001-01-01T00:00:00Z");
    CHECK(alert["endsAt"].get<std::string>() > alert["startsAt"].get<std::string>());
    // A fresh id each time: a receiver that deduplicates by it still takes the second test.
    const std::string first_id = server.requests()[0].headers.at("webhook-id");
    CHECK(first_id.starts_with("test_"));
    CHECK(first_id != server.requests()[1].headers.at("webhook-id"));
    CHECK(slurp(rig.dir.path / "out").find("delivered") != std::string::npos);
  }
  TEST_CASE("oomtriage alerts lists a refused alert with the receiver's answer - resend sends it") {
    // Refused (a 400 is not retried) until the receiver is fixed.
    std::atomic<bool> fixed{false};
    HttpTestServer server([&](const ReceivedRequest&, size_t) {
      return fixed ? kOk : ScriptedResponse{.status = 400, .body = "unknown channel #gpu-oom"};
    });
    AlertRig rig(receiver("ops", "webhook", server.url()));
    std::ofstream(rig.config, std::ios::app) << "rescan_seconds: 1\n";
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    rig.crash("job");
    const std::string state = " --state-dir " + (rig.dir.path / "state").string();
    const auto alerts = [&](const std::string& args) {
      const fs::path out = rig.dir.path / "alerts.out";
      std::system((std::string(OOMTRIAGE_BINARY) + state + " alerts " + args + " > " + out.string())
                      .c_str());
      return slurp(out);
    };
    REQUIRE(wait_until([&] {
      const auto listed = json::parse(alerts("--failed --json"), nullptr, false);
      return listed.is_object() && listed["alerts"].size() == 1;
    }));
    const auto row = json::parse(alerts("--failed --json"))["alerts"][0];
    CHECK(row["receiver"] == "ops");
    CHECK(row["job"] == "job");
    CHECK(row["event"].get<std::string>().starts_with("cuda in "));
    CHECK(row["last_error"].get<std::string>().find("HTTP 400") != std::string::npos);
    CHECK(row["last_error"].get<std::string>().find("unknown channel #gpu-oom") !=
          std::string::npos);
    CHECK(json::parse(alerts("--pending --json"))["alerts"].empty());
    CHECK(alerts("--failed").find("unknown channel #gpu-oom") != std::string::npos);
    CHECK(daemon.stderr_text().find("unknown channel #gpu-oom") != std::string::npos);

    fixed = true;
    const size_t before = server.count();
    const std::string id = std::to_string(row["id"].get<int64_t>());
    CHECK(alerts("resend " + id).find("pending again") != std::string::npos);
    REQUIRE(wait_until([&] { return server.count() == before + 1; }));
    REQUIRE(wait_until(
        [&] { return json::parse(alerts("--json"))["alerts"][0]["state"] == "delivered"; }));
    CHECK(std::system(
              (std::string(OOMTRIAGE_BINARY) + state + " alerts resend 999 2>/dev/null").c_str()) !=
          0);
  }
  TEST_CASE("oomtriage alert test shows what a refusing receiver answered") {
    HttpTestServer server([](const ReceivedRequest&, size_t) {
      return ScriptedResponse{.status = 400,
                              .body = "{\"error\": \"invalid payload: labels.training_job\"}\n" +
                                      std::string(500, 'x')};
    });
    AlertRig rig(receiver("hook", "webhook", server.url()));
    const std::string command = std::string(OOMTRIAGE_BINARY) + " alert test --config " +
                                rig.config.string() + " > " + (rig.dir.path / "out").string();
    CHECK(std::system(command.c_str()) != 0);
    const std::string out = slurp(rig.dir.path / "out");
    CHECK(out.find("failed: HTTP 400: {\"error\": \"invalid payload: labels.training_job\"}") !=
          std::string::npos);
    CHECK(out.find(std::string(201, 'x')) == std::string::npos);  // the first 200 only
  }
}
