// db/store_recovery.cc: checking a store, moving a damaged one aside and salvaging it row by row
// (db/store_recovery.h). SQLite's recovery extension is not part of Debian's libsqlite3, so the
// salvage walks each table by rowid and steps over the ranges it cannot read.
#include "db/store_recovery.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include "db/sqlite_statement.h"
#include "db/store.h"
#include "db/store_identity.h"
#include "db/store_internal.h"

namespace oomtriage::db {
namespace {

namespace fs = std::filesystem;

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Connection = std::unique_ptr<sqlite3, Closer>;

struct Finalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Prepared = std::unique_ptr<sqlite3_stmt, Finalizer>;

Result<Connection> connect(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Connection db(raw);
  if (rc != SQLITE_OK) {
    return make_error(ErrorCode::kIo, fmt::format("cannot open store {}: {}", path,
                                                  raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(raw, 2000);
  return db;
}

Prepared prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Prepared();
  }
  return Prepared(stmt);
}

// An SQL identifier as SQLite quotes one: the names come from the fresh store's own schema.
std::string sql_name(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

std::vector<std::string> column_names(sqlite3* db, const std::string& table) {
  std::vector<std::string> names;
  Prepared info = prepare(db, "PRAGMA table_info(" + sql_name(table) + ")");
  if (!info) return names;
  while (sqlite3_step(info.get()) == SQLITE_ROW) {
    names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(info.get(), 1)));
  }
  return names;
}

bool is_damage(int rc) {
  rc &= 0xff;
  return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

std::string utc_stamp(int64_t now_unix) {
  const std::time_t t = static_cast<std::time_t>(now_unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

constexpr const char* kDamaged = "damaged";    // a copy a recovery salvages (or will)
constexpr const char* kReplaced = "replaced";  // an empty or half-made store, kept for people

// The file and its -wal and -shm go aside under one new name; SQLite finds the WAL of the moved
// file by that name, so the salvage reads what was committed to it too.
Result<std::string> move_aside(const std::string& path, int64_t now_unix, const char* label) {
  const std::string stem = path + "." + label + "-" + utc_stamp(now_unix);
  std::string target = stem;
  std::error_code ec;
  for (int n = 2; fs::exists(target, ec); ++n) target = stem + "-" + std::to_string(n);
  fs::rename(path, target, ec);
  if (ec) {
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot move the store {} aside: {}", path, ec.message()));
  }
  for (const char* suffix : {"-wal", "-shm"}) {
    if (fs::exists(path + suffix, ec)) fs::rename(path + suffix, target + suffix, ec);
  }
  return target;
}

// Copies one table from `from` into `to` by rowid, the columns both have. A range SQLite cannot
// read is stepped over by seeking ever further past the last row read, so a garbled leaf costs
// its rows and a garbled interior page the rows under it, never the rest of the table.
TableSalvage copy_table(sqlite3* from, sqlite3* to, const std::string& table) {
  TableSalvage salvage{table};
  const std::vector<std::string> fresh = column_names(to, table);
  const std::vector<std::string> old = column_names(from, table);
  std::vector<std::string> columns;
  for (const std::string& c : fresh) {
    if (std::find(old.begin(), old.end(), c) != old.end()) columns.push_back(c);
  }
  if (columns.empty()) return salvage;
  std::string list;
  std::string marks;
  for (size_t i = 0; i < columns.size(); ++i) {
    list += (i ? ", " : "") + sql_name(columns[i]);
    marks += (i ? ", ?" : "?") + std::to_string(i + 1);
  }
  Prepared read = prepare(from, fmt::format("SELECT rowid, {} FROM {} WHERE rowid > ?1 ORDER BY "
                                            "rowid",
                                            list, sql_name(table)));
  Prepared write = prepare(
      to, fmt::format("INSERT OR REPLACE INTO {} ({}) VALUES ({})", sql_name(table), list, marks));
  if (!read || !write) return salvage;
  int64_t after = std::numeric_limits<int64_t>::min();
  int64_t leap = 1;
  for (;;) {
    sqlite3_reset(read.get());
    sqlite3_bind_int64(read.get(), 1, after);
    int rc;
    while ((rc = sqlite3_step(read.get())) == SQLITE_ROW) {
      after = sqlite3_column_int64(read.get(), 0);
      leap = 1;
      sqlite3_reset(write.get());
      for (size_t i = 0; i < columns.size(); ++i) {
        sqlite3_bind_value(write.get(), static_cast<int>(i + 1),
                           sqlite3_column_value(read.get(), static_cast<int>(i + 1)));
      }
      if (sqlite3_step(write.get()) == SQLITE_DONE) ++salvage.rows;
    }
    if (rc == SQLITE_DONE) break;
    // Unreadable from here: seek past it, twice as far each time, until a row reads again or
    // the seek passes every rowid there can be.
    if (leap == 1) ++salvage.unreadable_spans;
    if (after > std::numeric_limits<int64_t>::max() - leap) break;
    after = after == std::numeric_limits<int64_t>::min() ? leap : after + leap;
    if (leap > std::numeric_limits<int64_t>::max() / 2) break;
    leap *= 2;
  }
  return salvage;
}

// Drops the rows whose parent row was lost, and then their own children, until every foreign
// key holds.
int64_t drop_orphans(sqlite3* db) {
  int64_t dropped = 0;
  for (int round = 0; round < 16; ++round) {
    std::vector<std::pair<std::string, int64_t>> orphans;
    Prepared check = prepare(db, "PRAGMA foreign_key_check");
    if (!check) break;
    while (sqlite3_step(check.get()) == SQLITE_ROW) {
      orphans.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0)),
                           sqlite3_column_int64(check.get(), 1));
    }
    if (orphans.empty()) break;
    for (const auto& [table, rowid] : orphans) {
      Prepared drop = prepare(db, "DELETE FROM " + sql_name(table) + " WHERE rowid = ?1");
      if (!drop) continue;
      sqlite3_bind_int64(drop.get(), 1, rowid);
      if (sqlite3_step(drop.get()) == SQLITE_DONE) dropped += sqlite3_changes(db);
    }
  }
  return dropped;
}

void set_meta(sqlite3* db, const std::string& key, const std::string& value, bool replace) {
  Prepared s = prepare(db, replace ? "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)"
                                   : "INSERT OR IGNORE INTO meta (key, value) VALUES (?1, ?2)");
  if (!s) return;
  sqlite3_bind_text(s.get(), 1, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.get(), 2, value.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_step(s.get());
}

}  // namespace

int64_t StoreRecovery::rows(const std::string& table) const {
  for (const TableSalvage& t : tables) {
    if (t.table == table) return t.rows;
  }
  return 0;
}

std::string StoreRecovery::summary() const {
  if (in_place) return "kept in place: the logs it knows are read on from where it says";
  if (tables.empty() && !damaged_path.empty() && behind)
    return "nothing to salvage: every log is read from its start";
  int64_t spans = 0;
  for (const TableSalvage& t : tables) spans += t.unreadable_spans;
  std::string text = fmt::format("salvaged {} file(s), {} event(s), {} alert(s), {} job(s)",
                                 rows("files"), rows("events"), rows("outbox"), rows("jobs"));
  if (spans > 0) text += fmt::format("; {} unreadable span(s) skipped", spans);
  if (dropped > 0) text += fmt::format("; {} row(s) dropped with what they referred to", dropped);
  return text;
}

Result<std::string> find_damage(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::string();
  auto db = connect(path, SQLITE_OPEN_READWRITE);
  if (!db) return db.error();
  Prepared check = prepare(db->get(), "PRAGMA quick_check");
  if (!check) {
    const int rc = sqlite3_errcode(db->get());
    if (is_damage(rc)) return std::string(sqlite3_errmsg(db->get()));
    return busy_or_database(db->get(), "quick_check");
  }
  const int rc = sqlite3_step(check.get());
  if (rc == SQLITE_ROW) {
    std::string finding(reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0)));
    return finding == "ok" ? std::string() : finding;
  }
  if (is_damage(rc)) return std::string(sqlite3_errmsg(db->get()));
  return busy_or_database(db->get(), "quick_check");
}

namespace {

std::string meta_value(sqlite3* db, const std::string& key) {
  Prepared s = prepare(db, "SELECT value FROM meta WHERE key = ?1");
  if (!s) return "";
  sqlite3_bind_text(s.get(), 1, key.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(s.get()) != SQLITE_ROW || !sqlite3_column_text(s.get(), 0)) return "";
  return reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
}

// Empty for a file with no store in it (no tables yet): the statement does not prepare.
StorePosition position_in(sqlite3* db) {
  Prepared s = prepare(db, OOMTRIAGE_POSITION_SQL);
  if (!s || sqlite3_step(s.get()) != SQLITE_ROW) return {};
  const auto* id = sqlite3_column_text(s.get(), 0);
  return {id ? reinterpret_cast<const char*>(id) : "", sqlite3_column_int64(s.get(), 1),
          sqlite3_column_int64(s.get(), 2)};
}

// What every recovered store's meta says (for `report` and `check-config`), and a new store id:
// the rows it hands out from now on must not be taken for the replaced store's, by a receiver
// or by the fleet store (which then receives all of this store's rows again under the new id).
void note_recovery(sqlite3* db, const StoreRecovery& recovery, const std::string& succeeds) {
  const std::string at = std::to_string(recovery.recovered_at);
  // The daemon ran here before: logs the store does not know are read from their start.
  set_meta(db, "first_scan_done", at, /*replace=*/false);
  set_meta(db, "store_recovered_at", at, true);
  set_meta(db, "store_recovered_from",
           recovery.damaged_path.empty() ? "(kept in place)" : recovery.damaged_path, true);
  set_meta(db, "store_recovered_reason", recovery.reason, true);
  set_meta(db, "store_recovered_salvage", recovery.summary(), true);
  set_meta(db, "store_recovered_kind", recovery.behind ? "behind" : "damage", true);
  set_meta(db, "store_succeeds", succeeds, true);
  sqlite3_exec(db,
               "UPDATE meta SET value = " OOMTRIAGE_UUID_SQL
               " WHERE key = 'store_id'; DELETE FROM meta WHERE key = 'fleet_outbox'",
               nullptr, nullptr, nullptr);
}

// A fresh store at `path` with what can be read of `source` ("" for none) copied into it.
Result<Ok> salvage_into(const std::string& path, const std::string& source, StoreRecovery& recovery,
                        std::string succeeds) {
  {
    auto fresh = Store::open(path);  // the schema, migrated
    if (!fresh) return fresh.error();
  }
  auto to = connect(path, SQLITE_OPEN_READWRITE);
  if (!to) return to.error();
  sqlite3_exec(to->get(), "PRAGMA foreign_keys=OFF", nullptr, nullptr, nullptr);
  if (sqlite3_exec(to->get(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return busy_or_database(to->get(), "salvage");
  }
  // Read-only: the damaged file stays as it was found (no checkpoint of its WAL into it).
  if (!source.empty()) {
    if (auto from = connect(source, SQLITE_OPEN_READONLY)) {
      std::vector<std::string> tables;
      Prepared names = prepare(to->get(),
                               "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                               "LIKE 'sqlite_%' ORDER BY rowid");
      while (names && sqlite3_step(names.get()) == SQLITE_ROW) {
        tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(names.get(), 0)));
      }
      names.reset();
      for (const std::string& table : tables) {
        recovery.tables.push_back(copy_table(from->get(), to->get(), table));
      }
    }
  }
  recovery.dropped = drop_orphans(to->get());
  for (TableSalvage& t : recovery.tables) {
    Prepared count = prepare(to->get(), "SELECT count(*) FROM " + sql_name(t.table));
    if (count && sqlite3_step(count.get()) == SQLITE_ROW)
      t.rows = sqlite3_column_int64(count.get(), 0);
  }
  if (succeeds.empty()) succeeds = meta_value(to->get(), "store_id");  // the copy's own
  note_recovery(to->get(), recovery, succeeds);
  if (sqlite3_exec(to->get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return busy_or_database(to->get(), "salvage");
  }
  return Ok{};
}

// The damaged copies of the store `store_id` beside `path` that no store salvaged yet, the
// newest first (their names carry the time they were moved aside).
std::vector<std::string> unsalvaged_copies(const std::string& path, const std::string& store_id,
                                           const std::string& salvaged) {
  std::vector<std::string> copies;
  const fs::path folder = fs::path(path).parent_path();
  const std::string prefix = fs::path(path).filename().string() + "." + kDamaged + "-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder.empty() ? "." : folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || name.ends_with("-wal") || name.ends_with("-shm")) continue;
    if (entry.path().string() == salvaged) continue;
    auto from = connect(entry.path().string(), SQLITE_OPEN_READONLY);
    if (from && meta_value(from->get(), "store_id") == store_id)
      copies.push_back(entry.path().string());
  }
  std::sort(copies.rbegin(), copies.rend());
  return copies;
}

}  // namespace

Result<StoreRecovery> recover_store(const std::string& path, const std::string& reason,
                                    int64_t now_unix) {
  StoreRecovery recovery;
  recovery.reason = reason;
  recovery.recovered_at = now_unix;
  auto aside = move_aside(path, now_unix, kDamaged);
  if (!aside) return aside.error();
  recovery.damaged_path = *aside;
  if (auto salvaged = salvage_into(path, recovery.damaged_path, recovery, ""); !salvaged)
    return salvaged.error();
  return recovery;
}

Result<StorePosition> position_of(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return StorePosition{};
  auto db = connect(path, SQLITE_OPEN_READWRITE);
  if (!db) return db.error();
  return position_in(db->get());
}

Result<std::optional<StoreRecovery>> recover_if_behind(const std::string& path,
                                                       const std::optional<StorePosition>& kept,
                                                       bool recovered_now, int64_t now_unix) {
  auto found = position_of(path);
  if (!found) return found.error();
  const std::string reason = behind_reason(kept, *found);
  if (reason.empty()) return std::optional<StoreRecovery>();
  std::string salvaged;
  {
    auto db = connect(path, SQLITE_OPEN_READWRITE);
    if (!db) return db.error();
    // This store already took the kept one's place (its identity was not yet rewritten).
    if (!found->store_id.empty() && meta_value(db->get(), "store_succeeds") == kept->store_id)
      return std::optional<StoreRecovery>();
    salvaged = meta_value(db->get(), "store_recovered_from");
  }
  StoreRecovery recovery;
  recovery.recovered_at = now_unix;
  recovery.behind = true;
  const std::vector<std::string> copies = unsalvaged_copies(path, kept->store_id, salvaged);
  const bool empty = found->store_id.empty() || (found->events == 0 && found->files == 0);
  if (!copies.empty() || (empty && !recovered_now)) {
    recovery.reason = copies.empty() ? reason
                                     : fmt::format("{}; its damaged copy {} was not yet salvaged",
                                                   reason, copies.front());
    std::error_code ec;
    if (fs::exists(path, ec)) {
      auto aside = move_aside(path, now_unix, kReplaced);
      if (!aside) return aside.error();
      if (copies.empty()) recovery.damaged_path = *aside;
    }
    if (!copies.empty()) recovery.damaged_path = copies.front();
    auto made = salvage_into(path, copies.empty() ? "" : copies.front(), recovery, kept->store_id);
    if (!made) return made.error();
    return std::optional<StoreRecovery>(std::move(recovery));
  }
  if (recovered_now) return std::optional<StoreRecovery>();
  recovery.reason = reason;
  recovery.in_place = true;
  auto db = connect(path, SQLITE_OPEN_READWRITE);
  if (!db) return db.error();
  if (sqlite3_exec(db->get(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
    return busy_or_database(db->get(), "recovery");
  note_recovery(db->get(), recovery, found->store_id);
  if (sqlite3_exec(db->get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
    return busy_or_database(db->get(), "recovery");
  return std::optional<StoreRecovery>(std::move(recovery));
}

std::optional<std::string> recovery_note(Store& store) {
  auto at = store.meta("store_recovered_at");
  if (!at || !*at) return std::nullopt;
  const auto value = [&store](const char* key) {
    auto v = store.meta(key);
    return v && *v ? **v : std::string("?");
  };
  const std::time_t t = static_cast<std::time_t>(std::strtoll((*at)->c_str(), nullptr, 10));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%SZ", &tm);
  if (value("store_recovered_kind") == "behind") {
    return fmt::format(
        "this store was recovered at {}: {}; {} ({}). Events stored before then may be missing, "
        "and alerts found again say they may have gone out before",
        when, value("store_recovered_reason"), value("store_recovered_salvage"),
        value("store_recovered_from"));
  }
  return fmt::format(
      "this store was recovered from damage ({}) at {}; the damaged file is kept as {}; {}. "
      "Events stored before then may be missing",
      value("store_recovered_reason"), when, value("store_recovered_from"),
      value("store_recovered_salvage"));
}

Result<std::optional<StoreRecovery>> recover_if_damaged(const std::string& path, int64_t now_unix) {
  auto damage = find_damage(path);
  if (!damage) return damage.error();
  if (damage->empty()) return std::optional<StoreRecovery>();
  auto recovered = recover_store(path, *damage, now_unix);
  if (!recovered) return recovered.error();
  return std::optional<StoreRecovery>(std::move(*recovered));
}

}  // namespace oomtriage::db
