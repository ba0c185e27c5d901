// tests/daemon/fleet_e2e_test.cc
//
// Three nodes and one fleet store, all real: a throwaway PostgreSQL cluster on loopback and three
// `oomtriage daemon` processes, each with its own SQLite store, host name and training folder —
// an AI Toolkit folder, a /var/log/pods tree written by a CRI writer, and a Slurm job found by a
// fake squeue. Every OOM reaches the fleet store once; `jobs` and `report` from a fourth process
// read it as each node's own store tells it; the database stopped for a while and started again
// loses and doubles nothing, and each daemon says so once.
#include <doctest/doctest.h>

#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemon/common/daemon_config.h"
#include "tests/support/cri_writer.h"
#include "tests/support/e2e.h"
#include "tests/support/postgres.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// The fleet store's jobs, by "host job" -> events, as `oomtriage jobs --store URL --json` says.
std::map<std::string, int> fleet_jobs(const std::string& url) {
  const auto [rc, out] = oomtriage_says("jobs --json --store '" + url + "'");
  std::map<std::string, int> jobs;
  if (rc != 0) return jobs;
  const auto json = nlohmann::json::parse(out, nullptr, false);
  if (!json.is_object()) return jobs;
  for (const auto& job : json["jobs"]) {
    jobs[job["host"].get<std::string>() + " " + job["name"].get<std::string>()] =
        job["events"].get<int>();
  }
  return jobs;
}

std::string squeue_line(const std::string& job, const fs::path& out) {
  return fmt::format("{:<40}{:<40}{:<40}{:<4096}\n", job, job, "N/A", out.string());
}

// One node: its folder, config (its host, its watch rule, the fleet store), store and daemon.
struct Node {
  Node(const TempDir& dir, const std::string& host, const std::string& watch,
       const std::string& url)
      : root(dir.path / host), view{root / "state" / "oomtriage.db"} {
    fs::create_directories(root);
    config = root / "oomtriage.yaml";
    std::ofstream(config) << "host: " << host << "\nstore: \"" << url << "\"\nwatch:\n" << watch;
  }
  void start() {
    daemon = std::make_unique<DaemonProcess>(
        root / "state", std::vector<std::string>{"daemon", "--config", config.string()},
        root / "err");
  }
  fs::path root;
  fs::path config;
  StoreView view;
  std::unique_ptr<DaemonProcess> daemon;
};

}  // namespace

TEST_SUITE("daemon::fleet") {
  TEST_CASE("a fleet store with a password in its URL is refused at start with the line") {
    const auto config = daemon::parse_daemon_config(
        "watch:\n  - logs: /srv/train/*/log.txt\nstore: postgresql://oom:hunter2@db/oom\n",
        "/etc/oomtriage/oomtriage.yaml");
    REQUIRE_FALSE(config);
    CHECK(config.error().message.starts_with("/etc/oomtriage/oomtriage.yaml:3"));
    CHECK(config.error().message.find("password file") != std::string::npos);
    CHECK(config.error().message.find("hunter2") == std::string::npos);
    const auto good = daemon::parse_daemon_config(
        "watch:\n  - logs: /srv/train/*/log.txt\nstore: postgresql://oom@db/oom\n", "x.yaml");
    REQUIRE(good);
    CHECK(good->store == "postgresql://oom@db/oom");
  }

  TEST_CASE(
      "three nodes ship into one PostgreSQL: every OOM once, through an outage of the "
      "database") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());
    TempDir dir;
    const std::string golden = slurp(kGolden / "aitk_sampling_oom_step500.log");

    // node-a: AI Toolkit's folders.
    const fs::path train = dir.path / "node-a" / "train";
    fs::create_directories(train / "flux_a");
    Node a(dir, "node-a", "  - logs: " + (train / "*" / "log.txt").string() + "\n", pg.url());
    // node-b: kubelet's tree; the job is the pod's namespace and owner.
    const fs::path container = dir.path / "node-b" / "pods" / "ml_lora-b-7xk2p_uid" / "trainer";
    fs::create_directories(container);
    Node b(dir, "node-b",
           "  - source: kubernetes\n    logs: " +
               (dir.path / "node-b" / "pods" / "*" / "*" / "*.log").string() + "\n",
           pg.url());
    // node-c: Slurm; squeue is a script that prints the queue file in squeue's format.
    const fs::path bin = dir.path / "bin";
    const fs::path queue = dir.path / "queue.txt";
    const fs::path runs = dir.path / "node-c" / "runs";
    fs::create_directories(bin);
    fs::create_directories(runs);
    std::ofstream(bin / "squeue") << "#!/bin/sh\ncat \"$OOMTRIAGE_TEST_QUEUE\"\n";
    fs::permissions(bin / "squeue", fs::perms::owner_all);
    std::ofstream(queue) << squeue_line("4242", runs / "slurm-4242.out");
    std::ofstream(runs / "slurm-4242.out") << "";
    Node c(dir, "node-c", "  - source: slurm\n    poll_seconds: 1\n", pg.url());
    ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
    ScopedEnv queue_file("OOMTRIAGE_TEST_QUEUE", queue.string());

    for (Node* node : {&a, &b, &c}) node->start();
    REQUIRE(wait_until([&] { return c.view.story("slurm-4242").has_value(); }));
    std::ofstream(train / "flux_a" / "log.txt") << "";
    REQUIRE(wait_until([&] { return a.view.story("flux_a").has_value(); }));

    // Each node's trainer crashes once.
    write_slowly(train / "flux_a" / "log.txt", golden);
    CriWriter pod(300);
    pod.write(true, golden);
    pod.close();
    write_slowly(container / "0.log", pod.log(), 4096);
    write_slowly(runs / "slurm-4242.out", golden);

    // A fourth process, on no node's store, sees the three once each.
    const std::map<std::string, int> first = {
        {"node-a flux_a", 1}, {"node-b ml/lora-b", 1}, {"node-c slurm-4242", 1}};
    REQUIRE(wait_until([&] { return fleet_jobs(pg.url()) == first; }, 30s));
    CHECK(fleet_jobs(pg.url()) == first);

    // `report` from the fleet store says what the node's own store says, host added (once the
    // node has shipped its last change to the run).
    nlohmann::json fleet_json;
    nlohmann::json own_json;
    const auto same_report = [&] {
      const auto [fleet_rc, fleet_report] =
          oomtriage_says("report ml/lora-b --json --host node-b --store '" + pg.url() + "'");
      const auto [own_rc, own_report] =
          oomtriage_says("report ml/lora-b --json --state-dir " + (b.root / "state").string());
      if (fleet_rc != 0 || own_rc != 0) return false;
      fleet_json = nlohmann::json::parse(fleet_report, nullptr, false);
      own_json = nlohmann::json::parse(own_report, nullptr, false);
      if (!fleet_json.is_object() || fleet_json["job"]["host"] != "node-b") return false;
      fleet_json["job"].erase("host");
      // A run's updated_at is shipped when its outcome changes and at most once a minute else.
      for (auto* json : {&fleet_json, &own_json}) {
        for (auto& run : (*json)["runs"]) run.erase("updated_at");
      }
      return fleet_json == own_json;
    };
    CHECK(wait_until(same_report));
    CHECK(fleet_json == own_json);
    CHECK(fleet_json["events"][0]["step"] == 500);
    const auto [text_rc, text] =
        oomtriage_says("--color never jobs --store '" + pg.url() + "' --host node-c");
    CHECK(text_rc == 0);
    CHECK(text.find("HOST") != std::string::npos);
    CHECK(text.find("slurm-4242") != std::string::npos);
    CHECK(text.find("flux_a") == std::string::npos);

    // The database goes away; the nodes go on, each storing its next crash locally.
    REQUIRE(pg.stop());
    fs::create_directories(train / "flux_b");
    std::ofstream(train / "flux_b" / "log.txt") << "";
    REQUIRE(wait_until([&] { return a.view.story("flux_b").has_value(); }, 20s));
    write_slowly(train / "flux_b" / "log.txt", golden);
    CriWriter restarted(300);  // the container restarted: 1.log, the job's next run
    restarted.write(true, golden);
    restarted.close();
    write_slowly(container / "1.log", restarted.log(), 4096);
    std::ofstream(runs / "slurm-4243.out") << "";
    std::ofstream(queue, std::ios::app) << squeue_line("4243", runs / "slurm-4243.out");
    REQUIRE(wait_until([&] { return c.view.story("slurm-4243").has_value(); }, 20s));
    write_slowly(runs / "slurm-4243.out", golden);
    REQUIRE(wait_until([&] { return a.view.events("flux_b") == 1; }, 20s));
    REQUIRE(wait_until([&] { return b.view.events("ml/lora-b") == 2; }, 20s));
    REQUIRE(wait_until([&] { return c.view.events("slurm-4243") == 1; }, 20s));
    for (Node* node : {&a, &b, &c}) {
      REQUIRE(wait_until(
          [&] {
            return node->daemon->stderr_text().find("rows stay in the local store") !=
                   std::string::npos;
          },
          20s));
    }

    REQUIRE(pg.start());
    const std::map<std::string, int> all = {{"node-a flux_a", 1},
                                            {"node-a flux_b", 1},
                                            {"node-b ml/lora-b", 2},
                                            {"node-c slurm-4242", 1},
                                            {"node-c slurm-4243", 1}};
    // The shipper's backoff is at most 30 s.
    REQUIRE(wait_until([&] { return fleet_jobs(pg.url()) == all; }, 60s));
    CHECK(pg.query("SELECT count(*), count(DISTINCT event_id) FROM oomtriage.events") == "6|6\n");
    CHECK(pg.query("SELECT count(*) FROM oomtriage.runs WHERE host = 'node-b'") == "2\n");
    for (Node* node : {&a, &b, &c}) {
      REQUIRE(wait_until([&] {
        return node->daemon->stderr_text().find("fleet store reachable again") != std::string::npos;
      }));
      const std::string err = node->daemon->stderr_text();
      // Said once for the outage, not at every retry.
      CHECK(err.find("rows stay in the local store") == err.rfind("rows stay in the local store"));
      CHECK(node->daemon->stop(SIGTERM) == 0);
    }
  }
}
