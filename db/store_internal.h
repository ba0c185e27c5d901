// db/store_internal.h
//
// What the Store's source files share and callers of db/store.h never see: the SQL that makes an
// event's UUID, spliced into the schema's migration (db/store.cc) and into the event insert
// (db/store_progress.cc). Internal to db/.
#pragma once

// A random (version 4) UUID, made by SQLite for each row it is evaluated for.
#define OOMTRIAGE_UUID_SQL                                                                       \
  "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), " \
  "2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || " \
  "'-' || hex(randomblob(6)))"
