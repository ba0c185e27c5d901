// tests/db/store_identity_test.cc
//
// The identity the state dir keeps beside the store (db/store_identity.h), and what a start does
// with a store that is not the one it describes (db/store_recovery.h recover_if_behind): an
// empty store, one behind what was committed, another store, a damaged copy a recovery could not
// finish salvaging; each gets a new store id, and a store that already took the old one's place
// is left alone.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "db/store.h"
#include "db/store_identity.h"
#include "db/store_recovery.h"
#include "tests/support/e2e.h"
#include "tests/support/store_rows.h"

namespace fs = std::filesystem;
using namespace oomtriage;

namespace {

// A store with `jobs` jobs of one event each; its position.
db::StorePosition make_store(const fs::path& path, int jobs) {
  auto store = db::Store::open(path.string());
  REQUIRE(store);
  for (int j = 0; j < jobs; ++j) {
    db::Progress progress = testing::progress_for_new_job(**store, "job" + std::to_string(j),
                                                          static_cast<uint64_t>(500 + j), 100);
    progress.offset = 4000;
    db::EventRow row;
    row.offset = 100;
    row.kind = "cuda";
    row.phase = "train_step";
    row.event_json = "{}";
    row.fixes_json = "[]";
    progress.events = {row};
    REQUIRE(*(*store)->commit_progress(progress, 100) == 1);
  }
  REQUIRE((*store)->set_meta("fleet_outbox", "postgresql://fleet"));
  auto position = (*store)->position();
  REQUIRE(position);
  return *position;
}

std::string meta_of(const fs::path& path, const std::string& key) {
  auto store = db::Store::open(path.string());
  REQUIRE(store);
  auto value = (*store)->meta(key);
  REQUIRE(value);
  return value->value_or("");
}

}  // namespace

TEST_SUITE("db::store_identity") {
  TEST_CASE("the identity file: written durably, read back, a garbled one named with its line") {
    testing::TempDir dir;
    const std::string store = (dir.path / "oomtriage.db").string();
    auto none = db::read_identity(store);
    REQUIRE(none);
    CHECK_FALSE(*none);
    const db::StorePosition position{"0f3a9c1e-aaaa-4bbb-8ccc-123456789abc", 41, 7};
    REQUIRE(db::write_identity(store, position));
    CHECK_FALSE(fs::exists(db::identity_path(store) + ".new"));
    auto read = db::read_identity(store);
    REQUIRE(read);
    REQUIRE(*read);
    CHECK(**read == position);
    std::ofstream(db::identity_path(store)) << "store_id=x\nevents=12z\n";
    auto garbled = db::read_identity(store);
    REQUIRE_FALSE(garbled);
    CHECK(garbled.error().message.find("oomtriage.db.identity:2:") != std::string::npos);
  }

  TEST_CASE("behind: empty, another store, fewer events or files - the same or ahead is not") {
    const db::StorePosition kept{"aaaaaaaa-1", 10, 3};
    CHECK(db::behind_reason(std::nullopt, {"b", 0, 0}).empty());
    CHECK(db::behind_reason(db::StorePosition{"aaaaaaaa-1", 0, 0}, {"b", 0, 0}).empty());
    CHECK(db::behind_reason(kept, {"aaaaaaaa-1", 10, 3}).empty());
    CHECK(db::behind_reason(kept, {"aaaaaaaa-1", 12, 5}).empty());  // `run` wrote since
    CHECK(db::behind_reason(kept, {"", 0, 0}).find("empty") != std::string::npos);
    CHECK(db::behind_reason(kept, {"bbbbbbbb-2", 0, 0}).find("empty") != std::string::npos);
    CHECK(db::behind_reason(kept, {"bbbbbbbb-2", 40, 9}).find("another store") !=
          std::string::npos);
    CHECK(db::behind_reason(kept, {"aaaaaaaa-1", 8, 3}).find("up to event 8") != std::string::npos);
    CHECK_FALSE(db::behind_reason(kept, {"aaaaaaaa-1", 10, 2}).empty());
  }

  TEST_CASE("a store behind its identity is kept in place with a new id and says so") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    const db::StorePosition now = make_store(path, 2);
    db::StorePosition kept = now;
    kept.events += 3;  // committed, then lost
    auto recovered = db::recover_if_behind(path.string(), kept, false, 1000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    CHECK((*recovered)->in_place);
    CHECK((*recovered)->behind);
    auto after = db::position_of(path.string());
    REQUIRE(after);
    CHECK(after->store_id != now.store_id);  // no id it hands out can be the lost rows'
    CHECK(after->events == now.events);
    CHECK(meta_of(path, "store_recovered_kind") == "behind");
    CHECK(meta_of(path, "fleet_outbox").empty());  // the fleet store gets it all again
    CHECK(meta_of(path, "store_succeeds") == now.store_id);
    // Its identity not yet rewritten (the daemon stopped first): not recovered twice.
    auto again = db::recover_if_behind(path.string(), kept, false, 1001);
    REQUIRE(again);
    CHECK_FALSE(*again);
    // The same position is no recovery at all.
    auto same = db::recover_if_behind(path.string(), *after, false, 1002);
    REQUIRE(same);
    CHECK_FALSE(*same);
  }

  TEST_CASE("an empty store is moved aside: a fresh one that reads every log from its start") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    const db::StorePosition kept = make_store(path, 1);
    fs::resize_file(path, 0);
    fs::remove(path.string() + "-wal");
    auto recovered = db::recover_if_behind(path.string(), kept, false, 1000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    CHECK_FALSE((*recovered)->in_place);
    CHECK((*recovered)->damaged_path.find(".replaced-") != std::string::npos);
    CHECK(fs::file_size((*recovered)->damaged_path) == 0);
    CHECK(meta_of(path, "first_scan_done") != "");
    CHECK(meta_of(path, "store_recovered_kind") == "behind");
    CHECK(meta_of(path, "store_id") != kept.store_id);
  }

  TEST_CASE("a damaged copy no store salvaged is salvaged at the next start, once") {
    testing::TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    const db::StorePosition kept = make_store(path, 3);
    // What a recovery that met a full disk leaves: the store moved aside, a half-made one.
    const fs::path copy = dir.path / "oomtriage.db.damaged-20261206T010000Z";
    fs::rename(path, copy);
    if (fs::exists(path.string() + "-wal"))
      fs::rename(path.string() + "-wal", copy.string() + "-wal");
    { REQUIRE(db::Store::open(path.string())); }
    auto recovered = db::recover_if_behind(path.string(), kept, true, 1000);
    REQUIRE(recovered);
    REQUIRE(*recovered);
    CHECK((*recovered)->damaged_path == copy.string());
    CHECK((*recovered)->reason.find("was not yet salvaged") != std::string::npos);
    CHECK((*recovered)->rows("events") == 3);
    auto after = db::position_of(path.string());
    REQUIRE(after);
    CHECK(after->events == 3);
    CHECK(after->store_id != kept.store_id);
    CHECK(fs::exists(copy));  // never deleted
    auto again = db::recover_if_behind(path.string(), kept, false, 1001);
    REQUIRE(again);
    CHECK_FALSE(*again);
  }
}
