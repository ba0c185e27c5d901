// db/store_recovery.h
//
// A damaged store must not stop the daemon for good. Garbage over some pages, a file cut short
// (a power loss on a bad disk, half of a backup restored) make SQLite answer "database disk
// image is malformed" to every statement that touches the damage: at start that was exit 2 and a
// restart loop, at run time a commit retried forever. Here the store is checked (PRAGMA
// quick_check), a damaged one is moved aside as `<store>.damaged-<UTC time>` (never deleted,
// with its -wal and -shm), and what can still be read of it is copied row by row into a fresh
// store at the same path: every table, with the ids it had, so the files' offsets and
// identities, the events and the outbox rows that survive keep a log from being read or alerted
// twice. A row whose parent was lost is dropped with its children (an event without its file
// would be read again anyway). What the salvage could not keep is for the daemon to say
// (docs/reliability.md, "A damaged store").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::db {

struct TableSalvage {
  std::string table;
  int64_t rows = 0;              // copied into the fresh store (and kept)
  int64_t unreadable_spans = 0;  // ranges of rows SQLite could not read and that were skipped
};

struct StoreRecovery {
  std::string damaged_path;  // where the damaged (or emptied) file now is; "" when kept in place
  std::string reason;        // what showed the damage: quick_check's first finding or an error
  // A sound store behind its identity (db/store_identity.h), kept where it is.
  bool in_place = false;
  // Not damage: the store was empty, another one, or behind what was committed (recover_if_behind).
  bool behind = false;
  std::vector<TableSalvage> tables;
  int64_t dropped = 0;  // rows read but dropped because a row they refer to was lost
  int64_t recovered_at = 0;

  int64_t rows(const std::string& table) const;
  // "salvaged 12 files, 40 events, 38 alerts; 2 unreadable spans skipped; 1 row dropped"
  std::string summary() const;
};

// The damage PRAGMA quick_check finds in the store at `path` (its first finding, or SQLite's
// error when the file is not a database at all), or "" when it is sound or does not exist yet.
// An error only for what is not damage: the file cannot be opened, the store is locked.
Result<std::string> find_damage(const std::string& path);

// Moves the store at `path` aside and salvages it into a fresh one there; `reason` is recorded.
// The fresh store's meta says so (store_recovered_at, store_recovered_from,
// store_recovered_reason, store_recovered_salvage) for `report` and `check-config`.
Result<StoreRecovery> recover_store(const std::string& path, const std::string& reason,
                                    int64_t now_unix);

// find_damage(), then recover_store() when there is damage: what a starting daemon does.
Result<std::optional<StoreRecovery>> recover_if_damaged(const std::string& path, int64_t now_unix);

struct StorePosition;
// How far the store at `path` has come (its id, highest event and file ids), read without
// changing it; an empty position for a file with no store in it (0 bytes, no tables yet).
Result<StorePosition> position_of(const std::string& path);

// What a starting daemon does next, with the identity the state dir kept (`kept`,
// db/store_identity.h): nothing when the store at `path` is the one it describes. Otherwise a
// recovery, with `reason` saying why, in the first of these that applies:
//  1. a damaged copy of the kept store lies beside it (`<path>.damaged-*`, store id as kept)
//     that no store salvaged yet (a recovery that met a full disk, or a store emptied after its
//     damaged copy was made): the file at `path` is moved aside (`<path>.replaced-<time>`) and
//     the copy salvaged into a fresh store there, so the history comes back;
//  2. after a recovery at this start (`recovered_now`), nothing more: its store is behind
//     because of what the salvage could not read, which it has said;
//  3. an empty store: moved aside, a fresh store made; every log is read from its start;
//  4. a store with rows but behind, or another store: kept in place (`in_place`).
// Every recovered store gets a new store id, so no id it hands out can repeat one handed out by
// the store it replaces, and the fleet store receives its rows again under that id.
Result<std::optional<StoreRecovery>> recover_if_behind(const std::string& path,
                                                       const std::optional<StorePosition>& kept,
                                                       bool recovered_now, int64_t now_unix);

class Store;
// What `report`, `jobs` and `check-config` say about a store that was recovered: when, where the
// damaged file is kept, what was salvaged; nullopt for a store never recovered.
std::optional<std::string> recovery_note(Store& store);

}  // namespace oomtriage::db
