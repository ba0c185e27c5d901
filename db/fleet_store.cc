// db/fleet_store.cc: the fleet store's schema, its migrations, shipping and the read side, over
// libpq. Every value is a parameter ($1...), sent as text; nothing is built from strings with
// values.
#include "db/fleet_store.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "db/libpq.h"
#include "parsers/job_config.h"

namespace oomtriage::db {
namespace {

// What the jobs list shows and filters on, kept on each job (migration 4, FleetStore::ship): the
// newest run's outcome, the counts, the newest event's phase, model family, step and top fix
// (from the start of its fixes, which oomtriage writes as [{"id":"...: a pattern never fails on
// a row, where a JSON cast would), and the newest sampled run's fullest card. `j` is the job.
#define OOMTRIAGE_JOB_LIST_COLUMNS                                                             \
  "outcome = COALESCE((SELECT r.outcome FROM oomtriage.runs r WHERE r.store_id = j.store_id "  \
  "AND r.job_id = j.id ORDER BY r.id DESC LIMIT 1), 'unknown'), run_count = (SELECT count(*) " \
  "FROM oomtriage.runs r WHERE r.store_id = j.store_id AND r.job_id = j.id), event_count = "   \
  "(SELECT count(*) FROM oomtriage.events e WHERE e.store_id = j.store_id AND e.job_id = "     \
  "j.id), (phase, model_family, step, top_fix) = (SELECT e.phase, e.model_family, e.step, "    \
  "substring(e.fixes_json FROM '^[[][{]\"id\":\"([^\"]*)\"') FROM oomtriage.events e WHERE "   \
  "e.store_id = j.store_id AND e.job_id = j.id ORDER BY e.id DESC LIMIT 1), (gpu_peak_bytes, " \
  "gpu_total_bytes) = (SELECT g.peak_bytes, g.total_bytes FROM oomtriage.gpu_memory g WHERE "  \
  "g.store_id = j.store_id AND g.job_id = j.id ORDER BY g.run_id DESC, g.peak_bytes DESC "     \
  "LIMIT 1)"

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
UPDATE oomtriage.jobs j SET )sql" OOMTRIAGE_JOB_LIST_COLUMNS R"sql(;
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
};

// The text search of the jobs list (`jobs --name`, /?q=) uses a trigram index where the role may
// create pg_trgm (a trusted extension: the database's CREATE right is enough); elsewhere it
// reads every job's name, which is slower but the same answer.
constexpr const char* kNameSearchIndex = R"sql(
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS jobs_by_name_text ON oomtriage.jobs USING gin (lower(name) gin_trgm_ops);
)sql";

// Any 64-bit number will do, as long as it stays the same: it names oomtriage's migration lock.
constexpr const char* kMigrationLock = "7307286135170301";

struct ClearResult {
  void operator()(PGresult* result) const { libpq().PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, ClearResult>;
using Params = std::vector<std::optional<std::string>>;

// libpq's messages end in a newline and may run on over lines: the first line is the reason.
std::string first_line(const char* message) {
  std::string text = message ? message : "";
  text = text.substr(0, text.find('\n'));
  // The server's "FATAL:  " or "ERROR:  " says nothing a reader needs.
  for (std::string_view severity : {"FATAL:  ", "ERROR:  ", "PANIC:  "}) {
    if (text.starts_with(severity)) text.erase(0, severity.size());
  }
  return text.empty() ? "unknown error" : text;
}

// PostgreSQL text holds neither NUL nor invalid UTF-8, and a row it refuses would stop the
// shipping for good: each such byte becomes U+FFFD.
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

// "%text%" for LIKE with the text's own %, _ and \ taken literally; "" for no text.
std::string like_pattern(std::string_view text) {
  if (text.empty()) return "";
  std::string out = "%";
  for (const char c : pg_text(text)) {
    if (c == '%' || c == '_' || c == '\\') out += '\\';
    out += c;
  }
  return out + "%";
}

std::optional<std::string> number(std::optional<int64_t> value) {
  return value ? std::optional<std::string>(std::to_string(*value)) : std::nullopt;
}

// A config (its text already made fit for PostgreSQL) as JSON for the jsonb column, when it
// reads as YAML or JSON; else NULL.
std::optional<std::string> config_json(const std::string& path, const std::string& content) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".yaml" && ext != ".yml" && ext != ".json") return std::nullopt;
  auto json = parsers::yaml_to_json(content, path);
  if (!json || !json->is_object()) return std::nullopt;
  std::string text = json->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // jsonb refuses the \u0000 escape that text allows.
  if (text.find("\\u0000") != std::string::npos) return std::nullopt;
  return text;
}

class Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {}

  Result<PgResult> run(const char* sql, const Params& params = {}) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    PgResult result(libpq().PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr,
                                         values.data(), nullptr, nullptr, 0),
                    ClearResult());
    const ExecStatusType status = libpq().PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return make_error(ErrorCode::kDatabase,
                        "fleet store: " + first_line(libpq().PQerrorMessage(conn_)));
    }
    return result;
  }

  // Several statements without parameters (a migration).
  Result<Ok> script(const char* sql) {
    PgResult result(libpq().PQexec(conn_, sql));
    const ExecStatusType status = libpq().PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return make_error(ErrorCode::kDatabase,
                        "fleet store: " + first_line(libpq().PQerrorMessage(conn_)));
    }
    return Ok{};
  }

 private:
  PGconn* conn_;
};

// Rolls back unless committed.
class PgTransaction {
 public:
  explicit PgTransaction(Connection& c) : c_(c) { ok_ = static_cast<bool>(c_.script("BEGIN")); }
  ~PgTransaction() {
    if (ok_ && !committed_) (void)c_.script("ROLLBACK");
  }
  bool ok() const { return ok_; }
  Result<Ok> commit() {
    auto r = c_.script("COMMIT");
    committed_ = static_cast<bool>(r);
    return r;
  }

 private:
  Connection& c_;
  bool ok_ = false;
  bool committed_ = false;
};

std::string text_at(const PGresult* r, int row, int col) {
  return std::string(libpq().PQgetvalue(r, row, col),
                     static_cast<size_t>(libpq().PQgetlength(r, row, col)));
}
int64_t integer_at(const PGresult* r, int row, int col) {
  return std::stoll(std::string(libpq().PQgetvalue(r, row, col)));
}
std::optional<int64_t> optional_at(const PGresult* r, int row, int col) {
  if (libpq().PQgetisnull(r, row, col)) return std::nullopt;
  return integer_at(r, row, col);
}

// A job's line in `jobs`, the same figures as the SQLite store counts, over the jobs in `from`.
std::string job_summary_select(std::string_view from = "oomtriage.jobs j") {
  return "SELECT j.id, j.name, j.trainer, j.log_dir, extract(epoch FROM j.last_seen)::bigint, "
         "j.run_count, j.event_count, j.outcome, j.host, j.store_id::text, COALESCE(j.phase, ''), "
         "j.step, j.home, j.gpu_peak_bytes, j.gpu_total_bytes, COALESCE(j.top_fix, '') FROM " +
         std::string(from) + " ";
}

JobSummary job_summary_at(const PGresult* r, int row) {
  JobSummary job;
  job.id = integer_at(r, row, 0);
  job.name = text_at(r, row, 1);
  job.trainer = text_at(r, row, 2);
  job.log_dir = text_at(r, row, 3);
  job.last_seen = integer_at(r, row, 4);
  job.runs = integer_at(r, row, 5);
  job.events = integer_at(r, row, 6);
  job.outcome = text_at(r, row, 7);
  job.host = text_at(r, row, 8);
  job.key = text_at(r, row, 9) + "." + std::to_string(job.id);
  job.last_phase = text_at(r, row, 10);
  job.last_step = optional_at(r, row, 11);
  job.top_fix = text_at(r, row, 15);
  job.home = text_at(r, row, 12);
  if (const auto peak = optional_at(r, row, 13)) job.gpu_peak_bytes = static_cast<uint64_t>(*peak);
  if (const auto total = optional_at(r, row, 14)) {
    job.gpu_total_bytes = static_cast<uint64_t>(*total);
  }
  return job;
}

}  // namespace

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

Result<FleetOverview> FleetStore::fleet_overview(int64_t since) {
  Connection c(conn_);
  FleetOverview out;
  const Params window = {std::to_string(since), host_filter_};
  for (const auto& [column, counts] :
       {std::pair{"phase", &out.by_phase}, std::pair{"model_family", &out.by_family}}) {
    OOMTRIAGE_ASSIGN_OR_RETURN(
        auto r, c.run(fmt::format("SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), "
                                  "{0}, count(*) FROM oomtriage.events WHERE created_at >= "
                                  "to_timestamp($1) AND ($2 = '' OR host = $2) GROUP BY 1, 2 "
                                  "ORDER BY 1, 2",
                                  column)
                          .c_str(),
                      window));
    for (int row = 0; row < libpq().PQntuples(r.get()); ++row) {
      counts->push_back(
          {text_at(r.get(), row, 0), text_at(r.get(), row, 1), integer_at(r.get(), row, 2)});
    }
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto fixes,
      c.run("SELECT fix_id, count(DISTINCT (store_id, job_id)) FROM oomtriage.heal_attempts WHERE "
            "verdict = 'healed' AND fix_id <> '' AND ($1 = '' OR host = $1) GROUP BY fix_id "
            "ORDER BY 2 DESC, 1 LIMIT 20",
            {host_filter_}));
  for (int row = 0; row < libpq().PQntuples(fixes.get()); ++row)
    out.healed_by.push_back({text_at(fixes.get(), row, 0), integer_at(fixes.get(), row, 1)});
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto nodes,
      c.run("SELECT n.host, extract(epoch FROM max(n.last_shipped_at))::bigint, (SELECT count(*) "
            "FROM oomtriage.jobs j WHERE j.host = n.host) FROM oomtriage.nodes n WHERE $1 = '' "
            "OR n.host = $1 GROUP BY n.host ORDER BY 2, 1",
            {host_filter_}));
  for (int row = 0; row < libpq().PQntuples(nodes.get()); ++row) {
    out.nodes.push_back({text_at(nodes.get(), row, 0), integer_at(nodes.get(), row, 1),
                         integer_at(nodes.get(), row, 2)});
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto near,
      c.run("SELECT g.store_id::text || '.' || g.job_id, j.name, j.host, g.peak_phase, "
            "g.peak_bytes, g.total_bytes, extract(epoch FROM g.updated_at)::bigint FROM (SELECT "
            "DISTINCT ON (store_id, job_id) * FROM oomtriage.gpu_memory WHERE total_bytes > 0 AND "
            "updated_at >= to_timestamp($1) AND ($2 = '' OR host = $2) ORDER BY store_id, job_id, "
            "peak_bytes::float8 / total_bytes DESC) g JOIN oomtriage.jobs j ON j.store_id = "
            "g.store_id AND j.id = g.job_id ORDER BY g.peak_bytes::float8 / g.total_bytes DESC "
            "LIMIT 20",
            window));
  for (int row = 0; row < libpq().PQntuples(near.get()); ++row) {
    const PGresult* r = near.get();
    out.near_limit.push_back({text_at(r, row, 0), text_at(r, row, 1), text_at(r, row, 2),
                              text_at(r, row, 3), static_cast<uint64_t>(integer_at(r, row, 4)),
                              static_cast<uint64_t>(integer_at(r, row, 5)), integer_at(r, row, 6)});
  }
  return out;
}

Result<int64_t> FleetStore::prune(int64_t before, int batch_size, int max_batches) {
  // A batch of jobs at a time, each in its own short transaction: nodes keep shipping between
  // batches instead of waiting behind one delete of months of rows. A job being shipped right
  // now is skipped (SKIP LOCKED) and taken by a later pass.
  Connection c(conn_);
  int64_t removed = 0;
  for (;;) {
    PgTransaction tx(c);
    if (!tx.ok()) return make_error(ErrorCode::kIo, "fleet store: cannot begin a transaction");
    OOMTRIAGE_ASSIGN_OR_RETURN(
        auto doomed, c.run("SELECT store_id::text, id FROM oomtriage.jobs WHERE last_seen < "
                           "to_timestamp($1) ORDER BY last_seen LIMIT $2 FOR UPDATE SKIP LOCKED",
                           {std::to_string(before), std::to_string(std::max(1, batch_size))}));
    const int count = libpq().PQntuples(doomed.get());
    if (count == 0) {
      // Nodes gone as long leave /fleet's list too.
      OOMTRIAGE_TRY(c.run("DELETE FROM oomtriage.nodes WHERE last_shipped_at < to_timestamp($1)",
                          {std::to_string(before)}));
      OOMTRIAGE_TRY(tx.commit());
      return removed;
    }
    std::vector<std::string> stores, ids;
    for (int row = 0; row < count; ++row) {
      stores.push_back(text_at(doomed.get(), row, 0));
      ids.push_back(text_at(doomed.get(), row, 1));
    }
    const Params keys = {fmt::format("{{{}}}", fmt::join(stores, ",")),
                         fmt::format("{{{}}}", fmt::join(ids, ","))};
    for (const char* sql :
         {"DELETE FROM oomtriage.events WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.gpu_memory WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.heal_attempts WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.runs WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.config_snapshots WHERE (store_id, job_id) IN (SELECT * FROM "
          "unnest($1::uuid[], $2::bigint[]))",
          "DELETE FROM oomtriage.jobs WHERE (store_id, id) IN (SELECT * FROM unnest($1::uuid[], "
          "$2::bigint[]))"}) {
      OOMTRIAGE_TRY(c.run(sql, keys));
    }
    OOMTRIAGE_TRY(tx.commit());
    removed += count;
    // The rest at the next pass: the shipper's thread is not held for months of rows at once.
    if (--max_batches <= 0) return removed;
  }
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

Result<Ok> FleetStore::ship(const FleetBatch& batch, const std::string& store_id,
                            const std::string& host) {
  Connection c(conn_);
  PgTransaction tx(c);
  if (!tx.ok())
    return make_error(ErrorCode::kIo, "fleet store: " + first_line(libpq().PQerrorMessage(conn_)));
  const std::string h = pg_text(host);
  for (const FleetJob& j : batch.jobs) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.jobs (store_id, id, host, name, trainer, log_dir, first_seen, "
        "last_seen, home) VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7), to_timestamp($8), "
        "$9) ON CONFLICT (store_id, id) DO UPDATE SET host = excluded.host, name = "
        "excluded.name, trainer = excluded.trainer, log_dir = excluded.log_dir, home = "
        "excluded.home, last_seen = GREATEST(oomtriage.jobs.last_seen, excluded.last_seen)",
        {store_id, std::to_string(j.id), h, pg_text(j.name), pg_text(j.trainer), pg_text(j.log_dir),
         std::to_string(j.first_seen), std::to_string(j.last_seen), pg_text(j.home)}));
  }
  for (const auto& [job_id, s] : batch.snapshots) {
    const std::string content = pg_text(s.content);
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.config_snapshots (store_id, id, host, job_id, path, sha256, "
        "content, config, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, "
        "to_timestamp($9)) ON CONFLICT (store_id, id) DO NOTHING",
        {store_id, std::to_string(s.id), h, std::to_string(job_id), pg_text(s.path),
         pg_text(s.sha256), content, config_json(s.path, content), std::to_string(s.seen_at)}));
  }
  for (const auto& [job_id, run] : batch.runs) {
    // An older picture of a run (a batch retried after a newer one) never overwrites a newer.
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.runs (store_id, id, host, job_id, log_path, snapshot_id, outcome, "
        "started_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, to_timestamp($8), "
        "to_timestamp($9)) ON CONFLICT (store_id, id) DO UPDATE SET outcome = excluded.outcome, "
        "updated_at = excluded.updated_at, snapshot_id = excluded.snapshot_id, log_path = "
        "excluded.log_path WHERE oomtriage.runs.updated_at <= excluded.updated_at",
        {store_id, std::to_string(run.id), h, std::to_string(job_id), pg_text(run.log_path),
         number(run.snapshot_id), pg_text(run.outcome), std::to_string(run.started_at),
         std::to_string(run.updated_at)}));
  }
  for (const FleetEvent& e : batch.events) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.events (event_id, store_id, id, host, job_id, run_id, "
        "snapshot_id, log_offset, kind, phase, model_family, step, recovered, event_json, "
        "fixes_json, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
        "$14, $15, to_timestamp($16)) ON CONFLICT (event_id) DO UPDATE SET kind = excluded.kind, "
        "phase = excluded.phase, step = excluded.step, recovered = excluded.recovered, "
        "event_json = excluded.event_json, fixes_json = excluded.fixes_json",
        {e.uuid, store_id, std::to_string(e.stored.id), h, std::to_string(e.job_id),
         number(e.stored.run_id ? std::optional<int64_t>(e.stored.run_id) : std::nullopt),
         number(e.stored.snapshot_id), std::to_string(e.typed.offset), pg_text(e.typed.kind),
         pg_text(e.typed.phase), pg_text(e.typed.model_family), number(e.typed.step),
         e.typed.recovered ? "true" : "false", pg_text(e.stored.event_json),
         pg_text(e.stored.fixes_json), std::to_string(e.stored.created_at)}));
  }
  for (const auto& [job_id, a] : batch.attempts) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.heal_attempts (store_id, run_id, host, job_id, attempt, "
        "max_attempts, fix_id, change, argv_json, resumed_step, outcome, verdict, started_at, "
        "ended_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, to_timestamp($13), "
        "to_timestamp($14)) ON CONFLICT (store_id, run_id) DO UPDATE SET outcome = "
        "excluded.outcome, verdict = excluded.verdict, ended_at = excluded.ended_at",
        {store_id, std::to_string(a.run_id), h, std::to_string(job_id), std::to_string(a.attempt),
         std::to_string(a.max_attempts), pg_text(a.fix_id), pg_text(a.change), pg_text(a.argv_json),
         number(a.resumed_step), pg_text(a.outcome), pg_text(a.verdict),
         std::to_string(a.started_at), std::to_string(a.ended_at)}));
  }
  for (const auto& [job_id, g] : batch.gpu_memory) {
    OOMTRIAGE_TRY(c.run(
        "INSERT INTO oomtriage.gpu_memory (store_id, run_id, gpu, host, job_id, total_bytes, "
        "peak_bytes, peak_phase, peak_step, others_peak_bytes, timeline_json, updated_at, "
        "warned_bytes, from_start) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
        "to_timestamp($12), $13, $14) ON CONFLICT (store_id, "
        "run_id, gpu) DO UPDATE SET total_bytes = excluded.total_bytes, peak_bytes = "
        "excluded.peak_bytes, peak_phase = excluded.peak_phase, peak_step = excluded.peak_step, "
        "others_peak_bytes = excluded.others_peak_bytes, timeline_json = excluded.timeline_json, "
        "updated_at = excluded.updated_at, warned_bytes = excluded.warned_bytes, from_start = "
        "excluded.from_start",
        {store_id, std::to_string(g.run_id), std::to_string(g.gpu), h, std::to_string(job_id),
         std::to_string(g.total_bytes), std::to_string(g.peak_bytes), pg_text(g.peak_phase),
         number(g.peak_step), std::to_string(g.others_peak_bytes), pg_text(g.timeline_json),
         std::to_string(g.updated_at),
         g.warned_bytes ? std::optional<std::string>(std::to_string(*g.warned_bytes))
                        : std::nullopt,
         g.from_start ? "true" : "false"}));
  }
  // The jobs list filters on each job's newest run and event: kept on the job here, once per
  // batch, for every job the batch touched.
  std::set<int64_t> touched;
  for (const FleetJob& j : batch.jobs) touched.insert(j.id);
  for (const auto& [job_id, run] : batch.runs) touched.insert(job_id);
  for (const FleetEvent& e : batch.events) touched.insert(e.job_id);
  for (const auto& [job_id, g] : batch.gpu_memory) touched.insert(job_id);
  if (!touched.empty()) {
    OOMTRIAGE_TRY(c.run("UPDATE oomtriage.jobs j SET " OOMTRIAGE_JOB_LIST_COLUMNS
                        " WHERE j.store_id = $1 AND j.id = ANY($2::bigint[])",
                        {store_id, fmt::format("{{{}}}", fmt::join(touched, ","))}));
  }
  OOMTRIAGE_TRY(c.run(
      "INSERT INTO oomtriage.nodes (store_id, host, last_shipped_at) VALUES ($1, $2, now()) ON "
      "CONFLICT (store_id) DO UPDATE SET host = excluded.host, last_shipped_at = "
      "excluded.last_shipped_at",
      {store_id, h}));
  return tx.commit();
}

Result<std::vector<JobSummary>> FleetStore::find_jobs(const JobQuery& query) {
  Connection c(conn_);
  // The page is chosen from the jobs table alone (its filters are columns kept by ship()), and
  // only its rows pay for the counts and the newest event. PQexecParams plans with the values,
  // so an empty filter's "$n = ''" folds away and the indexes serve what is left.
  std::string names = "{";
  for (const auto& name : query.names) {
    std::string quoted;
    for (const char ch : pg_text(name)) {
      if (ch == '"' || ch == '\\') quoted += '\\';
      quoted += ch;
    }
    names += (names.size() > 1 ? ",\"" : "\"") + quoted + "\"";
  }
  names += "}";
  // A host filter (`serve --host`) bounds every query: another host asked for is none.
  if (!host_filter_.empty() && !query.host.empty() && query.host != host_filter_) {
    return std::vector<JobSummary>();
  }
  const std::string host = query.host.empty() ? host_filter_ : query.host;
  const std::string sql =
      job_summary_select(
          "(SELECT * FROM oomtriage.jobs WHERE ($1 = '' OR host = $1) AND ($2 = '' OR "
          "outcome = $2) AND ($3 = '' OR phase = $3) AND ($4 = '' OR trainer = $4) AND ($5 = '' "
          "OR model_family = $5) AND ($6 = '' OR lower(name) LIKE lower($6)) AND ($7 = "
          "'{}' OR name = ANY($7::text[])) AND ($8::bigint IS NULL OR last_seen >= "
          "to_timestamp($8)) ORDER BY last_seen DESC, host, store_id, id DESC LIMIT $9 OFFSET $10) "
          "j") +
      "ORDER BY j.last_seen DESC, j.host, j.store_id, j.id DESC";
  auto r =
      c.run(sql.c_str(),
            {pg_text(host), pg_text(query.outcome), pg_text(query.phase), pg_text(query.trainer),
             pg_text(query.family), like_pattern(query.text), names, number(query.since),
             query.limit ? std::optional<std::string>(std::to_string(query.limit)) : std::nullopt,
             std::to_string(query.offset)});
  if (!r) return r.error();
  std::vector<JobSummary> jobs;
  for (int row = 0; row < libpq().PQntuples(r->get()); ++row)
    jobs.push_back(job_summary_at(r->get(), row));
  return jobs;
}

Result<std::optional<JobStory>> FleetStore::job_story_by_key(const std::string& key) {
  const size_t dot = key.rfind('.');
  int64_t id = 0;
  if (dot == std::string::npos || dot != 36) return std::optional<JobStory>();
  const auto [end, error] = std::from_chars(key.data() + dot + 1, key.data() + key.size(), id);
  if (error != std::errc() || end != key.data() + key.size()) return std::optional<JobStory>();
  // 8-4-4-4-12 lowercase hex, as PostgreSQL prints a uuid: anything else is no job, not an error.
  const std::string store_id = key.substr(0, dot);
  for (size_t i = 0; i < store_id.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = store_id[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return std::optional<JobStory>();
    }
  }
  Connection c(conn_);
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto found,
      c.run((job_summary_select() + "WHERE j.store_id = $1::uuid AND j.id = $2 AND ($3 = '' OR "
                                    "j.host = $3)")
                .c_str(),
            {store_id, std::to_string(id), host_filter_}));
  if (libpq().PQntuples(found.get()) == 0) return std::optional<JobStory>();
  return story_of(job_summary_at(found.get(), 0), store_id);
}

Result<std::optional<JobStory>> FleetStore::job_story(const std::string& name,
                                                      const std::optional<std::string>& home) {
  Connection c(conn_);
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto found, c.run((job_summary_select() +
                         "WHERE j.name = $1 AND ($2 = '' OR j.host = $2) AND ($3::text IS NULL OR "
                         "j.home = $3) ORDER BY j.last_seen DESC")
                            .c_str(),
                        {pg_text(name), host_filter_,
                         home ? std::optional<std::string>(pg_text(*home)) : std::nullopt}));
  const PGresult* jobs = found.get();
  if (libpq().PQntuples(jobs) == 0) return std::optional<JobStory>();
  std::vector<std::string> hosts;
  for (int row = 0; row < libpq().PQntuples(jobs); ++row) {
    const std::string host = text_at(jobs, row, 8);
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  if (hosts.size() > 1) {
    std::sort(hosts.begin(), hosts.end());
    return make_error(ErrorCode::kBadInput,
                      fmt::format("job '{}' is on {} hosts ({}): name one with --host", name,
                                  hosts.size(), fmt::join(hosts, ", ")));
  }
  std::vector<std::string> homes;
  for (int row = 0; row < libpq().PQntuples(jobs); ++row) {
    const std::string job_home = text_at(jobs, row, 12);
    if (std::find(homes.begin(), homes.end(), job_home) == homes.end()) homes.push_back(job_home);
  }
  if (homes.size() > 1) {
    std::sort(homes.begin(), homes.end());
    return make_error(ErrorCode::kBadInput,
                      fmt::format("job name '{}' is used by {} jobs, in {}", name, homes.size(),
                                  fmt::join(homes, ", ")));
  }
  // One host that stored it twice (its store made anew): the newest.
  return story_of(job_summary_at(jobs, 0), text_at(jobs, 0, 9));
}

Result<std::optional<JobStory>> FleetStore::story_of(const JobSummary& job,
                                                     const std::string& store_id) {
  Connection c(conn_);
  JobStory story;
  story.job = job;
  const Params key = {store_id, std::to_string(story.job.id)};

  OOMTRIAGE_ASSIGN_OR_RETURN(auto runs, c.run("SELECT id, log_path, outcome, extract(epoch FROM "
                                              "started_at)::bigint, extract(epoch FROM "
                                              "updated_at)::bigint, snapshot_id FROM "
                                              "oomtriage.runs WHERE store_id = $1 AND job_id = $2 "
                                              "ORDER BY id",
                                              key));
  for (int row = 0; row < libpq().PQntuples(runs.get()); ++row) {
    const PGresult* r = runs.get();
    story.runs.push_back({integer_at(r, row, 0), text_at(r, row, 1), text_at(r, row, 2),
                          integer_at(r, row, 3), integer_at(r, row, 4), optional_at(r, row, 5)});
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto snaps,
      c.run("SELECT id, path, sha256, content, extract(epoch FROM seen_at)::bigint FROM "
            "oomtriage.config_snapshots WHERE store_id = $1 AND job_id = $2 ORDER BY id",
            key));
  for (int row = 0; row < libpq().PQntuples(snaps.get()); ++row) {
    const PGresult* r = snaps.get();
    story.snapshots.push_back({integer_at(r, row, 0), text_at(r, row, 1), text_at(r, row, 2),
                               text_at(r, row, 3), integer_at(r, row, 4)});
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto events,
      c.run(
          "SELECT id, COALESCE(run_id, 0), snapshot_id, event_json, fixes_json, extract(epoch FROM "
          "created_at)::bigint FROM oomtriage.events WHERE store_id = $1 AND job_id = $2 ORDER BY "
          "id",
          key));
  for (int row = 0; row < libpq().PQntuples(events.get()); ++row) {
    const PGresult* r = events.get();
    story.events.push_back({integer_at(r, row, 0), integer_at(r, row, 1), optional_at(r, row, 2),
                            text_at(r, row, 3), text_at(r, row, 4), integer_at(r, row, 5)});
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto attempts,
      c.run(
          "SELECT run_id, attempt, max_attempts, fix_id, change, argv_json, resumed_step, outcome, "
          "verdict, extract(epoch FROM started_at)::bigint, extract(epoch FROM ended_at)::bigint "
          "FROM oomtriage.heal_attempts WHERE store_id = $1 AND job_id = $2 ORDER BY run_id",
          key));
  for (int row = 0; row < libpq().PQntuples(attempts.get()); ++row) {
    const PGresult* r = attempts.get();
    HealAttempt a;
    a.run_id = integer_at(r, row, 0);
    a.attempt = static_cast<int>(integer_at(r, row, 1));
    a.max_attempts = static_cast<int>(integer_at(r, row, 2));
    a.fix_id = text_at(r, row, 3);
    a.change = text_at(r, row, 4);
    a.argv_json = text_at(r, row, 5);
    a.resumed_step = optional_at(r, row, 6);
    a.outcome = text_at(r, row, 7);
    a.verdict = text_at(r, row, 8);
    a.started_at = integer_at(r, row, 9);
    a.ended_at = integer_at(r, row, 10);
    story.attempts.push_back(std::move(a));
  }
  OOMTRIAGE_ASSIGN_OR_RETURN(
      auto gpu, c.run("SELECT run_id, gpu, total_bytes, peak_bytes, peak_phase, peak_step, "
                      "others_peak_bytes, timeline_json, extract(epoch FROM updated_at)::bigint, "
                      "warned_bytes, from_start FROM oomtriage.gpu_memory WHERE store_id = $1 AND "
                      "job_id = $2 ORDER BY "
                      "run_id, gpu",
                      key));
  for (int row = 0; row < libpq().PQntuples(gpu.get()); ++row) {
    const PGresult* r = gpu.get();
    GpuMemoryRow g;
    g.run_id = integer_at(r, row, 0);
    g.gpu = static_cast<unsigned>(integer_at(r, row, 1));
    g.total_bytes = static_cast<uint64_t>(integer_at(r, row, 2));
    g.peak_bytes = static_cast<uint64_t>(integer_at(r, row, 3));
    g.peak_phase = text_at(r, row, 4);
    g.peak_step = optional_at(r, row, 5);
    g.others_peak_bytes = static_cast<uint64_t>(integer_at(r, row, 6));
    g.timeline_json = text_at(r, row, 7);
    g.updated_at = integer_at(r, row, 8);
    if (const auto warned = optional_at(r, row, 9)) g.warned_bytes = static_cast<uint64_t>(*warned);
    g.from_start = text_at(r, row, 10) == "t";
    story.gpu_memory.push_back(std::move(g));
  }
  return std::optional<JobStory>(std::move(story));
}

}  // namespace oomtriage::db
