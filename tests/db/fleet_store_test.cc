// tests/db/fleet_store_test.cc: the node side of the fleet store (the outbox the triggers fill,
// what turning it on queues, a row changed while a batch is in flight) on a real SQLite file,
// and the fleet store itself on a throwaway PostgreSQL cluster: migrated once by daemons that
// start together, a batch shipped twice stored once, an older picture of a run never
// overwriting a newer one, bytes PostgreSQL's text refuses, and a job's story read back the same
// as from the node's own store.
#include "db/fleet_store.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <thread>

#include "db/store.h"
#include "tests/support/postgres.h"
#include "tests/support/skip.h"

namespace fs = std::filesystem;
using namespace oomtriage;
using oomtriage::testing::PostgresCluster;

namespace {

struct Node {
  fs::path dir;
  std::unique_ptr<db::Store> store;
  Node() {
    char tmpl[] = "/tmp/oomtriage-fleet-XXXXXX";
    dir = ::mkdtemp(tmpl);
    auto opened = db::Store::open((dir / "oomtriage.db").string());
    REQUIRE(opened);
    store = std::move(*opened);
  }
  ~Node() {
    store.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // A job with a config, a run and a file, and `events` OOMs read from it; returns the run.
  int64_t crash(
      const std::string& job_name, int events, int64_t now,
      const std::string& config = "config:\n  process:\n    - train:\n        batch_size: 4\n") {
    const int64_t job =
        *store->upsert_job(job_name, "/out/" + job_name, "ai-toolkit", "/out/" + job_name, now);
    const int64_t snapshot =
        *store->add_config_snapshot(job, "/out/" + job_name + "/config.yaml",
                                    "sha-" + std::to_string(config.size()), config, now);
    const int64_t run = *store->start_run(job, "/out/" + job_name + "/log.txt", snapshot, now);
    db::FileRow file;
    file.path = "/out/" + job_name + "/log.txt";
    file.dev = 1;
    file.ino = static_cast<uint64_t>(1000 + job);
    file.job_id = job;
    file.run_id = run;
    const int64_t file_id = *store->insert_file(file, now);
    db::Progress progress;
    progress.file_id = file_id;
    progress.job_id = job;
    progress.run_id = run;
    progress.snapshot_id = snapshot;
    progress.offset = 10000;
    progress.outcome = "crashed_oom";
    for (int i = 0; i < events; ++i) {
      db::EventRow e;
      e.offset = static_cast<uint64_t>(1000 * (i + 1));
      e.kind = "cuda";
      e.phase = "training_step";
      e.step = 100 * (i + 1);
      e.model_family = "flux";
      e.event_json = R"({"kind":"cuda","phase":"training_step","step":)" +
                     std::to_string(100 * (i + 1)) +
                     R"(,"recovered":false,"line":7,"message":"CUDA out of memory."})";
      e.fixes_json = R"([{"id":"lower_batch_size","rank":1}])";
      progress.events.push_back(e);
    }
    REQUIRE(*store->commit_progress(progress, now + 1) == events);
    return run;
  }
};

size_t rows(const db::FleetBatch& b) {
  return b.jobs.size() + b.snapshots.size() + b.runs.size() + b.events.size() + b.attempts.size();
}

}  // namespace

TEST_SUITE("db::fleet") {
  TEST_CASE("a store URL is refused when it carries a password or libpq cannot read it") {
    CHECK(db::check_fleet_url("postgresql://oomtriage@db.example/oom"));
    CHECK(db::check_fleet_url("postgres://db.example:5433/oom?passfile=/etc/oomtriage/pgpass"));
    const auto inline_password = db::check_fleet_url("postgresql://oomtriage:hunter2@db/oom");
    REQUIRE_FALSE(inline_password);
    CHECK(inline_password.error().message.find("password") != std::string::npos);
    CHECK(inline_password.error().message.find("hunter2") == std::string::npos);
    CHECK_FALSE(db::check_fleet_url("postgresql://db/oom?password=hunter2"));
    CHECK_FALSE(db::check_fleet_url("postgresql://db/oom?no_such_option=1"));
    CHECK_FALSE(db::check_fleet_url("/var/lib/oomtriage/oomtriage.db"));
    CHECK(db::is_fleet_url("postgres://x"));
    CHECK_FALSE(db::is_fleet_url("state/oomtriage.db"));
  }

  TEST_CASE("the outbox queues nothing until it is on, then what the store holds, parents first") {
    Node node;
    node.crash("before", 2, 100);
    CHECK(*node.store->fleet_backlog() == 0);  // a node without a fleet store queues nothing
    REQUIRE(node.store->set_fleet_outbox("postgresql://fleet/a"));
    // job, snapshot, run and two events already stored: queued once, when it was turned on.
    CHECK(*node.store->fleet_backlog() == 5);
    // On again for the same fleet store (a restart): nothing queued twice.
    REQUIRE(node.store->set_fleet_outbox("postgresql://fleet/a"));
    CHECK(*node.store->fleet_backlog() == 5);
    // Shipped, then pointed at another fleet store: that one has seen nothing, so all again.
    REQUIRE(node.store->fleet_shipped(node.store->fleet_batch(100)->last_seq));
    CHECK(*node.store->fleet_backlog() == 0);
    REQUIRE(node.store->set_fleet_outbox("postgresql://other/fleet"));
    CHECK(*node.store->fleet_backlog() == 5);
    node.crash("after", 1, 200);
    auto batch = *node.store->fleet_batch(100);
    CHECK(rows(batch) == 9);
    REQUIRE(batch.jobs.size() == 2);
    CHECK(batch.jobs[0].name == "before");
    REQUIRE(batch.events.size() == 3);
    CHECK(batch.events[0].uuid.size() == 36);
    CHECK(batch.events[0].uuid[14] == '4');  // version 4
    CHECK(batch.events[0].uuid != batch.events[1].uuid);
    CHECK(batch.events[2].typed.step == 100);
    CHECK(batch.events[2].typed.model_family == "flux");
    CHECK(batch.runs[0].second.outcome == "crashed_oom");

    // A batch limited to two entries still carries whole rows, and the rest waits.
    auto first_two = *node.store->fleet_batch(2);
    CHECK(rows(first_two) == 2);
    REQUIRE(node.store->fleet_shipped(first_two.last_seq));
    CHECK(*node.store->fleet_backlog() == 7);

    REQUIRE(node.store->set_fleet_outbox(""));
    CHECK(*node.store->fleet_backlog() == 0);
    node.crash("off", 1, 300);
    CHECK(*node.store->fleet_backlog() == 0);
  }

  TEST_CASE("a row changed after its batch was read is shipped again, not forgotten") {
    Node node;
    REQUIRE(node.store->set_fleet_outbox("postgresql://fleet/a"));
    const int64_t run = node.crash("j", 1, 100);
    auto batch = *node.store->fleet_batch(100);
    REQUIRE(batch.runs.size() == 1);
    // The daemon goes on while the batch is on its way: the run's outcome changes.
    db::Progress progress;
    progress.file_id = 1;
    progress.job_id = 1;
    progress.run_id = run;
    progress.offset = 20000;
    progress.outcome = "completed";
    REQUIRE(node.store->commit_progress(progress, 500));
    REQUIRE(node.store->fleet_shipped(batch.last_seq));
    auto next = *node.store->fleet_batch(100);
    REQUIRE(next.runs.size() == 1);
    CHECK(next.runs[0].second.outcome == "completed");
    CHECK(next.runs[0].second.updated_at == 500);
  }

  TEST_CASE(
      "a fleet store from before events had a top_fix column gets it filled by the fix decoder") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());
    {
      auto fleet = db::FleetStore::open(pg.url());
      REQUIRE(fleet);
      Node node;
      REQUIRE(node.store->set_fleet_outbox("postgresql://fleet/a"));
      node.crash("old", 2, 100);
      REQUIRE((*fleet)->ship(*node.store->fleet_batch(100), *node.store->store_id(), "node-a"));
    }
    // The store as schema 4 left it: no column, its events shipped before it.
    pg.query("ALTER TABLE oomtriage.events DROP COLUMN top_fix");
    pg.query("UPDATE oomtriage.meta SET value = '4' WHERE key = 'schema_version'");
    REQUIRE(pg.query("SELECT count(*) FROM oomtriage.events") == "2\n");
    auto fleet = db::FleetStore::open(pg.url());
    REQUIRE(fleet);
    CHECK(*(*fleet)->schema_version() == 5);
    CHECK(pg.query("SELECT count(*) FROM oomtriage.events WHERE top_fix = 'lower_batch_size'") ==
          "2\n");
  }

  TEST_CASE(
      "the fleet store: migrated once, a batch shipped twice stored once, the story read "
      "back as the node tells it") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());

    // Three daemons starting at once migrate it once.
    std::vector<std::thread> openers;
    std::atomic<int> opened{0};
    for (int i = 0; i < 3; ++i) {
      openers.emplace_back([&] {
        if (db::FleetStore::open(pg.url())) ++opened;
      });
    }
    for (auto& t : openers) t.join();
    CHECK(opened == 3);
    auto fleet = db::FleetStore::open(pg.url());
    REQUIRE(fleet);
    CHECK(*(*fleet)->schema_version() == 5);

    Node a;
    Node b;
    REQUIRE(a.store->set_fleet_outbox("postgresql://fleet/a"));
    REQUIRE(b.store->set_fleet_outbox("postgresql://fleet/a"));
    // Config bytes PostgreSQL's text refuses (a NUL, a lone Latin-1 byte) must not stop shipping.
    const int64_t a_run = a.crash(
        "flux_lora", 2, 1000, std::string("config:\n  name: caf\xe9\n  x: \"a") + '\0' + "b\"\n");
    // Its GPU memory, written twice as the daemon does while it samples: the last one ships.
    db::GpuMemoryRow gpu{a_run,        1, 24ull << 30, 20ull << 30,
                         "train_step", 7, 1ull << 30,  R"({"gpu":1,"points":[]})",
                         1000};
    {
      auto r = a.store->record_gpu_memory(gpu);
      INFO((r ? std::string() : r.error().message));
      REQUIRE(r);
    }
    gpu.peak_bytes = 23ull << 30;
    gpu.peak_phase = "sampling";
    {
      auto r = a.store->record_gpu_memory(gpu);
      INFO((r ? std::string() : r.error().message));
      REQUIRE(r);
    }
    b.crash("flux_lora", 1, 2000);  // the same name on another node
    b.crash("sdxl", 1, 2100);
    const auto batch_a = *a.store->fleet_batch(500);
    const auto batch_b = *b.store->fleet_batch(500);
    REQUIRE((*fleet)->ship(batch_a, *a.store->store_id(), "node-a"));
    REQUIRE((*fleet)->ship(batch_b, *b.store->store_id(), "node-b"));
    // Acknowledged late (a timeout, a crash before fleet_shipped): shipped again.
    REQUIRE((*fleet)->ship(batch_a, *a.store->store_id(), "node-a"));
    CHECK(pg.query("SELECT count(*) FROM oomtriage.events") == "4\n");
    CHECK(pg.query("SELECT count(*) FROM oomtriage.jobs") == "3\n");
    CHECK(pg.query("SELECT config->'config'->>'name' FROM oomtriage.config_snapshots WHERE host "
                   "= 'node-a'") == "caf\xef\xbf\xbd\n");

    auto jobs = (*fleet)->list_jobs();
    REQUIRE(jobs);
    REQUIRE(jobs->size() == 3);
    CHECK((*jobs)[0].name == "sdxl");  // newest first
    CHECK((*jobs)[0].host == "node-b");
    // Each event's top fix ships as a column, and the job list reads it from there.
    CHECK(pg.query("SELECT DISTINCT top_fix FROM oomtriage.events") == "lower_batch_size\n");
    CHECK((*jobs)[0].top_fix == "lower_batch_size");
    (*fleet)->set_host_filter("node-a");
    REQUIRE((*fleet)->list_jobs()->size() == 1);

    // The story from the fleet store is the node's own, row for row.
    const auto own = **a.store->job_story("flux_lora");
    const auto shipped = (*fleet)->job_story("flux_lora");
    REQUIRE(shipped);
    REQUIRE(*shipped);
    const db::JobStory& s = **shipped;
    CHECK(s.job.host == "node-a");
    CHECK(s.job.outcome == own.job.outcome);
    CHECK(s.job.runs == own.job.runs);
    CHECK(s.job.events == own.job.events);
    CHECK(s.job.last_seen == own.job.last_seen);
    REQUIRE(s.runs.size() == own.runs.size());
    CHECK(s.runs[0].log_path == own.runs[0].log_path);
    CHECK(s.runs[0].started_at == own.runs[0].started_at);
    CHECK(s.runs[0].updated_at == own.runs[0].updated_at);
    CHECK(s.runs[0].snapshot_id == own.runs[0].snapshot_id);
    REQUIRE(s.events.size() == 2);
    for (size_t i = 0; i < s.events.size(); ++i) {
      CHECK(s.events[i].id == own.events[i].id);
      CHECK(s.events[i].event_json == own.events[i].event_json);
      CHECK(s.events[i].fixes_json == own.events[i].fixes_json);
      CHECK(s.events[i].created_at == own.events[i].created_at);
      CHECK(s.events[i].run_id == own.events[i].run_id);
    }
    REQUIRE(s.snapshots.size() == 1);
    CHECK(s.snapshots[0].content.find("caf\xef\xbf\xbd") != std::string::npos);
    REQUIRE(own.gpu_memory.size() == 1);
    REQUIRE(s.gpu_memory.size() == 1);
    CHECK(s.gpu_memory[0].peak_bytes == 23ull << 30);
    CHECK(s.gpu_memory[0].peak_phase == "sampling");
    CHECK(s.gpu_memory[0].gpu == own.gpu_memory[0].gpu);
    CHECK(s.gpu_memory[0].peak_step == own.gpu_memory[0].peak_step);
    CHECK(s.gpu_memory[0].others_peak_bytes == own.gpu_memory[0].others_peak_bytes);
    CHECK(s.gpu_memory[0].timeline_json == own.gpu_memory[0].timeline_json);
    CHECK(s.gpu_memory[0].updated_at == own.gpu_memory[0].updated_at);
    CHECK(s.job.gpu_peak_bytes == own.job.gpu_peak_bytes);
    CHECK(s.job.gpu_total_bytes == 24ull << 30);

    // The name is on two nodes: without a host it is refused with both names.
    (*fleet)->set_host_filter("");
    const auto ambiguous = (*fleet)->job_story("flux_lora");
    REQUIRE_FALSE(ambiguous);
    CHECK(ambiguous.error().message.find("node-a, node-b") != std::string::npos);
    CHECK_FALSE(*(*fleet)->job_story("no_such_job"));

    // An older picture of a run, shipped after a newer one, changes nothing.
    db::FleetBatch stale;
    stale.last_seq = 1;
    auto old_run = batch_a.runs[0];
    old_run.second.outcome = "running";
    old_run.second.updated_at = 10;
    stale.runs.push_back(old_run);
    REQUIRE((*fleet)->ship(stale, *a.store->store_id(), "node-a"));
    CHECK(pg.query("SELECT outcome FROM oomtriage.runs WHERE host = 'node-a'") == "crashed_oom\n");

    // An event amended on the node (its traceback arrived after it was stored) is queued again
    // and replaces the fleet's row: the fleet shows the final verdict.
    REQUIRE(a.store->fleet_shipped(batch_a.last_seq));
    REQUIRE(a.store->fleet_batch(500)->events.empty());
    db::Progress amend;
    amend.file_id = 1;
    amend.job_id = own.job.id;
    amend.run_id = own.runs[0].id;
    amend.offset = 10000;
    db::EventRow amended;
    amended.offset = 1000;
    amended.kind = "cuda";
    amended.phase = "sampling";
    amended.step = 100;
    amended.revision = 1;
    amended.event_json = R"({"kind":"cuda","phase":"sampling","step":100,"revision":1})";
    amended.fixes_json = R"([{"id":"cheapen_previews","rank":1}])";
    amend.events = {amended};
    REQUIRE(a.store->commit_progress(amend, 3000));
    const auto again = *a.store->fleet_batch(500);
    REQUIRE(again.events.size() == 1);
    REQUIRE((*fleet)->ship(again, *a.store->store_id(), "node-a"));
    CHECK(pg.query("SELECT count(*) FROM oomtriage.events") == "4\n");
    CHECK(pg.query("SELECT phase || ' ' || fixes_json FROM oomtriage.events WHERE host = "
                   "'node-a' AND log_offset = 1000") == "sampling " + amended.fixes_json + "\n");
  }

  TEST_CASE("an unreachable fleet store is an error that says so, soon") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());
    REQUIRE(pg.stop());
    const auto started = std::chrono::steady_clock::now();
    auto fleet = db::FleetStore::open(pg.url(), 2);
    REQUIRE_FALSE(fleet);
    CHECK(fleet.error().message.find("fleet store unreachable") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
    REQUIRE(pg.start());
    // Without the password file there is no password: refused by the server, not guessed.
    auto no_password = db::FleetStore::open(pg.url_without_passfile(), 2);
    REQUIRE_FALSE(no_password);
    CHECK(db::FleetStore::open(pg.url(), 2));
  }
}

TEST_SUITE("db::fleet") {
  TEST_CASE("retention removes the jobs not seen since a time with all their rows, in batches") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());
    auto fleet = db::FleetStore::open(pg.url());
    REQUIRE(fleet);
    Node node;
    REQUIRE(node.store->set_fleet_outbox(pg.url()));
    // Five old jobs (seen at 1000) and one recent (seen at 900000), three OOMs each.
    for (int i = 0; i < 5; ++i) node.crash("old_" + std::to_string(i), 3, 1000);
    node.crash("recent", 3, 900000);
    const std::string id = *node.store->store_id();
    for (auto batch = *node.store->fleet_batch(500); !batch.empty();
         batch = *node.store->fleet_batch(500)) {
      REQUIRE((*fleet)->ship(batch, id, "gpu-1"));
      REQUIRE(node.store->fleet_shipped(batch.last_seq));
    }
    const auto counts = [&] {
      return pg.query(
          "SELECT (SELECT count(*) FROM oomtriage.jobs) || ' ' || (SELECT count(*) FROM "
          "oomtriage.runs) || ' ' || (SELECT count(*) FROM oomtriage.events) || ' ' || (SELECT "
          "count(*) FROM oomtriage.config_snapshots)");
    };
    CHECK(counts() == "6 6 18 6\n");
    // Two jobs a transaction, one transaction a pass: the rest at the next pass.
    auto first = (*fleet)->prune(500000, 2, 1);
    REQUIRE(first);
    CHECK(*first == 2);
    CHECK(counts() == "4 4 12 4\n");
    // Then the other three, two batches; nothing of the recent job goes.
    auto removed = (*fleet)->prune(500000, 2);
    REQUIRE(removed);
    CHECK(*removed == 3);
    CHECK(counts() == "1 1 3 1\n");
    CHECK((*fleet)->list_jobs()->front().name == "recent");
    CHECK(*(*fleet)->prune(500000, 2) == 0);
  }
}
