// db/fleet_store_reads.cc: the fleet store's read side, what `oomtriage jobs`, `report` and
// `serve` see: the jobs list with its filters, one job's story (by name or by key), and the fleet
// at a glance. Every value is a parameter ($1...), sent as text; nothing is built from strings
// with values.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "db/fleet_store.h"
#include "db/fleet_store_internal.h"
#include "db/libpq.h"

namespace oomtriage::db {
namespace {

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

// A job's line in `jobs`, the same figures as the SQLite store counts, over the jobs in `from`.
std::string job_summary_select(std::string_view from = "oomtriage.jobs j") {
  return "SELECT j.id, j.name, j.trainer, j.log_dir, extract(epoch FROM j.last_seen)::bigint, "
         "j.run_count, j.event_count, j.outcome, j.host, j.store_id::text, COALESCE(j.phase, ''), "
         "j.step, j.home, j.gpu_peak_bytes, j.gpu_total_bytes, COALESCE(j.top_fix, ''), "
         "COALESCE(j.model_family, '') FROM " +
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
  job.family = text_at(r, row, 16);
  return job;
}

}  // namespace

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
          "outcome = $2) AND ($3 = '' OR $11::bigint IS NOT NULL OR phase = $3) AND ($4 = '' OR "
          "trainer = $4) AND ($5 = '' OR $11::bigint IS NOT NULL OR model_family = $5) AND ($6 = "
          "'' OR lower(name) LIKE lower($6)) AND ($7 = '{}' OR name = ANY($7::text[])) AND "
          "($8::bigint IS NULL OR last_seen >= to_timestamp($8)) "
          // An OOM in the days asked, counted as fleet_overview() counts them: then phase and
          // family pick that event, not the newest.
          "AND ($11::bigint IS NULL OR EXISTS (SELECT 1 FROM oomtriage.events e WHERE e.store_id "
          "= jobs.store_id AND e.job_id = jobs.id AND e.created_at >= to_timestamp($11) AND "
          "($12::bigint IS NULL OR e.created_at < to_timestamp($12)) AND ($3 = '' OR e.phase = "
          "$3) AND ($5 = '' OR e.model_family = $5))) "
          "ORDER BY last_seen DESC, host, store_id, id DESC LIMIT $9 OFFSET $10) j") +
      "ORDER BY j.last_seen DESC, j.host, j.store_id, j.id DESC";
  auto r = c.run(
      sql.c_str(),
      {pg_text(host), pg_text(query.outcome), pg_text(query.phase), pg_text(query.trainer),
       pg_text(query.family), like_pattern(query.text), names, number(query.since),
       query.limit ? std::optional<std::string>(std::to_string(query.limit)) : std::nullopt,
       std::to_string(query.offset),
       query.oom_window() ? std::optional<std::string>(std::to_string(query.oom_from.value_or(0)))
                          : std::nullopt,
       number(query.oom_until)});
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

}  // namespace oomtriage::db
