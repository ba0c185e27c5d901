// db/fleet_store.h
//
// The fleet store: one PostgreSQL database that every node's daemon ships its store into and
// that `oomtriage jobs` and `report` read from any machine. Each node keeps working on its own
// SQLite store; its fleet outbox (db/store.h) is shipped here a batch at a time, one transaction
// per batch, every row keyed by the node's store id and its local id (events by their UUID), so
// a batch shipped twice, after a timeout or a crash between commit and acknowledgement, changes
// nothing. Typed columns, the configs also as jsonb, `host` on every row, schema versions
// applied under an advisory lock so that many daemons starting at once migrate it once.
// libpq directly (docs/self-healing-and-fleet.md §C.3); no password ever in the URL.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"
#include "parsers/result.h"

struct pg_conn;

namespace oomtriage::db {

// postgresql://... or postgres://...: a fleet store, not a SQLite file.
bool is_fleet_url(std::string_view store);

// Refuses a URL libpq cannot read, or one that carries a password: the password comes from a
// file (PGPASSFILE, ~/.pgpass, `?passfile=`) or the environment (PGPASSWORD), never the config.
Result<Ok> check_fleet_url(const std::string& url);

class FleetStore : public JobReader {
 public:
  // Connects (waiting at most `connect_timeout_seconds`) and brings the schema up to date.
  static Result<std::unique_ptr<FleetStore>> open(const std::string& url,
                                                  int connect_timeout_seconds = 5);
  // For reading only (`oomtriage serve`): no migration, every transaction read-only, and a role
  // that can write is refused (what it may change in the error) unless `role_may_write`.
  static Result<std::unique_ptr<FleetStore>> open_read_only(const std::string& url,
                                                            bool role_may_write,
                                                            int connect_timeout_seconds = 5);
  ~FleetStore() override;
  FleetStore(const FleetStore&) = delete;
  FleetStore& operator=(const FleetStore&) = delete;

  Result<int> schema_version();

  // One batch of a node's outbox in one transaction. Shipping the same batch again, or an older
  // picture of a row after a newer one, leaves the store as it was.
  Result<Ok> ship(const FleetBatch& batch, const std::string& store_id, const std::string& host);

  // `jobs` and `report` see only this host's jobs when it is set.
  void set_host_filter(std::string host) { host_filter_ = std::move(host); }
  Result<std::vector<JobSummary>> find_jobs(const JobQuery& query) override;
  Result<std::optional<JobStory>> job_story_by_key(const std::string& key) override;
  Result<FleetOverview> fleet_overview(int64_t since) override;
  // What the connected role may change, in words; "" for nothing.
  Result<std::string> role_can_write();
  // Set by open_read_only when the role may write and that was allowed.
  const std::string& writer_role() const { return writer_role_; }
  // Retention (fleet: keep_days): deletes the jobs last seen before `before` (unix seconds) with
  // all their rows, `batch_size` jobs per transaction and at most `max_batches` transactions a
  // call, and then the nodes silent since then. Returns how many jobs went.
  Result<int64_t> prune(int64_t before, int batch_size = 200, int max_batches = 50);
  // A name that several hosts use is refused with their names, unless a host filter picks one.
  using JobReader::job_story;
  Result<std::optional<JobStory>> job_story(const std::string& name,
                                            const std::optional<std::string>& home) override;

 private:
  explicit FleetStore(pg_conn* conn) : conn_(conn) {}
  Result<Ok> migrate();
  Result<std::optional<JobStory>> story_of(const JobSummary& job, const std::string& store_id);

  pg_conn* conn_;
  std::string host_filter_;
  std::string writer_role_;
};

}  // namespace oomtriage::db
