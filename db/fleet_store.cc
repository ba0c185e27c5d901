// db/fleet_store.cc: connecting to the fleet store and its schema: the URL's checks, the
// session's settings, the read-only role's check, and the migrations, applied once under an
// advisory lock. Shipping is in db/fleet_store_writes.cc, the read side in
// db/fleet_store_reads.cc; what they share is db/fleet_store_internal.h. Every value is a
// parameter ($1...), sent as text; nothing is built from strings with values.
#include "db/fleet_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "db/fleet_store_internal.h"
#include "db/libpq.h"
#include "triage/fix_codec.h"

namespace oomtriage::db {
namespace {

// All tables live in their own schema: the database may well be shared.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE oomtriage.jobs (
  store_id uuid NOT NULL,
  id bigint NOT NULL,
  host text NOT NULL,
  name text NOT NULL,
  trainer text NOT NULL,
  log_dir text NOT NULL,
  first_seen timestamptz NOT NULL,
  last_seen timestamptz NOT NULL,
  PRIMARY KEY (store_id, id)
);
CREATE INDEX jobs_by_name ON oomtriage.jobs (name, host);
CREATE INDEX jobs_by_last_seen ON oomtriage.jobs (last_seen DESC);
CREATE TABLE oomtriage.config_snapshots (
  store_id uuid NOT NULL,
  id bigint NOT NULL,
  host text NOT NULL,
  job_id bigint NOT NULL,
  path text NOT NULL,
  sha256 text NOT NULL,
  content text NOT NULL,
  config jsonb,
  seen_at timestamptz NOT NULL,
  PRIMARY KEY (store_id, id)
);
CREATE INDEX snapshots_by_job ON oomtriage.config_snapshots (store_id, job_id);
CREATE TABLE oomtriage.runs (
  store_id uuid NOT NULL,
  id bigint NOT NULL,
  host text NOT NULL,
  job_id bigint NOT NULL,
  log_path text NOT NULL,
  snapshot_id bigint,
  outcome text NOT NULL,
  started_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (store_id, id)
);
CREATE INDEX runs_by_job ON oomtriage.runs (store_id, job_id);
CREATE TABLE oomtriage.events (
  event_id uuid PRIMARY KEY,
  store_id uuid NOT NULL,
  id bigint NOT NULL,
  host text NOT NULL,
  job_id bigint NOT NULL,
  run_id bigint,
  snapshot_id bigint,
  log_offset bigint NOT NULL,
  kind text NOT NULL,
  phase text NOT NULL,
  model_family text NOT NULL,
  step bigint,
  recovered boolean NOT NULL,
  event_json text NOT NULL,
  fixes_json text NOT NULL,
  created_at timestamptz NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_by_job ON oomtriage.events (store_id, job_id, id);
CREATE INDEX events_by_received ON oomtriage.events (received_at);
CREATE TABLE oomtriage.heal_attempts (
  store_id uuid NOT NULL,
  run_id bigint NOT NULL,
  host text NOT NULL,
  job_id bigint NOT NULL,
  attempt integer NOT NULL,
  max_attempts integer NOT NULL,
  fix_id text NOT NULL,
  change text NOT NULL,
  argv_json text NOT NULL,
  resumed_step bigint,
  outcome text NOT NULL,
  verdict text NOT NULL,
  started_at timestamptz NOT NULL,
  ended_at timestamptz NOT NULL,
  PRIMARY KEY (store_id, run_id)
);
)sql",
    // 2: a job is its name in its folder on its node (db/store.h: JobSummary::home).
    R"sql(
ALTER TABLE oomtriage.jobs ADD COLUMN IF NOT EXISTS home text NOT NULL DEFAULT '';
)sql",
    // 3: each run's GPU memory per card (db/store.h GpuMemoryRow), replaced as it grows.
    R"sql(
CREATE TABLE oomtriage.gpu_memory (
  store_id uuid NOT NULL,
  run_id bigint NOT NULL,
  gpu integer NOT NULL,
  host text NOT NULL,
  job_id bigint NOT NULL,
  total_bytes bigint NOT NULL,
  peak_bytes bigint NOT NULL,
  peak_phase text NOT NULL,
  peak_step bigint,
  others_peak_bytes bigint NOT NULL,
  timeline_json text NOT NULL,
  warned_bytes bigint,
  from_start boolean NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (store_id, run_id, gpu)
);
CREATE INDEX gpu_memory_by_job ON oomtriage.gpu_memory (store_id, job_id);
)sql",
    // 4: what the jobs list filters on and shows, kept on the job as batches arrive
    // (FleetStore::ship; OOMTRIAGE_JOB_LIST_COLUMNS): a page of jobs under any filter reads the
    // jobs table alone. Each node's last batch, for /fleet's quiet nodes. Each index's reason is
    // beside it, from EXPLAIN (ANALYZE, BUFFERS) on the generated store of 100,000 jobs and
    // 1,000,000 events (docs/benchmarks.md, "Fleet store at scale").
    R"sql(
ALTER TABLE oomtriage.jobs ADD COLUMN outcome text NOT NULL DEFAULT 'unknown',
  ADD COLUMN run_count bigint NOT NULL DEFAULT 0, ADD COLUMN event_count bigint NOT NULL
  DEFAULT 0, ADD COLUMN phase text, ADD COLUMN model_family text, ADD COLUMN step bigint,
  ADD COLUMN top_fix text, ADD COLUMN gpu_peak_bytes bigint, ADD COLUMN gpu_total_bytes bigint;
UPDATE oomtriage.jobs j SET )sql" OOMTRIAGE_JOB_LIST_COLUMNS_V4 R"sql(;
CREATE TABLE oomtriage.nodes (
  store_id uuid PRIMARY KEY,
  host text NOT NULL,
  last_shipped_at timestamptz NOT NULL
);
INSERT INTO oomtriage.nodes (store_id, host, last_shipped_at)
  SELECT store_id, max(host), max(last_seen) FROM oomtriage.jobs GROUP BY store_id;
-- The list in its order (newest first, then host and id, so that pages never overlap) read from
-- the index's start: a page costs its 51 rows, not a sort of every job.
DROP INDEX IF EXISTS oomtriage.jobs_by_last_seen;
CREATE INDEX jobs_by_last_seen ON oomtriage.jobs (last_seen DESC, host, store_id, id DESC);
-- One value of each filter in the list's order. Without them a filter that matches few jobs
-- (an outcome nobody has: 73 ms) reads every job from the index above and drops the rest.
-- Retention deletes a job's heal attempts by job, as the other tables'.
CREATE INDEX heal_attempts_by_job ON oomtriage.heal_attempts (store_id, job_id);
CREATE INDEX jobs_by_host ON oomtriage.jobs (host, last_seen DESC);
CREATE INDEX jobs_by_outcome ON oomtriage.jobs (outcome, last_seen DESC);
CREATE INDEX jobs_by_phase ON oomtriage.jobs (phase, last_seen DESC);
CREATE INDEX jobs_by_family ON oomtriage.jobs (model_family, last_seen DESC);
CREATE INDEX jobs_by_trainer ON oomtriage.jobs (trainer, last_seen DESC);
-- /fleet's OOMs per day: the window's events read from the index alone, never the event rows
-- with their JSON.
CREATE INDEX events_by_created ON oomtriage.events (created_at) INCLUDE (phase, model_family);
)sql",
    // 5: each event's top fix as a column, written as it ships (FleetStore::ship), so no SQL
    // reads the fixes' JSON; the events shipped before it are filled by fill_top_fix() below.
    R"sql(
ALTER TABLE oomtriage.events ADD COLUMN top_fix text;
)sql",
};

// The version whose events gained the top_fix column.
constexpr int kEventTopFixVersion = 5;

// The top fix of the events shipped before migration 5, read by the one fix decoder: the first
// fix's id, NULL for an event without fixes or whose fixes do not decode.
Result<Ok> fill_top_fix(Connection& c) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto rows,
                             c.run("SELECT event_id::text, fixes_json FROM oomtriage.events"));
  for (int row = 0; row < libpq().PQntuples(rows.get()); ++row) {
    const auto fixes = triage::decode_fixes(text_at(rows.get(), row, 1));
    if (!fixes || fixes->empty()) continue;
    OOMTRIAGE_TRY(c.run("UPDATE oomtriage.events SET top_fix = $2 WHERE event_id = $1::uuid",
                        {text_at(rows.get(), row, 0), pg_text(fixes->front().id)}));
  }
  return Ok{};
}

// The text search of the jobs list (`jobs --name`, /?q=) uses a trigram index where the role may
// create pg_trgm (a trusted extension: the database's CREATE right is enough); elsewhere it
// reads every job's name, which is slower but the same answer.
constexpr const char* kNameSearchIndex = R"sql(
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS jobs_by_name_text ON oomtriage.jobs USING gin (lower(name) gin_trgm_ops);
)sql";

// Any 64-bit number will do, as long as it stays the same: it names oomtriage's migration lock.
constexpr const char* kMigrationLock = "7307286135170301";

}  // namespace

std::string first_line(const char* message) {
  std::string text = message ? message : "";
  text = text.substr(0, text.find('\n'));
  // The server's "FATAL:  " or "ERROR:  " says nothing a reader needs.
  for (std::string_view severity : {"FATAL:  ", "ERROR:  ", "PANIC:  "}) {
    if (text.starts_with(severity)) text.erase(0, severity.size());
  }
  return text.empty() ? "unknown error" : text;
}

std::string pg_text(std::string_view in) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c != 0 && c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    const size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                       : c >= 0xE0 && c <= 0xEF ? 3
                       : c >= 0xF0 && c <= 0xF4 ? 4
                                                : 0;
    bool ok = len != 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    if (ok && len >= 3) {
      const auto d = static_cast<unsigned char>(in[i + 1]);
      // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
      ok = !(c == 0xE0 && d < 0xA0) && !(c == 0xED && d >= 0xA0) && !(c == 0xF0 && d < 0x90) &&
           !(c == 0xF4 && d >= 0x90);
    }
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(in.substr(i, len));
    i += len;
  }
  return out;
}

bool is_fleet_url(std::string_view store) {
  return store.starts_with("postgresql://") || store.starts_with("postgres://");
}

Result<Ok> check_fleet_url(const std::string& url) {
  if (!is_fleet_url(url)) {
    return make_error(ErrorCode::kBadInput,
                      "a fleet store is a postgresql:// URL, not `" + url + "`");
  }
  if (auto loaded = load_libpq(); !loaded) return loaded.error();
  char* error = nullptr;
  PQconninfoOption* options = libpq().PQconninfoParse(url.c_str(), &error);
  if (options == nullptr) {
    std::string reason = first_line(error);
    libpq().PQfreemem(error);
    return make_error(ErrorCode::kBadInput, "store URL: " + reason);
  }
  bool has_password = false;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (std::string_view(o->keyword) == "password" && o->val != nullptr && *o->val != '\0') {
      has_password = true;
    }
  }
  libpq().PQconninfoFree(options);
  if (has_password) {
    return make_error(ErrorCode::kBadInput,
                      "the store URL carries a password: put it in a password file (PGPASSFILE, "
                      "~/.pgpass or ?passfile=PATH) or PGPASSWORD, never in the config");
  }
  return Ok{};
}

namespace {

// A connection to the fleet store with oomtriage's session settings; `read_only` makes every
// transaction of the session read-only.
Result<PGconn*> connect(const std::string& url, int connect_timeout_seconds, bool read_only) {
  if (auto checked = check_fleet_url(url); !checked) return checked.error();
  const std::string timeout = std::to_string(std::max(1, connect_timeout_seconds));
  const std::string options =
      std::string("-c statement_timeout=60000 -c client_min_messages=warning") +
      (read_only ? " -c default_transaction_read_only=on" : "");
  // The URL first: the keywords after it are oomtriage's own and win.
  // A partitioned network must not hold a call for the kernel's default keepalive (~11 min):
  // unacknowledged data fails after 30 s, an idle link is probed every 10 s after 30 s.
  const char* keywords[] = {
      "dbname",          "connect_timeout",     "client_encoding",  "application_name", "options",
      "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout", nullptr};
  const char* values[] = {
      url.c_str(), timeout.c_str(), "UTF8", "oomtriage", options.c_str(), "30", "10",
      "3",         "30000",         nullptr};
  PGconn* conn = libpq().PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return make_error(ErrorCode::kIo, "fleet store: out of memory");
  if (libpq().PQstatus(conn) != CONNECTION_OK) {
    std::string reason = first_line(libpq().PQerrorMessage(conn));
    libpq().PQfinish(conn);
    return make_error(ErrorCode::kIo, "fleet store unreachable: " + reason);
  }
  return conn;
}

}  // namespace

Result<std::unique_ptr<FleetStore>> FleetStore::open(const std::string& url,
                                                     int connect_timeout_seconds) {
  OOMTRIAGE_ASSIGN_OR_RETURN(PGconn * conn, connect(url, connect_timeout_seconds, false));
  std::unique_ptr<FleetStore> store(new FleetStore(conn));
  if (auto r = store->migrate(); !r) return r.error();
  return store;
}

Result<std::unique_ptr<FleetStore>> FleetStore::open_read_only(const std::string& url,
                                                               bool role_may_write,
                                                               int connect_timeout_seconds) {
  OOMTRIAGE_ASSIGN_OR_RETURN(PGconn * conn, connect(url, connect_timeout_seconds, true));
  std::unique_ptr<FleetStore> store(new FleetStore(conn));
  auto version = store->schema_version();
  if (!version) return version.error();
  const int target = static_cast<int>(std::size(kMigrations));
  if (*version != target) {
    return make_error(ErrorCode::kDatabase,
                      fmt::format("fleet store has schema version {}, this oomtriage reads version "
                                  "{}{}",
                                  *version, target,
                                  *version < target ? ": a daemon of this version migrates it when "
                                                      "it starts shipping"
                                                    : ""));
  }
  auto writes = store->role_can_write();
  if (!writes) return writes.error();
  if (!writes->empty() && !role_may_write) {
    return make_error(ErrorCode::kBadInput,
                      "the fleet store's role can write (" + *writes +
                          "); serve wants a read-only role (docs/serve.md shows how to make one), "
                          "or --allow-writer-role to serve anyway in read-only transactions");
  }
  store->writer_role_ = *writes;
  return store;
}

Result<std::string> FleetStore::role_can_write() {
  Connection c(conn_);
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto r,
      c.run("SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), "
            "has_schema_privilege('oomtriage', 'CREATE'), (SELECT string_agg(c.relname, ', ' "
            "ORDER BY c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'oomtriage' AND c.relkind = 'r' AND has_table_privilege(c.oid, "
            "'INSERT, UPDATE, DELETE, TRUNCATE'))"));
  const std::string role = text_at(r.get(), 0, 0);
  if (text_at(r.get(), 0, 1) == "t") return "role " + role + " is a superuser";
  if (text_at(r.get(), 0, 2) == "t") return "role " + role + " may create in schema oomtriage";
  if (!libpq().PQgetisnull(r.get(), 0, 3)) {
    return "role " + role + " may change " + text_at(r.get(), 0, 3);
  }
  return std::string();
}

FleetStore::~FleetStore() { libpq().PQfinish(conn_); }

Result<int> FleetStore::schema_version() {
  Connection c(conn_);
  auto r = c.run("SELECT value FROM oomtriage.meta WHERE key = 'schema_version'");
  if (!r) return r.error();
  return libpq().PQntuples(r->get()) ? std::stoi(text_at(r->get(), 0, 0)) : 0;
}

Result<Ok> FleetStore::migrate() {
  Connection c(conn_);
  PgTransaction tx(c);
  if (!tx.ok()) return make_error(ErrorCode::kDatabase, "fleet store: cannot begin a transaction");
  // Many daemons may start at once: one migrates, the others wait here and find it done.
  if (auto r = c.run((std::string("SELECT pg_advisory_xact_lock(") + kMigrationLock + ")").c_str());
      !r) {
    return r.error();
  }
  // CREATE SCHEMA IF NOT EXISTS needs the right to create even when it exists: a schema an
  // administrator made for oomtriage is looked for first.
  OOMTRIAGE_ASSIGN_OR_RETURN(auto exists,
                             c.run("SELECT 1 FROM pg_namespace WHERE nspname = 'oomtriage'"));
  if (libpq().PQntuples(exists.get()) == 0) {
    if (auto r = c.script("CREATE SCHEMA oomtriage"); !r) return r.error();
  }
  // The same for the meta table: a role without the right to create (a reporting user) finds
  // it and reads on.
  OOMTRIAGE_ASSIGN_OR_RETURN(auto meta, c.run("SELECT to_regclass('oomtriage.meta') IS NOT NULL"));
  if (text_at(meta.get(), 0, 0) != "t") {
    if (auto r =
            c.script("CREATE TABLE oomtriage.meta (key text PRIMARY KEY, value text NOT NULL)");
        !r) {
      return r.error();
    }
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto current, c.run("SELECT value FROM oomtriage.meta WHERE key = 'schema_version'"));
  const int from = libpq().PQntuples(current.get()) ? std::stoi(text_at(current.get(), 0, 0)) : 0;
  const int target = static_cast<int>(std::size(kMigrations));
  if (from > target) {
    return make_error(ErrorCode::kDatabase,
                      fmt::format("fleet store schema version {} is newer than this oomtriage ({})",
                                  from, target));
  }
  if (from == target) return tx.commit();
  for (int version = from; version < target; ++version) {
    if (auto r = c.script(kMigrations[version]); !r) return r.error();
  }
  if (from < kEventTopFixVersion) {
    if (auto r = fill_top_fix(c); !r) return r.error();
  }
  if (from < 4) {
    // Optional: a role that may not create the extension keeps the slower search.
    if (auto r = c.script("SAVEPOINT name_search"); !r) return r.error();
    if (!c.script(kNameSearchIndex)) {
      if (auto r = c.script("ROLLBACK TO SAVEPOINT name_search"); !r) return r.error();
    }
  }
  if (auto r =
          c.run("INSERT INTO oomtriage.meta (key, value) VALUES ('schema_version', $1) ON CONFLICT "
                "(key) DO UPDATE SET value = excluded.value",
                {std::to_string(target)});
      !r) {
    return r.error();
  }
  return tx.commit();
}

}  // namespace oomtriage::db
