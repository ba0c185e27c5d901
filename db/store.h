// db/store.h
//
// The daemon's SQLite store: jobs, runs of a job, config snapshots, watched files with the offset
// of their last complete record and the analyzer state to resume from, OOM events, and the alert
// outbox. WAL mode with a busy timeout, so `oomtriage jobs` and `report` read while the daemon
// writes; schema versioned with PRAGMA user_version; prepared statements only. A file's progress,
// its new events and their outbox rows commit in one transaction, and an event is unique per
// (file, offset), so a restart after kill -9 stores every event exactly once. Nothing above db/
// writes SQL.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "db/store_identity.h"
#include "parsers/result.h"

struct sqlite3;

namespace oomtriage::db {

struct FileRow {
  int64_t id = 0;
  std::string path;
  uint64_t dev = 0;
  uint64_t ino = 0;
  std::string fingerprint;  // sha256 of the file's first KiB; "" until a KiB exists
  int64_t fingerprint_len = 0;
  std::string anchor;      // sha256 of the bytes just before `offset` ("" at 0)
  int64_t generation = 0;  // bumped when the file is truncated in place (copytruncate)
  uint64_t offset = 0;     // start of the first record not yet fully analysed
  int64_t line = 1;        // the line number at `offset`
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::string analyzer_state = "{}";
  // Present at the daemon's first start and begun at its end: the bytes not read.
  uint64_t skipped_bytes = 0;
};

struct EventRow {
  uint64_t offset = 0;
  std::string model_family = "unknown";
  std::string kind;
  std::string phase;
  std::optional<int64_t> step;
  bool recovered = false;
  std::string event_json;
  std::string fixes_json;
  // Above 0: an amendment of the event stored at this offset (parsers/event.h OomEvent::revision).
  int64_t revision = 0;
  // Found again in a log read from its start because a store recovery lost its offset: its alert
  // says it may have been sent before (db/store_recovery.h).
  bool resent = false;
  std::string journal;  // the daemon's journal line for it, written once stored (not stored)
};

// Everything that one read of one file produced, committed atomically.
struct Progress {
  int64_t file_id = 0;
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::optional<int64_t> snapshot_id;
  int64_t generation = 0;
  uint64_t offset = 0;
  int64_t line = 1;
  std::string analyzer_state;
  std::string anchor;                                          // of `offset`
  std::optional<std::pair<std::string, int64_t>> fingerprint;  // set once the first KiB exists
  std::string outcome;  // the run's outcome; empty: keep the stored one
  std::vector<EventRow> events;
  std::vector<std::string> receivers;  // an outbox row per event and receiver
};

// What a run is doing now (issue 47, "live"), as the daemon last read its log: the training
// bar's position, rate and loss, the phase, and when the log last grew. Stored on the run.
struct LiveState {
  std::optional<int64_t> step;
  std::optional<int64_t> total_steps;
  std::optional<double> steps_per_second;  // the training bar's rate (1.40 s/it is 0.714)
  std::optional<double> loss;              // the newest loss the bar or a step line showed
  std::string phase;                       // parsers::to_string(Phase); "" before any
  int64_t last_write = 0;                  // unix seconds the log last grew (its mtime); 0: unknown
  std::string last_line;  // the log's last complete line, cleaned, at most 200 bytes
  // While the run is stalled (its log silent past the daemon's stalled_after_seconds): since
  // when, unix seconds (its last_write). Cleared when the log grows.
  std::optional<int64_t> stalled_since;

  // The time left at the bar's rate, from the last write; nullopt without a rate and a total.
  std::optional<int64_t> eta_seconds() const {
    if (!step || !total_steps || !steps_per_second || *steps_per_second <= 0) return {};
    if (*step >= *total_steps) return int64_t{0};
    const double left = static_cast<double>(*total_steps - *step) / *steps_per_second;
    if (!(left < 1e12)) return {};  // a rate a log got wrong: no time left, not an overflow
    return static_cast<int64_t>(left);
  }
  bool empty() const { return !step && !total_steps && phase.empty() && last_write == 0; }
};

struct JobSummary {
  int64_t id = 0;
  // What names the job in a URL (`oomtriage serve`'s /job/<key>): its id in a node's store,
  // "<store id>.<id>" in the fleet store.
  std::string key;
  std::string host;  // the node that stored it: set by the fleet store, "" in a node's own
  std::string name;
  // The folder that tells this job from another of the same name (the log's folder); "" where
  // the name alone does (container logs, named by namespace and owner).
  std::string home;
  std::string trainer;
  std::string log_dir;
  std::string outcome;  // of the newest run
  int64_t runs = 0;
  int64_t events = 0;
  int64_t last_seen = 0;
  // The newest event's phase, step and top fix ("", nullopt, "" without one).
  std::string last_phase;
  std::optional<int64_t> last_step;
  std::string top_fix;
  // The newest run's highest GPU memory on one card, and that card's size, when it was sampled.
  std::optional<uint64_t> gpu_peak_bytes;
  std::optional<uint64_t> gpu_total_bytes;
  // One name for each family (issue 45): the newest event's model family as stored ("flux.1"),
  // "" without one; parsers/family_names.h gives its display name.
  std::string family;
  // The newest run's live state (issue 47).
  LiveState live;
  // Warnings that stay with the job: a pre-flight check of its current config predicted an OOM,
  // and a near-OOM warning went out for its newest run.
  bool predicted_oom = false;
  bool near_oom = false;

  // What a person reads as the job's state: the newest run's outcome, or "stalled" while a
  // running run's log has been silent too long.
  std::string status() const {
    return outcome == "running" && live.stalled_since ? "stalled" : outcome;
  }
};

struct RunRow {
  int64_t id = 0;
  std::string log_path;
  std::string outcome;
  int64_t started_at = 0;
  int64_t updated_at = 0;
  std::optional<int64_t> snapshot_id;
};

struct SnapshotRow {
  int64_t id = 0;
  std::string path;
  std::string sha256;
  std::string content;
  int64_t seen_at = 0;
};

struct StoredEvent {
  int64_t id = 0;
  int64_t run_id = 0;
  std::optional<int64_t> snapshot_id;
  std::string event_json;
  std::string fixes_json;
  int64_t created_at = 0;
};

// One pending alert: an outbox row with what is needed to write the message.
struct OutboxItem {
  int64_t id = 0;
  int64_t event_id = 0;
  std::string event_uuid;  // the event's own UUID: its alerts' key, unique whatever the store
                           // goes through (docs/alerts.md "Ids")
  std::string receiver;
  int64_t attempts = 0;
  int64_t created_at = 0;       // the event's
  int64_t next_attempt_at = 0;  // wall clock, for people and restarts (the dispatcher waits on
                                // its own steady clock)
  std::string job;
  std::string trainer;
  std::string model_family;
  std::string log_path;
  bool recovered = false;
  std::string event_json;
  std::string fixes_json;
  int64_t revision = 0;  // above 0: an update of an alert delivered before (the event amended)
  bool resent = false;   // the event was found again after a store recovery (EventRow::resent)
};

// An outbox row as `oomtriage alerts` lists it.
struct AlertRow {
  int64_t id = 0;
  std::string receiver;
  std::string state;  // pending | delivered | failed
  int64_t attempts = 0;
  int64_t next_attempt_at = 0;
  std::string last_error;
  std::string job;
  int64_t created_at = 0;  // the event's
  std::string event_json;
};

// A warning that stays with its job (issue 47): a pre-flight check that predicted an OOM, a
// near-OOM warning, a stall. Resolved when it no longer holds (a config that fits, the log
// growing again); `alerts` lists them beside the outbox.
struct WarningRow {
  int64_t id = 0;
  int64_t job_id = 0;
  std::optional<int64_t> run_id;
  std::string kind;     // predicted_oom | near_oom | stalled
  std::string summary;  // what the alert said, on one line
  int64_t created_at = 0;
  std::optional<int64_t> resolved_at;
  std::string job;  // the job's name (read only)
};

// A fix `oomtriage fix --write` applied to a job's config for one crash.
struct AppliedFix {
  std::string log_path;  // absolute
  uint64_t event_offset = 0;
  std::string fix_id;
  std::string config_path;
  std::string sha256_before;
  std::string sha256_after;
  std::string fix_json;  // the fix as `scan --json` shows it
  int64_t applied_at = 0;
};

// One attempt of `oomtriage run`, and so one run of its job.
struct HealAttempt {
  int64_t run_id = 0;
  int attempt = 1;
  int max_attempts = 1;
  std::string fix_id;                   // the fix applied before this attempt ("" for the first)
  std::string change;                   // that fix's changes in words ("sample.width 1024 -> 768")
  std::string argv_json;                // the command, a JSON array
  std::optional<int64_t> resumed_step;  // where its training bar started
  std::string outcome;                  // the run's outcome, or did_not_resume / interrupted
  std::string verdict;  // on the attempt that ended the run: healed, exhausted, stopped: <why>
  int64_t started_at = 0;
  int64_t ended_at = 0;
};

// One run's GPU memory on one card (db/store_gpu_memory.cc; triage/gpu_timeline.h).
struct GpuMemoryRow {
  int64_t run_id = 0;
  unsigned gpu = 0;
  uint64_t total_bytes = 0;
  uint64_t peak_bytes = 0;  // the run's own processes
  std::string peak_phase;   // parsers::to_string(Phase)
  std::optional<int64_t> peak_step;
  uint64_t others_peak_bytes = 0;  // other processes on the card, at most
  std::string timeline_json;       // GpuTimeline::to_json()
  int64_t updated_at = 0;
  std::optional<uint64_t> warned_bytes;  // a near-OOM warning went out at this memory
  // Sampled from before its first step (GpuTimeline::from_start): the peak is the run's.
  bool from_start = false;
};
struct JobStory {
  JobSummary job;
  std::vector<RunRow> runs;
  std::vector<SnapshotRow> snapshots;
  std::vector<StoredEvent> events;
  std::vector<HealAttempt> attempts;
  std::vector<GpuMemoryRow> gpu_memory;  // its runs', oldest run first
  std::vector<WarningRow> warnings;      // newest first
  // A log of the job the daemon began at its end (first start, no backfill); not in fleet stores.
  std::optional<std::string> unread_log;
};

// Rows changed since they were last shipped to the fleet store (db/fleet_store.h), read from the
// node's fleet outbox: whole rows as they are now, parents before children.
struct FleetJob {
  int64_t id = 0;
  std::string name, home, trainer, log_dir;
  int64_t first_seen = 0, last_seen = 0;
};
struct FleetEvent {
  std::string uuid;  // made by the node when the event was stored: the fleet store's key
  int64_t job_id = 0;
  StoredEvent stored;
  EventRow typed;  // its event_json and fixes_json stay in `stored`
};
struct FleetBatch {
  int64_t last_seq = 0;  // the newest outbox entry this batch covers
  std::vector<FleetJob> jobs;
  std::vector<std::pair<int64_t, SnapshotRow>> snapshots;  // (job id, row)
  std::vector<std::pair<int64_t, RunRow>> runs;            // (job id, row)
  std::vector<FleetEvent> events;
  std::vector<std::pair<int64_t, HealAttempt>> attempts;     // (job id, row)
  std::vector<std::pair<int64_t, GpuMemoryRow>> gpu_memory;  // (job id, row)
  bool empty() const { return last_seq == 0; }
};

// A job's config as the pre-flight check judged it on a card of `card_bytes` (triage/preflight.h).
struct PreflightCheck {
  int64_t job_id = 0;
  std::string config_sha256;
  uint64_t card_bytes = 0;
  std::string family;   // the memory model's architecture row ("flux1-dev")
  std::string verdict;  // fits | tight | will_not_fit
  std::string phase;    // the first phase over the usable memory, "" when it fits
  uint64_t peak_bytes = 0;
  uint64_t usable_bytes = 0;
  bool alerted = false;  // a TrainingOOMPredicted alert went out for it
};

// One finished run (completed or crashed_oom) with the config it ran: what the fleet's memory
// correction learns from (triage/fleet_correction.h).
struct FleetHistoryRow {
  int64_t run_id = 0;
  std::string outcome;
  std::string config_path;             // the snapshot's: its extension says the format
  std::string config_content;          // the snapshot's
  std::string oom_event_json;          // the run's first fatal OOM, "" without one
  std::optional<uint64_t> card_bytes;  // the card its pre-flight check judged against, or sampled
  // Its highest GPU memory on one card, when it was sampled from its start.
  std::optional<uint64_t> measured_peak;
};

// Which jobs to list, newest first. Every filter left empty matches any job.
struct JobQuery {
  std::string host;     // a fleet store's node
  std::string outcome;  // the newest run's
  std::string phase;    // the newest event's
  std::string trainer;
  std::string family;              // the newest event's model family
  std::string text;                // found in the name, in any case
  std::vector<std::string> names;  // exactly one of these names
  std::optional<int64_t> since;    // last seen at or after (unix seconds)
  size_t limit = 0;                // 0 for all
  size_t offset = 0;
  // Jobs with an OOM event stored at or after oom_from and before oom_until (unix seconds; either
  // may be open), the events /fleet counts per day (fleet_overview()); then `phase` and `family`
  // pick such an event rather than the newest.
  std::optional<int64_t> oom_from;
  std::optional<int64_t> oom_until;
  bool oom_window() const { return oom_from.has_value() || oom_until.has_value(); }
};

// The fleet at a glance (`oomtriage serve`'s /fleet), over the events since a time.
struct DayCount {
  std::string day;  // "2026-12-01", UTC
  std::string key;  // the phase, or the model family
  int64_t count = 0;
};
struct FixHeals {
  std::string fix_id;
  int64_t jobs = 0;  // jobs whose healing `oomtriage run` attempt applied it
};
struct NodeSeen {
  std::string host;
  int64_t last_shipped = 0;  // unix seconds; a node's own store: its newest job's last sighting
  int64_t jobs = 0;
};
struct NearLimit {  // a job's newest sampled run, by its peak's share of the card
  std::string key, name, host, phase;
  uint64_t peak_bytes = 0;
  uint64_t total_bytes = 0;
  int64_t updated_at = 0;
};
struct FleetOverview {
  std::vector<DayCount> by_phase;
  std::vector<DayCount> by_family;
  std::vector<FixHeals> healed_by;    // most jobs first
  std::vector<NodeSeen> nodes;        // quietest first
  std::vector<NearLimit> near_limit;  // closest first, at most 20
};

// What `oomtriage jobs`, `report` and `serve` read: a node's own store or the fleet store.
class JobReader {
 public:
  virtual ~JobReader() = default;
  // Every job, newest first.
  Result<std::vector<JobSummary>> list_jobs() { return find_jobs(JobQuery{}); }
  virtual Result<std::vector<JobSummary>> find_jobs(const JobQuery& query) = 0;
  // The job JobSummary::key names; nullopt when there is none.
  virtual Result<std::optional<JobStory>> job_story_by_key(const std::string& key) = 0;
  virtual Result<FleetOverview> fleet_overview(int64_t since) = 0;
  // The job named `name` in the folder `home`, or with any home: then a name that two jobs
  // share is an error naming their folders.
  virtual Result<std::optional<JobStory>> job_story(const std::string& name,
                                                    const std::optional<std::string>& home) = 0;
  Result<std::optional<JobStory>> job_story(const std::string& name) {
    return job_story(name, std::nullopt);
  }
};

class StatementCache;

// How a read-only Store reads (Store::open_read_only).
enum class ReadOnly {
  // Open for long (`serve`'s pool): reads the daemon's WAL as it grows; SQLite makes the -wal and
  // -shm beside the store when no writer has (and fails where it may not).
  kFollowWriter,
  // One command's reads (`jobs`, `report`, `check`, `alerts`, `scan`): a store that no writer
  // has open (no -wal beside it) is read as the file stands, and nothing is made beside it.
  kOneCommand,
};

class Store : public JobReader {
 public:
  // Opens (creating and migrating) the store at `path`. `busy_timeout_ms` bounds how long a
  // reader or writer waits for the other.
  static Result<std::unique_ptr<Store>> open(const std::string& path, int busy_timeout_ms = 5000);
  // Opens an existing store for reading only (SQLITE_OPEN_READONLY and query_only): nothing
  // made, migrated or written, no journal mode set, so a user who may read the store but not
  // write it reads it. A store of another schema version is refused in one line naming the file
  // (one older than this oomtriage is migrated by the daemon, or any command that writes it).
  static Result<std::unique_ptr<Store>> open_read_only(const std::string& path,
                                                       ReadOnly mode = ReadOnly::kFollowWriter,
                                                       int busy_timeout_ms = 5000);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version() const;

  // SQLite checkpoints the WAL into the database in the committing thread once the WAL holds
  // `pages` pages, with an fsync or two: tens of milliseconds on a slow disk. The daemon's loop
  // raises this to a safety net and checkpoints on its own thread (checkpoint_wal).
  Result<Ok> set_auto_checkpoint(int pages);
  // Copies what it can of the WAL into the database without waiting for readers or writers.
  Result<Ok> checkpoint_wal();

  // The job named `name` whose home is `home` (see JobSummary), made if new. A job stored before
  // jobs had homes (home "") is taken as this one's the first time its name is seen again.
  Result<int64_t> upsert_job(const std::string& name, const std::string& home,
                             const std::string& trainer, const std::string& log_dir, int64_t now);
  // A new snapshot only when the hash changes; returns the snapshot's id either way.
  Result<int64_t> add_config_snapshot(int64_t job_id, const std::string& path,
                                      const std::string& sha256, const std::string& content,
                                      int64_t now);
  Result<int64_t> start_run(int64_t job_id, const std::string& log_path,
                            std::optional<int64_t> snapshot_id, int64_t now);
  Result<std::optional<FileRow>> find_file(uint64_t dev, uint64_t ino);
  Result<int64_t> insert_file(const FileRow& file, int64_t now);
  Result<Ok> set_file_state(int64_t file_id, const std::string& state, int64_t now);
  // Files still marked active (followed when the daemon last ran).
  Result<std::vector<FileRow>> active_files();
  // Offsets, events and outbox rows in one transaction. Returns the number of new events plus
  // the amendments (EventRow::revision) that queued an update alert: what the alerts must send.
  // An amendment updates its stored event when its revision is higher; the outbox rows that had
  // delivered it go out again, as an update, only when its top fix changed.
  Result<int64_t> commit_progress(const Progress& progress, int64_t now);
  // Several files' progress in one transaction (the daemon's once-a-second checkpoint).
  Result<int64_t> commit_progress(const std::vector<Progress>& batch, int64_t now);

  Result<std::vector<JobSummary>> find_jobs(const JobQuery& query) override;
  Result<std::optional<JobStory>> job_story_by_key(const std::string& key) override;
  Result<FleetOverview> fleet_overview(int64_t since) override;
  using JobReader::job_story;
  Result<std::optional<JobStory>> job_story(const std::string& name,
                                            const std::optional<std::string>& home) override;
  Result<std::optional<JobStory>> job_story_by_id(int64_t job_id);
  Result<int64_t> count_events();
  // The story of the job whose newest run reads `log_path` (absolute), if any.
  Result<std::optional<JobStory>> job_story_of_log(const std::string& log_path);
  Result<Ok> record_applied_fix(const AppliedFix& fix);
  // Inserts the attempt, or updates its outcome, verdict and end when its run has one.
  Result<Ok> record_heal_attempt(int64_t job_id, const HealAttempt& attempt);
  // Facts about the store itself ("first_scan_done").
  Result<std::optional<std::string>> meta(const std::string& key);
  Result<Ok> set_meta(const std::string& key, const std::string& value);
  Result<std::vector<AppliedFix>> applied_fixes(const std::string& log_path, uint64_t event_offset);

  // Records a pre-flight check; false when one of the same job, config and card is already
  // stored (then nothing changes: it was checked, and alerted if it had to be, before).
  Result<bool> record_preflight(const PreflightCheck& check, int64_t now);
  Result<bool> preflight_checked(int64_t job_id, const std::string& config_sha256,
                                 uint64_t card_bytes);
  // Writes a run's memory on one card (replacing what was stored for that run and card).
  Result<Ok> record_gpu_memory(const GpuMemoryRow& row);
  // The job's runs' GPU memory, oldest run first.
  Result<std::vector<GpuMemoryRow>> gpu_memory_of_job(int64_t job_id);
  Result<std::vector<GpuMemoryRow>> gpu_memory_of_run(int64_t run_id);
  // The newest `limit` finished runs that have a config snapshot, newest first.
  Result<std::vector<FleetHistoryRow>> fleet_history(int limit);

  // Live state (db/store_live.cc): each run's row replaced, all in one transaction.
  Result<Ok> record_live(const std::vector<std::pair<int64_t, LiveState>>& runs, int64_t now);
  Result<std::optional<LiveState>> live_of_run(int64_t run_id);
  // Warnings that stay: stored (a warning with a run and no job is its run's job's), resolved
  // (every open one of the job and kind; returns how many), listed newest first (one job's, or
  // every job's).
  Result<int64_t> record_warning(const WarningRow& warning);
  Result<int64_t> resolve_warnings(int64_t job_id, const std::string& kind, int64_t now);
  Result<std::vector<WarningRow>> list_warnings(std::optional<int64_t> job_id, int limit);

  // Pending outbox rows of `receiver` due at `now`, oldest first.
  Result<std::vector<OutboxItem>> due_alerts(const std::string& receiver, int64_t now, int limit);
  // state: delivered | pending (retry at next_attempt_at) | failed.
  Result<Ok> mark_alerts(const std::vector<int64_t>& ids, const std::string& state,
                         int64_t attempts, int64_t next_attempt_at, const std::string& error);
  Result<int64_t> count_alerts(const std::string& state);
  // Outbox rows in `state` ("" for any), newest first.
  Result<std::vector<AlertRow>> list_alerts(const std::string& state, int limit);
  // Makes a row pending again, due now, with its attempts reset; false when there is no such id.
  Result<bool> resend_alert(int64_t id, int64_t now);

  // The fleet outbox for `target` (the fleet store's URL; "" for none). Triggers queue every
  // new or changed job, snapshot, event and heal attempt, and a run when its outcome or config
  // changes (else at most once a minute: a busy run is updated every second), while it is on.
  // Turning it on for a target it was not on for queues what the store already holds, so a node
  // that joins a fleet late, or moves to another, ships its past too. Off clears it.
  Result<Ok> set_fleet_outbox(const std::string& target);
  // This store's own id (a UUID made when the store was created, and anew when it is recovered,
  // db/store_recovery.h): the fleet store keys a node's rows by it, so two daemons on one host,
  // or a store made anew, never mix their ids.
  Result<std::string> store_id();
  // Its id and highest event and file ids: what the state dir keeps (db/store_identity.h).
  Result<StorePosition> position();
  // The oldest `limit` outbox entries as their rows are now.
  Result<FleetBatch> fleet_batch(int limit);
  // Forgets the entries up to `seq` once the fleet store has committed them. A row changed
  // after fleet_batch() read it was queued again with a newer seq and stays.
  Result<Ok> fleet_shipped(int64_t seq);
  Result<int64_t> fleet_backlog();

 private:
  explicit Store(sqlite3* db);
  Result<Ok> exec(const char* sql);
  Result<Ok> migrate();
  Result<int64_t> write_progress(const Progress& progress, int64_t now);
  // An amendment: std::nullopt when no event is stored at its offset yet (insert it), else how
  // many delivered alerts it queued again.
  Result<std::optional<int64_t>> amend_event(const Progress& progress, const EventRow& event,
                                             int64_t now);  // inside a transaction
  Result<std::optional<JobStory>> story_of(const JobSummary& job);

  sqlite3* db_;
  std::unique_ptr<StatementCache> statements_;
};

}  // namespace oomtriage::db
