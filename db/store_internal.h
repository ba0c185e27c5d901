// db/store_internal.h
//
// What the Store's source files share and callers of db/store.h never see: the SQL that makes an
// event's UUID, spliced into the schema's migration (db/store.cc) and into the event insert
// (db/store_progress.cc), an event's top fix (written at insert, filled by a migration), and the
// reader of a GPU memory row that the store's reads and the fleet outbox share. Internal to db/.
#pragma once

#include <string>
#include <string_view>

#include "db/sqlite_statement.h"
#include "db/store.h"

// A random (version 4) UUID, made by SQLite for each row it is evaluated for.
#define OOMTRIAGE_UUID_SQL                                                                       \
  "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), " \
  "2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || " \
  "'-' || hex(randomblob(6)))"

// A store's position (db/store_identity.h): its id and its highest event and file ids. One
// statement, read by Store::position() and, on a file not yet opened as a Store, by the
// recovery (db/store_recovery.cc).
#define OOMTRIAGE_POSITION_SQL                                                            \
  "SELECT (SELECT value FROM meta WHERE key = 'store_id'), (SELECT COALESCE(max(id), 0) " \
  "FROM events), (SELECT COALESCE(max(id), 0) FROM files)"

namespace oomtriage::db {

// The id of the first fix in an event's fixes_json, read by the fix decoder (triage/fix_codec.h);
// "" when it has none or does not decode (a row edited by hand). The events' top_fix column.
std::string top_fix_of(std::string_view fixes_json);

// The columns a GpuMemoryRow is read from, in the order gpu_memory_row() reads them.
#define OOMTRIAGE_GPU_MEMORY_COLUMNS                                          \
  "g.run_id, g.gpu, g.total_bytes, g.peak_bytes, g.peak_phase, g.peak_step, " \
  "g.others_peak_bytes, g.timeline_json, g.updated_at, g.warned_bytes, g.from_start "

// The row whose OOMTRIAGE_GPU_MEMORY_COLUMNS start at column `at` of `s`.
inline GpuMemoryRow gpu_memory_row(Statement& s, int at) {
  GpuMemoryRow row;
  row.run_id = s.integer(at);
  row.gpu = static_cast<unsigned>(s.integer(at + 1));
  row.total_bytes = static_cast<uint64_t>(s.integer(at + 2));
  row.peak_bytes = static_cast<uint64_t>(s.integer(at + 3));
  row.peak_phase = s.text(at + 4);
  row.peak_step = s.optional_integer(at + 5);
  row.others_peak_bytes = static_cast<uint64_t>(s.integer(at + 6));
  row.timeline_json = s.text(at + 7);
  row.updated_at = s.integer(at + 8);
  if (const auto warned = s.optional_integer(at + 9)) {
    row.warned_bytes = static_cast<uint64_t>(*warned);
  }
  row.from_start = s.integer(at + 10) != 0;
  return row;
}

}  // namespace oomtriage::db
