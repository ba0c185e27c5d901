// tests/daemon/integrity_test.cc
//
// An operator's bad day against the real daemon, with a real webhook receiver: the store emptied
// while the daemon was down, a backup put back, the last commits lost (the store as a torn WAL
// tail leaves it), and a recovery that first met a full disk. In each, every crash is stored and
// alerted, no two crashes ever share a webhook-id, a crash alerted before is alerted again only
// with the mark that says so, one critical line and one OomtriageStoreRecovered say it, and
// `report` and `check-config` too. And `serve` follows a store replaced under it.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "daemon/alerts/alert_payload.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/serve_process.h"
#include "tests/support/store_damage.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct OomAlert {
  std::string job;
  std::string id;  // its webhook-id (the annotation: a storm's members keep their own)
  bool resent = false;
};

struct Rig {
  TempDir dir;
  fs::path out = dir.path / "output";
  fs::path state = dir.path / "state";
  fs::path config = dir.path / "oomtriage.yaml";
  fs::path store = state / "oomtriage.db";
  HttpTestServer server{[](const ReceivedRequest&, size_t) { return ScriptedResponse{}; }};
  std::vector<std::string> args = {"daemon", "--config", config.string()};
  std::string crash = slurp(kGolden / "aitk_gc_off_oom_step2.log");
  int starts = 0;

  Rig() {
    fs::create_directories(out);
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
                          << "\nalerts:\n  - name: hook\n    type: webhook\n    url: "
                          << server.url("/oom") << "\n    group_wait_ms: 0\n";
  }
  fs::path err() { return dir.path / ("err" + std::to_string(++starts)); }
  // What the receiver got and what the daemons said, for a failure's message.
  std::string seen() const {
    std::string text;
    for (const auto& r : server.requests()) text += r.body.substr(0, 300) + "\n";
    text += "drained: " + std::to_string(drained()) + "\n";
    for (int i = 1; i <= starts; ++i) text += slurp(dir.path / ("err" + std::to_string(i))) + "\n";
    return text;
  }
  void crash_job(const std::string& job) {
    fs::create_directories(out / job);
    write_slowly(out / job / "log.txt", crash, 4096);
  }
  std::vector<OomAlert> ooms() const {
    std::vector<OomAlert> found;
    for (const auto& r : server.requests()) {
      const json body = json::parse(r.body);  // kept: the loop walks into it
      for (const json& alert : body["alerts"]) {
        const std::string id = alert["annotations"].value("webhook_id", "");
        if (!id.starts_with("evt_")) continue;
        found.push_back({alert["labels"].value("training_job", ""), id,
                         alert["annotations"].value("resent_after_store_recovery", "") == "true"});
      }
    }
    return found;
  }
  size_t alerts_of(const std::string& job) const {
    size_t n = 0;
    for (const OomAlert& a : ooms()) n += a.job == job;
    return n;
  }
  size_t recoveries_alerted() const {
    size_t n = 0;
    for (const auto& r : server.requests()) {
      const json body = json::parse(r.body);
      for (const json& alert : body["alerts"])
        n += alert["labels"]["alertname"] == "OomtriageStoreRecovered";
    }
    return n;
  }
  // Once no outbox row waits nothing more can be sent: a row is marked only after its answer.
  bool drained() const {
    auto opened = db::Store::open(store.string());
    if (!opened) return false;
    auto pending = (*opened)->count_alerts("pending");
    return pending && *pending == 0;
  }
  bool kept_aside(const std::string& label) const {
    for (const auto& entry : fs::directory_iterator(state)) {
      if (entry.path().filename().string().starts_with("oomtriage.db." + label + "-")) return true;
    }
    return false;
  }
  void remove_store_files() const {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(store.string() + suffix);
  }
  void copy_store_to(const fs::path& to) const {
    for (const char* suffix : {"", "-wal"}) {
      fs::remove(to.string() + suffix);
      if (fs::exists(store.string() + suffix))
        fs::copy_file(store.string() + suffix, to.string() + suffix);
    }
  }
  // Puts a copy back as a person restores a backup: another file renamed into the store's place.
  void put_back(const fs::path& from) const {
    remove_store_files();
    for (const char* suffix : {"", "-wal"}) {
      if (!fs::exists(from.string() + suffix)) continue;
      fs::copy_file(from.string() + suffix, dir.path / "restoring");
      fs::rename(dir.path / "restoring", store.string() + suffix);
    }
  }
};

// What every attack must leave: no webhook-id shared by two crashes; each crash alerted once
// without the mark (`fresh` of them), and again only with it.
void check_ids(const Rig& rig, const std::map<std::string, size_t>& unmarked) {
  std::map<std::string, std::string> job_of_id;
  std::map<std::string, size_t> plain;
  for (const OomAlert& a : rig.ooms()) {
    INFO(a.job << " " << a.id);
    const auto [it, fresh] = job_of_id.emplace(a.id, a.job);
    CHECK_MESSAGE(it->second == a.job, "one webhook-id for two crashes: " << a.id);
    // The same id again may only be a delivery repeated, never another crash's.
    if (!a.resent) ++plain[a.job];
  }
  for (const auto& [job, n] : unmarked) {
    const std::string label = "job " + job;
    INFO(label);
    CHECK(plain[job] == n);
  }
}

void check_said_once(Rig& rig, const std::string& said, const std::string& report_job) {
  INFO(said);
  CHECK(count_of(said, "<2>") == 1);
  CHECK(said.find("is not the store this daemon last wrote") != std::string::npos);
  CHECK(rig.recoveries_alerted() == 1);
  const std::string state = "--state-dir '" + rig.state.string() + "' ";
  CHECK(oomtriage_says(state + "report " + report_job)
            .second.find("note: this store was "
                         "recovered at") != std::string::npos);
  const auto [rc, checked] = oomtriage_says(state + "check-config '" + rig.config.string() + "'");
  CHECK(rc == 0);
  CHECK(checked.find("note: this store was recovered at") != std::string::npos);
}

// A backup put back (`kill9` false: taken after a clean stop), or the last commits lost to a
// power loss (`kill9`: the store and its WAL as they were a crash earlier): the crash those
// commits held is found again and marked, and the next crash gets an id no crash had.
void run_rollback_case(bool kill9) {
  Rig rig;
  const fs::path backup = rig.dir.path / "backup.db";
  const int stop = kill9 ? SIGKILL : SIGTERM;
  {
    DaemonProcess daemon(rig.state, rig.args, rig.err());
    rig.crash_job("one");
    REQUIRE(wait_until([&] { return rig.alerts_of("one") == 1 && rig.drained(); }, 15s));
    daemon.stop(stop);
  }
  rig.copy_store_to(backup);
  {
    DaemonProcess daemon(rig.state, rig.args, rig.err());
    rig.crash_job("two");
    REQUIRE(wait_until([&] { return rig.alerts_of("two") == 1 && rig.drained(); }, 15s));
    daemon.stop(stop);
  }
  rig.put_back(backup);
  const fs::path err = rig.err();
  DaemonProcess daemon(rig.state, rig.args, err);
  rig.crash_job("three");
  REQUIRE(wait_until(
      [&] {
        return rig.alerts_of("three") == 1 && rig.alerts_of("two") == 2 &&
               rig.recoveries_alerted() == 1 && rig.drained();
      },
      20s));
  check_ids(rig, {{"one", 1}, {"two", 1}, {"three", 1}});
  CHECK(rig.alerts_of("one") == 1);  // its commit survived: read on from where it was
  check_said_once(rig, slurp(err), "three");
  CHECK(daemon.stop(SIGTERM) == 0);
}

}  // namespace

TEST_SUITE("daemon::integrity") {
  TEST_CASE("every alert's key: an OOM's own UUID - the others scoped by the store's id") {
    daemon::AlertContent oom;
    oom.event_id = 3;
    oom.event_uuid = "5d1c0f4e-8a2b-4c3d-9e8f-0a1b2c3d4e5f";
    oom.scope = "0f3a9c1e-aaaa-4bbb-8ccc-123456789abc";
    CHECK(oom.webhook_id() == "evt_5d1c0f4e-8a2b-4c3d-9e8f-0a1b2c3d4e5f");
    oom.revision = 2;
    CHECK(oom.webhook_id() == "evt_5d1c0f4e-8a2b-4c3d-9e8f-0a1b2c3d4e5f_r2");
    daemon::AlertContent check;
    check.event_id = 3;
    check.scope = oom.scope;
    check.predicted = daemon::AlertContent::Prediction{};
    CHECK(check.webhook_id() == "preflight_0f3a9c1e_3");
    daemon::AlertContent near = check;
    near.near_oom = true;
    near.revision = 1;
    CHECK(near.webhook_id() == "near_oom_0f3a9c1e_3_1");
    daemon::AlertContent heal;
    heal.event_id = 3;
    heal.scope = oom.scope;
    heal.heal = "healed";
    CHECK(heal.webhook_id() == "heal_0f3a9c1e_3");
    // The same row id in a store made anew (another id) is another key.
    heal.scope = "9b7e21d0-aaaa-4bbb-8ccc-123456789abc";
    CHECK(heal.webhook_id() == "heal_9b7e21d0_3");
  }

  TEST_CASE("an emptied store is a recovery: the crash while down is alerted, no id repeats") {
    Rig rig;
    INFO(rig.seen());
    {
      DaemonProcess daemon(rig.state, rig.args, rig.err());
      rig.crash_job("before");
      REQUIRE(wait_until([&] { return rig.alerts_of("before") == 1 && rig.drained(); }, 15s));
      REQUIRE(daemon.stop(SIGTERM) == 0);
    }
    // Cut to 0 bytes (a bad restore, a full disk at the wrong moment): a valid empty database.
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(rig.store.string() + suffix);
    fs::resize_file(rig.store, 0);
    rig.crash_job("down");  // while the daemon is down
    const fs::path err = rig.err();
    DaemonProcess daemon(rig.state, rig.args, err);
    REQUIRE(wait_until(
        [&] {
          return rig.alerts_of("down") == 1 && rig.alerts_of("before") == 2 &&
                 rig.recoveries_alerted() == 1 && rig.drained();
        },
        20s));
    rig.crash_job("after");
    REQUIRE(wait_until([&] { return rig.alerts_of("after") == 1 && rig.drained(); }, 15s));
    // `before` again only with the mark; `down` (found in a log read from its start) with it
    // too; `after`, written while the daemon ran, plainly.
    check_ids(rig, {{"before", 1}, {"down", 0}, {"after", 1}});
    CHECK(rig.kept_aside("replaced"));
    check_said_once(rig, slurp(err), "after");
    CHECK(daemon.stop(SIGTERM) == 0);
  }

  TEST_CASE("a backup put back: the crash it lost is alerted again, marked - no id repeats") {
    run_rollback_case(false);
  }

  TEST_CASE("the last commits lost (kill -9, the store a commit behind): the same") {
    run_rollback_case(true);
  }

  TEST_CASE("a recovery that met a full disk salvages its damaged copy at the next start") {
    Rig rig;
    {
      DaemonProcess daemon(rig.state, rig.args, rig.err());
      rig.crash_job("before");
      REQUIRE(wait_until([&] { return rig.alerts_of("before") == 1 && rig.drained(); }, 15s));
      REQUIRE(daemon.stop(SIGTERM) == 0);
    }
    const std::vector<int64_t> outbox = pages_of(rig.store, "outbox");
    if (outbox.empty()) {
      MESSAGE("skipped: this SQLite has no dbstat table to find the outbox's pages");
      return;
    }
    garble_pages(rig.store, outbox);
    rig.crash_job("down");
    // The first start after the damage moves the store aside, then cannot write the fresh one:
    // files may grow to 40 KiB (SIGXFSZ ignored, so a write past it fails as on a full disk;
    // the WAL index alone takes 32 KiB).
    int rc = 0;
    std::string said;
    std::tie(rc, said) =
        run_shell("bash -c \"trap '' XFSZ; ulimit -f 40; exec '" + std::string(OOMTRIAGE_BINARY) +
                  "' --state-dir '" + rig.state.string() + "' daemon --config '" +
                  rig.config.string() + "'\" 2>&1");
    INFO(said);
    REQUIRE(rc == 2);
    REQUIRE(rig.kept_aside("damaged"));
    const fs::path err = rig.err();
    DaemonProcess daemon(rig.state, rig.args, err);
    REQUIRE(wait_until(
        [&] {
          return rig.alerts_of("down") == 1 && rig.recoveries_alerted() == 1 && rig.drained();
        },
        20s));
    // The history is back: the old crash is in the store, and its log was read on from its
    // stored offset (not alerted again).
    const auto [report_rc, report] =
        run_shell(std::string(OOMTRIAGE_BINARY) + " --state-dir '" + rig.state.string() +
                  "' report before --json 2>/dev/null");
    CHECK(report_rc == 0);
    CHECK(json::parse(report)["events"].size() == 1);
    CHECK(rig.alerts_of("before") == 1);
    check_ids(rig, {{"before", 1}, {"down", 0}});
    const std::string journal = slurp(err);
    CHECK(journal.find("was not yet salvaged") != std::string::npos);
    check_said_once(rig, journal, "down");
    CHECK(daemon.stop(SIGTERM) == 0);
  }

  TEST_CASE("serve shows a crash stored after the store was removed and made anew") {
    Rig rig;
    std::optional<ServeProcess> serve;
    {
      DaemonProcess daemon(rig.state, rig.args, rig.err());
      serve.emplace(std::vector<std::string>{"--state-dir", rig.state.string(), "serve", "--listen",
                                             "127.0.0.1:0"},
                    rig.dir.path / "serve.err");
      REQUIRE(serve->port() != 0);
      rig.crash_job("first");
      REQUIRE(wait_until([&] { return rig.alerts_of("first") == 1; }, 15s));
      REQUIRE(wait_until(
          [&] { return get(serve->url("/")).body.find("first") != std::string::npos; }, 15s));
      REQUIRE(daemon.stop(SIGTERM) == 0);
    }
    // `rm oomtriage.db*`: a first start again, with a store at a new inode.
    rig.remove_store_files();
    fs::remove(rig.store.string() + ".identity");
    DaemonProcess daemon(rig.state, rig.args, rig.err());
    rig.crash_job("second");
    REQUIRE(wait_until([&] { return rig.alerts_of("second") == 1; }, 15s));
    CHECK(wait_until([&] { return get(serve->url("/")).body.find("second") != std::string::npos; },
                     15s));
    CHECK(get(serve->url("/job/second")).status == 200);
    CHECK(daemon.stop(SIGTERM) == 0);
  }
}
