// db/store_identity.h
//
// What a starting daemon must know about its store that the store cannot tell it: whether the
// file at the store's path is the store it last wrote. A store cut to 0 bytes (a bad restore, a
// full disk at the wrong moment), a backup put back, or one that lost the tail of its WAL to a
// power loss (synchronous=NORMAL commits are not synced at once) is a valid database: taken at
// its word it was a first start (present logs read from their end, the crash written while the
// daemon was down never stored) or the truth (the lost rows' ids handed out again). So the state
// dir keeps, beside the store and outside it, `<store>.identity`: the store's id and how far its
// commits had come (its highest event and file ids), written durably after each commit that
// stores events, before their alerts can go out. A store behind it is recovered
// (db/store_recovery.h recover_if_behind; docs/reliability.md "A store behind its identity").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "parsers/result.h"

namespace oomtriage::db {

struct StorePosition {
  std::string store_id;  // "" for a file with no store in it (empty, or not yet made)
  int64_t events = 0;    // the highest event id committed
  int64_t files = 0;     // the highest file id committed

  bool operator==(const StorePosition&) const = default;
};

// `<store path>.identity`: beside the store, so `rm oomtriage.db*` is a first start again.
std::string identity_path(const std::string& store_path);

// The position kept for the store at `store_path`; nullopt when none was ever written (a first
// start, or a store older than identities). An error for a file that cannot be read or parsed.
Result<std::optional<StorePosition>> read_identity(const std::string& store_path);

// Writes it durably: a temporary file, fsync, rename over, fsync of the folder, so a power loss
// leaves the old identity or the new one, never neither. `folder_fd`, when given, is the store's
// folder opened O_DIRECTORY: the write then needs one descriptor only (the daemon keeps the
// folder and a spare one open, so it can write even with every other descriptor in use).
Result<Ok> write_identity(const std::string& store_path, const StorePosition& position,
                          int folder_fd = -1);

// Why the store found at the path (`found`) is not the one the identity describes (`kept`), in
// words for the journal, or "" when it is (or when nothing was kept): another or a new store
// where one with events was, or one whose highest event or file id is below what was committed.
std::string behind_reason(const std::optional<StorePosition>& kept, const StorePosition& found);

}  // namespace oomtriage::db
