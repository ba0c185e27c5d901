// bench/fleet_scale.cc: the fleet store at scale (bench/fleet_scale.sh drives it).
//
//   fleet_scale fill URL NODES JOBS EVENTS DAYS [FIRST_NODE]
//       ships NODES nodes' jobs, runs, config snapshots, events, heal attempts and GPU memory
//       through FleetStore::ship, 500 rows a batch as a daemon's shipper sends them, spread over
//       the last DAYS days; prints the rows and events shipped per second.
//   fleet_scale ship URL EVENTS
//       one node whose SQLite store holds EVENTS events not yet shipped catches up the way its
//       daemon does (fleet_batch -> ship -> fleet_shipped); prints events per second.
//   fleet_scale load HOST:PORT CLIENTS SECONDS PATH...
//       CLIENTS keep-alive clients ask for the PATHs in turn for SECONDS; prints p50 and p99 per
//       path.
#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "db/fleet_store.h"
#include "db/store.h"

using namespace oomtriage;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kPhases[] = {"train_step", "sampling", "model_load", "cache_latents",
                                   "saving"};
constexpr int kPhaseWeights[] = {55, 30, 7, 5, 3};
constexpr const char* kFamilies[] = {"flux.1",  "sdxl",   "wan2.1", "qwen-image",
                                     "z-image", "flex.1", "chroma", "wan2.2"};
constexpr const char* kTrainers[] = {"ai-toolkit", "kohya", "diffusers", "simpletuner",
                                     "onetrainer"};
constexpr const char* kFixes[] = {"gradient_checkpointing", "lower_batch", "drop_top_bucket",
                                  "cheapen_previews",       "low_vram",    "quantize_model"};

std::string event_json(const std::string& phase, int64_t step, int64_t line) {
  // A CUDA OOM as the analyzer stores it (the shape of examples/training_folder's crash).
  return nlohmann::json{
      {"kind", "cuda"},
      {"recovered", false},
      {"phase", phase},
      {"step", step},
      {"total_steps", 3000},
      {"gpu_index", 0},
      {"tried_to_allocate_bytes", 1610612736},
      {"total_capacity_bytes", 25286619955},
      {"free_bytes", 851443712},
      {"allocated_by_pytorch_bytes", 23482733691},
      {"reserved_unallocated_bytes", 316093235},
      {"this_process_in_use_bytes", 24169928458},
      {"other_processes", nlohmann::json::array()},
      {"line", line},
      {"offset", line * 80},
      {"exception", "torch.OutOfMemoryError"},
      {"message",
       "CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.55 GiB "
       "of which 812.00 MiB is free. Including non-PyTorch memory, this process has 22.51 GiB "
       "memory in use. Of the allocated memory 21.87 GiB is allocated by PyTorch, and 301.45 MiB "
       "is reserved by PyTorch but unallocated."},
      {"phase_evidence",
       {{"line", line + 20}, {"source", "frame"}, {"text", "File \"base_model.py\", line 512"}}},
      {"step_evidence",
       {{"line", line}, {"source", "bar"}, {"text", fmt::format("{}/3000 [00:20<12:00]", step)}}}}
      .dump();
}

std::string fixes_json(const std::string& top) {
  nlohmann::json fixes = nlohmann::json::array();
  int rank = 1;
  fixes.push_back(
      {{"id", top},
       {"rank", rank++},
       {"title", "The top fix"},
       {"why", "Why it is first for this phase and config."},
       {"changes", {{{"path", "config.process[0].train.batch_size"}, {"from", 2}, {"to", 1}}}},
       {"cost", "slower steps"}});
  for (const char* other : kFixes) {
    if (other == top || rank > 3) continue;
    fixes.push_back({{"id", other},
                     {"rank", rank++},
                     {"title", "Another fix"},
                     {"why", "w"},
                     {"changes", nlohmann::json::array()},
                     {"cost", "c"}});
  }
  return fixes.dump();
}

std::string config_yaml(const std::string& name, int batch, int resolution) {
  return fmt::format(
      "job: extension\nconfig:\n  name: {}\n  process:\n    - type: sd_trainer\n      "
      "training_folder: output\n      device: cuda:0\n      network:\n        type: lora\n        "
      "linear: 16\n        linear_alpha: 16\n      save:\n        dtype: float16\n        "
      "save_every: 250\n      datasets:\n        - folder_path: /data/{}\n          caption_ext: "
      "txt\n          resolution: [ 512, 768, {} ]\n      train:\n        batch_size: {}\n        "
      "steps: 3000\n        gradient_checkpointing: true\n        optimizer: adamw8bit\n        "
      "lr: 1e-4\n        dtype: bf16\n      model:\n        name_or_path: "
      "black-forest-labs/FLUX.1-dev\n        is_flux: true\n        quantize: true\n      "
      "sample:\n        sampler: flowmatch\n        sample_every: 250\n        width: 1024\n       "
      " "
      "height: 1024\n        sample_steps: 20\n",
      name, name, resolution, batch);
}

int pick(std::mt19937_64& rng, const int* weights, int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += weights[i];
  int r = static_cast<int>(rng() % static_cast<uint64_t>(total));
  for (int i = 0; i < n; ++i) {
    if ((r -= weights[i]) < 0) return i;
  }
  return n - 1;
}

int fill(const std::string& url, int nodes, int64_t jobs, int64_t events, int days,
         int first_node) {
  auto fleet = db::FleetStore::open(url);
  if (!fleet) {
    fmt::print(stderr, "fleet_scale: {}\n", fleet.error().message);
    return 1;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t span = static_cast<int64_t>(days) * 86400;
  const int64_t jobs_per_node = jobs / nodes;
  const int64_t events_per_job = std::max<int64_t>(1, events / jobs);
  int64_t rows = 0, shipped_events = 0;
  const auto start = Clock::now();
  for (int n = first_node; n < first_node + nodes; ++n) {
    std::mt19937_64 rng(static_cast<uint64_t>(n) * 7919);
    const std::string store_id = fmt::format("00000000-0000-4000-8000-{:012}", n);
    const std::string host = fmt::format("gpu-node-{:03}", n);
    // A node that stopped shipping a day ago shows on /fleet.
    const int64_t node_end = n % 25 == 7 ? now - 86400 - 3600 : now;
    db::FleetBatch batch;
    int64_t batch_rows = 0;
    int64_t seq = 0, snapshot_id = 0, run_id = 0, event_id = 0;
    const auto flush = [&](bool force) -> bool {
      if (batch_rows == 0 || (!force && batch_rows < 500)) return true;
      batch.last_seq = ++seq;
      if (auto r = (*fleet)->ship(batch, store_id, host); !r) {
        fmt::print(stderr, "fleet_scale: {}\n", r.error().message);
        return false;
      }
      rows += batch_rows;
      shipped_events += static_cast<int64_t>(batch.events.size());
      batch = {};
      batch_rows = 0;
      return true;
    };
    for (int64_t j = 1; j <= jobs_per_node; ++j) {
      const int64_t first_seen = node_end - static_cast<int64_t>(rng() % span);
      const int64_t last_seen =
          std::min(node_end, first_seen + static_cast<int64_t>(rng() % 86400));
      const std::string family = kFamilies[rng() % std::size(kFamilies)];
      const std::string name = fmt::format("{}_{}_lora_{:05}", family, n, j);
      const std::string home = fmt::format("/data/train/{}", name);
      batch.jobs.push_back(
          {j, name, home, kTrainers[rng() % std::size(kTrainers)], home, first_seen, last_seen});
      const int runs = 1 + static_cast<int>(rng() % 3);
      const bool healed = rng() % 5 == 0;
      const int outcome_roll = static_cast<int>(rng() % 100);
      std::vector<int64_t> run_ids;
      for (int r = 0; r < runs; ++r) {
        const int64_t started = first_seen + (last_seen - first_seen) * r / runs;
        const int64_t updated = first_seen + (last_seen - first_seen) * (r + 1) / runs;
        const bool last = r + 1 == runs;
        ++snapshot_id;
        batch.snapshots.push_back(
            {j,
             {snapshot_id, home + "/config.yaml", fmt::format("{:064x}", snapshot_id),
              config_yaml(name, 4 >> std::min(r, 2), 1024 - 256 * std::min(r, 2)), started}});
        ++run_id;
        run_ids.push_back(run_id);
        std::string outcome = "crashed_oom";
        if (last) {
          outcome = healed || outcome_roll < 45 ? "completed"
                    : outcome_roll < 90         ? "crashed_oom"
                    : outcome_roll < 95         ? "crashed_other"
                                                : "running";
        }
        batch.runs.push_back(
            {j, {run_id, home + "/log.txt", outcome, started, updated, snapshot_id}});
        if (healed) {
          db::HealAttempt a;
          a.run_id = run_id;
          a.attempt = r + 1;
          a.max_attempts = 3;
          a.fix_id = r == 0 ? "" : kFixes[(j + r) % std::size(kFixes)];
          a.change = r == 0 ? "" : "train.batch_size 2 -> 1";
          a.argv_json = R"(["python3","run.py","config.yaml"])";
          a.outcome = outcome;
          a.verdict = last ? (runs > 1 ? "healed" : "") : "";
          a.started_at = started;
          a.ended_at = updated;
          batch.attempts.push_back({j, a});
        }
        batch_rows += 2 + (healed ? 1 : 0);
      }
      for (int64_t e = 0; e < events_per_job; ++e) {
        const std::string phase = kPhases[pick(rng, kPhaseWeights, 5)];
        const int64_t step = phase == "train_step" || phase == "sampling"
                                 ? 250 * static_cast<int64_t>(1 + rng() % 12)
                                 : 0;
        const size_t run_index = static_cast<size_t>(e * runs / events_per_job);
        db::FleetEvent event;
        ++event_id;
        event.uuid =
            fmt::format("{:08}-{:04x}-4000-8000-{:012}", n, (event_id >> 32) & 0xffff, event_id);
        event.job_id = j;
        event.stored.id = event_id;
        event.stored.run_id = run_ids[run_index];
        event.stored.snapshot_id = run_ids[run_index];
        event.stored.event_json = event_json(phase, step, 60 + e);
        event.stored.fixes_json = fixes_json(
            phase == "sampling" ? "cheapen_previews" : kFixes[rng() % std::size(kFixes)]);
        event.stored.created_at =
            first_seen + (last_seen - first_seen) * (e + 1) / (events_per_job + 1);
        event.typed.offset = static_cast<uint64_t>(4096 * (e + 1));
        event.typed.model_family = family;
        event.typed.kind = "cuda";
        event.typed.phase = phase;
        event.typed.step = step ? std::optional<int64_t>(step) : std::nullopt;
        batch.events.push_back(std::move(event));
        ++batch_rows;
      }
      if (rng() % 10 < 3) {
        const uint64_t total = 24ull << 30;
        const uint64_t peak = total * (60 + rng() % 40) / 100;
        batch.gpu_memory.push_back(
            {j,
             {run_ids.back(), 0, total, peak, "train_step", 500, 1ull << 28,
              R"({"version":1,"gpu":0,"points":[]})", last_seen, std::nullopt, true}});
        ++batch_rows;
      }
      if (!flush(false)) return 1;
    }
    if (!flush(true)) return 1;
    fmt::print(stderr, "\rnode {} of {}: {} rows", n - first_node + 1, nodes, rows);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print(stderr, "\n");
  fmt::print("filled {} rows ({} events) in {:.1f} s: {:.0f} rows/s, {:.0f} events/s\n", rows,
             shipped_events, seconds, rows / seconds, shipped_events / seconds);
  return 0;
}

int ship(const std::string& url, int64_t events) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("fleet-ship-{}", ::getpid());
  fs::create_directories(dir);
  auto store = db::Store::open((dir / "oomtriage.db").string());
  if (!store || !(*store)->set_fleet_outbox(url)) {
    fmt::print(stderr, "fleet_scale: cannot make the node's store\n");
    return 1;
  }
  // The backlog: events across 500 jobs, as a node that was cut off from the fleet store for a
  // while has them.
  const int64_t now = 1'790'000'000;
  constexpr int kJobs = 500;
  const int64_t per_job = std::max<int64_t>(1, events / kJobs);
  for (int j = 0; j < kJobs; ++j) {
    const std::string name = fmt::format("backlog_{:03}", j);
    const int64_t job = *(*store)->upsert_job(name, "/out/" + name, "ai-toolkit", "/out", now);
    const int64_t run = *(*store)->start_run(job, "/out/" + name + "/log.txt", std::nullopt, now);
    db::FileRow file;
    file.path = "/out/" + name + "/log.txt";
    file.dev = 1;
    file.ino = static_cast<uint64_t>(j + 1);
    file.job_id = job;
    file.run_id = run;
    db::Progress progress;
    progress.file_id = *(*store)->insert_file(file, now);
    progress.job_id = job;
    progress.run_id = run;
    progress.outcome = "crashed_oom";
    for (int64_t e = 0; e < per_job; ++e) {
      db::EventRow row;
      row.offset = static_cast<uint64_t>(e + 1) * 4096;
      row.kind = "cuda";
      row.phase = kPhases[e % 5];
      row.model_family = "flux.1";
      row.step = 250 * (e + 1);
      row.event_json = event_json(row.phase, *row.step, 60 + e);
      row.fixes_json = fixes_json("lower_batch");
      progress.events.push_back(std::move(row));
    }
    progress.offset = static_cast<uint64_t>(per_job + 1) * 4096;
    if (!(*store)->commit_progress(progress, now)) return 1;
  }
  auto fleet = db::FleetStore::open(url);
  if (!fleet) {
    fmt::print(stderr, "fleet_scale: {}\n", fleet.error().message);
    return 1;
  }
  const std::string id = *(*store)->store_id();
  const int64_t backlog = *(*store)->fleet_backlog();
  int64_t shipped = 0;
  const auto start = Clock::now();
  for (;;) {
    auto batch = (*store)->fleet_batch(500);
    if (!batch) return 1;
    if (batch->empty()) break;
    shipped += static_cast<int64_t>(batch->events.size());
    if (auto r = (*fleet)->ship(*batch, id, "backlog-node"); !r) {
      fmt::print(stderr, "fleet_scale: {}\n", r.error().message);
      return 1;
    }
    if (!(*store)->fleet_shipped(batch->last_seq)) return 1;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print("shipped a backlog of {} rows ({} events) in {:.1f} s: {:.0f} events/s\n", backlog,
             shipped, seconds, shipped / seconds);
  fs::remove_all(dir);
  return 0;
}

int load(const std::string& address, int clients, double seconds,
         const std::vector<std::string>& paths) {
  namespace asio = boost::asio;
  namespace http = boost::beast::http;
  const size_t colon = address.rfind(':');
  const asio::ip::tcp::endpoint endpoint(
      asio::ip::make_address(address.substr(0, colon)),
      static_cast<unsigned short>(std::stoi(address.substr(colon + 1))));
  std::mutex mutex;
  std::map<std::string, std::vector<double>> latencies;
  std::atomic<int64_t> failures{0};
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      asio::io_context io;
      std::map<std::string, std::vector<double>> mine;
      std::optional<boost::beast::tcp_stream> stream;
      for (size_t i = static_cast<size_t>(c); Clock::now() < deadline; ++i) {
        const std::string& path = paths[i % paths.size()];
        try {
          if (!stream) {
            stream.emplace(io);
            stream->connect(endpoint);
          }
          http::request<http::empty_body> req{http::verb::get, path, 11};
          req.set(http::field::host, address);
          req.keep_alive(true);
          const auto begin = Clock::now();
          http::write(*stream, req);
          boost::beast::flat_buffer buffer;
          http::response<http::string_body> res;
          http::read(*stream, buffer, res);
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
          if (res.result() != http::status::ok) ++failures;
          mine[path].push_back(ms);
          if (!res.keep_alive()) stream.reset();
        } catch (const std::exception&) {
          ++failures;
          stream.reset();
        }
      }
      std::lock_guard lock(mutex);
      for (auto& [path, values] : mine)
        latencies[path].insert(latencies[path].end(), values.begin(), values.end());
    });
  }
  for (auto& t : threads) t.join();
  int64_t total = 0;
  for (auto& entry : latencies) {
    const std::string& path = entry.first;
    std::vector<double>& values = entry.second;
    std::sort(values.begin(), values.end());
    const auto at = [&values](double q) {
      return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
    };
    total += static_cast<int64_t>(values.size());
    fmt::print("{:<48} n={:<6} p50={:7.1f} ms  p99={:7.1f} ms  max={:7.1f} ms\n", path,
               values.size(), at(0.50), at(0.99), values.back());
  }
  fmt::print("{} clients, {:.0f} s: {} requests ({:.0f}/s), {} failed\n", clients, seconds, total,
             total / seconds, failures.load());
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 6 && args[0] == "fill") {
    return fill(args[1], std::stoi(args[2]), std::stoll(args[3]), std::stoll(args[4]),
                std::stoi(args[5]), args.size() > 6 ? std::stoi(args[6]) : 0);
  }
  if (args.size() == 3 && args[0] == "ship") return ship(args[1], std::stoll(args[2]));
  if (args.size() >= 5 && args[0] == "load") {
    return load(args[1], std::stoi(args[2]), std::stod(args[3]),
                std::vector<std::string>(args.begin() + 4, args.end()));
  }
  fmt::print(stderr,
             "usage: fleet_scale fill URL NODES JOBS EVENTS DAYS [FIRST_NODE] | ship URL EVENTS | "
             "load HOST:PORT CLIENTS SECONDS PATH...\n");
  return 1;
}
