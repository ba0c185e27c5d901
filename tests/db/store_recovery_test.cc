// tests/db/store_recovery_test.cc
//
// A damaged store, three ways (pages garbled, the file cut to half, the events table's pages
// garbled), found by quick_check, moved aside untouched and salvaged into a fresh store that
// works: what could be read is kept with its ids, nothing refers to a lost row, and the fresh
// store says it was recovered. A sound store is left alone.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "db/store.h"
#include "db/store_recovery.h"
#include "tests/support/e2e.h"
#include "tests/support/store_damage.h"
#include "tests/support/store_rows.h"

namespace fs = std::filesystem;
using namespace oomtriage;

namespace {

constexpr int kJobs = 40;
constexpr int kEventsPerJob = 25;
constexpr int kPage = testing::kStorePage;

// A store as a daemon leaves it: jobs, runs, files with offsets, events (large enough to fill
// many pages) and their outbox rows; closed, so the WAL is in the file.
void fill_store(const fs::path& path) {
  auto store = db::Store::open(path.string());
  REQUIRE(store);
  for (int j = 0; j < kJobs; ++j) {
    db::Progress progress = testing::progress_for_new_job(**store, "job" + std::to_string(j),
                                                          static_cast<uint64_t>(1000 + j), 100);
    progress.offset = 90000 + static_cast<uint64_t>(j);
    progress.line = 700;
    progress.receivers = {"slack"};
    for (int e = 0; e < kEventsPerJob; ++e) {
      db::EventRow row;
      row.offset = static_cast<uint64_t>(e * 1000);
      row.kind = "cuda";
      row.phase = "train_step";
      row.event_json = R"({"kind":"cuda","message":")" + std::string(600, 'x') + R"("})";
      row.fixes_json = "[]";
      progress.events.push_back(row);
    }
    REQUIRE(*(*store)->commit_progress(progress, 200) == kEventsPerJob);
  }
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The fresh store: sound, every reference whole, still taking commits.
void check_fresh_store_works(const fs::path& path) {
  auto damage = db::find_damage(path.string());
  REQUIRE(damage);
  CHECK(damage->empty());
  auto store = db::Store::open(path.string());
  REQUIRE(store);
  CHECK(*(*store)->meta("store_recovered_at"));
  CHECK(*(*store)->meta("first_scan_done"));
  db::Progress progress = testing::progress_for_new_job(**store, "later", 99999, 300);
  db::EventRow row;
  row.offset = 10;
  row.kind = "cuda";
  row.phase = "sampling";
  row.event_json = "{}";
  row.fixes_json = "[]";
  progress.events = {row};
  progress.receivers = {"slack"};
  auto committed = (*store)->commit_progress(progress, 300);
  REQUIRE(committed);
  CHECK(*committed == 1);
}

}  // namespace

TEST_SUITE("db::store_recovery") {
  TEST_CASE("a sound store is left where it is") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    auto none = db::recover_if_damaged(path.string(), 1000);  // no store yet
    REQUIRE(none);
    CHECK(!*none);
    fill_store(path);
    auto sound = db::recover_if_damaged(path.string(), 1000);
    REQUIRE(sound);
    CHECK(!*sound);
    CHECK(fs::exists(path));
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  }

  TEST_CASE("garbage over pages in the middle: moved aside as it was, the rest salvaged") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    fill_store(path);
    const int64_t pages = static_cast<int64_t>(fs::file_size(path)) / kPage;
    REQUIRE(pages > 20);
    for (int64_t page = pages / 3; page < pages / 3 + 4; ++page)
      testing::garble_pages(path, {page}, 7);
    const std::string damaged_bytes = file_bytes(path);
    auto recovered = db::recover_if_damaged(path.string(), 1733300000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    const db::StoreRecovery& r = **recovered;
    CHECK(!r.reason.empty());
    CHECK(r.damaged_path == path.string() + ".damaged-20241204T081320Z");
    CHECK(file_bytes(r.damaged_path) == damaged_bytes);  // never written to
    CHECK(r.rows("jobs") > 0);
    CHECK(r.rows("events") < kJobs * kEventsPerJob);
    CHECK(r.summary().find("salvaged") == 0);
    check_fresh_store_works(path);
  }

  TEST_CASE("the file cut to half: the first half's rows are kept") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    fill_store(path);
    fs::resize_file(path, fs::file_size(path) / 2);
    auto recovered = db::recover_if_damaged(path.string(), 1000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    CHECK(fs::file_size((*recovered)->damaged_path) > 0);
    check_fresh_store_works(path);
  }

  TEST_CASE("the events table's pages garbled: jobs, files and offsets are kept") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    fill_store(path);
    const std::vector<int64_t> pages = testing::pages_of(path, "events");
    if (pages.empty()) {
      MESSAGE("skipped: this SQLite has no dbstat table to find the events' pages");
      return;
    }
    testing::garble_pages(path, pages);
    auto recovered = db::recover_if_damaged(path.string(), 1000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    const db::StoreRecovery& r = **recovered;
    CHECK(r.rows("jobs") == kJobs);
    CHECK(r.rows("files") == kJobs);
    CHECK(r.rows("events") == 0);
    CHECK(r.rows("outbox") == 0);  // their events were lost: dropped with them
    auto store = db::Store::open(path.string());
    REQUIRE(store);
    auto files = (*store)->active_files();
    REQUIRE(files);
    REQUIRE(files->size() == kJobs);
    CHECK(files->front().offset == 90000);  // read on from where it was, not again
    store->reset();
    check_fresh_store_works(path);
  }

  TEST_CASE("not a database at all: nothing to salvage, a fresh store") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    fill_store(path);
    testing::garble_pages(path, {1}, 3);
    auto recovered = db::recover_if_damaged(path.string(), 1000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    CHECK((*recovered)->rows("jobs") == 0);
    check_fresh_store_works(path);
  }
}
