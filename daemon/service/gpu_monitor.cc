// daemon/service/gpu_monitor.cc: the sampling turn, each process's run, the timelines' writes
// and the near-OOM warning.
#include "daemon/service/gpu_monitor.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "daemon/common/clock.h"
#include "daemon/service/store_failures.h"

namespace oomtriage::daemon {

GpuMonitor::GpuMonitor(boost::asio::io_context& io, db::Store& store, Metrics& metrics,
                       std::function<int64_t()> wall_clock, Runs runs,
                       std::function<void(AlertContent)> warn,
                       std::function<void(const std::string&)> say, LoopClock& clock,
                       std::string proc)
    : io_(io),
      store_(store),
      metrics_(metrics),
      wall_clock_(std::move(wall_clock)),
      runs_(std::move(runs)),
      warn_(std::move(warn)),
      say_(std::move(say)),
      health_(say_),
      attribution_(std::move(proc)),
      clock_(clock),
      timer_(clock.timer(io)) {
  std::error_code ec;
  self_exe_ = std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

GpuMonitor::~GpuMonitor() {
  timer_->cancel();
  worker_.reset();  // no `ready` after this
  alive_.reset();
}

void GpuMonitor::start(std::chrono::milliseconds interval, double near_oom_share,
                       std::unique_ptr<NvmlSampler> sampler, std::chrono::milliseconds deadline) {
  interval_ = interval;
  share_ = near_oom_share;
  timer_->cancel();
  if (interval_.count() <= 0) {
    worker_.reset();
    metrics_.job_gpu_memory.clear();
    metrics_.gpu_other_memory.clear();
    metrics_.gpu_not_answering.clear();
    return;
  }
  if (!worker_ || sampler) {
    // NVML is opened on the worker's thread too: a wedged driver holds nvmlInit_v2 as well.
    GpuSampleWorker::Open open;
    if (sampler) {
      open = [given = std::make_shared<std::unique_ptr<NvmlSampler>>(std::move(sampler))] {
        return Result<std::unique_ptr<NvmlSampler>>(std::move(*given));
      };
    }
    const auto ready = [this, alive = std::weak_ptr<int>(alive_)] {
      boost::asio::post(io_, [this, alive] {
        if (alive.lock() && worker_) on_ready();
      });
    };
    announced_ = false;
    worker_ = std::make_unique<GpuSampleWorker>(ready, std::move(open), deadline);
  }
  // A reload may change the share; what was warned stays warned.
  for (auto& [run_id, state] : states_) {
    state.watch = triage::NearOomWatch(share_);
    uint64_t warned = 0;
    for (const auto& [gpu, bytes] : state.warned_bytes) warned = std::max(warned, bytes);
    if (warned > 0) state.watch.restore(warned);
  }
  arm();
}

void GpuMonitor::stop() {
  timer_->cancel();
  for (auto& [run_id, state] : states_) {
    if (state.dirty) store(run_id, state);
  }
}

void GpuMonitor::arm() {
  const auto wait = fast_ ? std::max(interval_ / 5, std::chrono::milliseconds(50)) : interval_;
  timer_->expires_after(wait);
  timer_->async_wait([this](const boost::system::error_code& error) {
    // A turn already due when a reload turned sampling off must not arm again.
    if (error || !worker_ || interval_.count() <= 0) return;
    turn();
    arm();
  });
}

void GpuMonitor::on_ready() {
  if (!announced_) {
    const GpuSampleWorker::Opened opened = worker_->opened();
    if (!opened.done) return;
    announced_ = true;
    if (!opened.error.empty()) {
      if (!said_unavailable_) {
        say_(fmt::format("no GPU memory timeline: {}", opened.error));
        said_unavailable_ = true;
      }
      if (health_.answered(wall_clock_())) metrics_.gpu_not_answering.clear();
      worker_.reset();
      timer_->cancel();
      return;
    }
    say_(fmt::format(
        "sampling the memory of {} GPU(s) every {} ms ({})", opened.device_count, interval_.count(),
        opened.process_query.empty() ? "no per-process query: cards only" : opened.process_query));
  }
  if (auto cards = worker_->take()) {
    sampled(*cards);
  } else if (health_.answered(wall_clock_())) {
    metrics_.gpu_not_answering.clear();
  }
}

void GpuMonitor::turn() {
  if (worker_->request()) return;
  const auto stuck = worker_->stuck();
  if (stuck && health_.not_answering(*stuck, wall_clock_())) {
    metrics_.gpu_not_answering[stuck->gpu.value_or(0)] = 1;
    ++metrics_.gpu_stalls;
  }
}

std::optional<int64_t> GpuMonitor::owner_of(pid_t pid, const std::vector<SampledRun>& runs,
                                            const std::vector<JobFiles>& files, int64_t runs_seen) {
  const auto now = clock_.now();
  const auto present = [&](int64_t run_id) {
    return std::any_of(runs.begin(), runs.end(),
                       [&](const SampledRun& run) { return run.run_id == run_id; });
  };
  // One read of /proc/PID/stat a sample tells the process that held the pid at the last sample
  // from one that got it since (within one interval, a pid freed and handed out again).
  const std::optional<uint64_t> started = attribution_.start_time(pid);
  if (const auto known = owners_.find(pid);
      known != owners_.end() && started && known->second.started == started) {
    const Owner& owner = known->second;
    if (owner.run_id
            ? present(*owner.run_id)
            : now - owner.checked_at < kRetryUnattributed && owner.runs_seen == runs_seen) {
      return owner.run_id;
    }
  }
  Owner owner{started, std::nullopt, now, runs_seen};
  if (const auto key = attribution_.job_of(pid, files)) {
    int64_t run_id = 0;
    std::from_chars(key->data(), key->data() + key->size(), run_id);
    owner.run_id = run_id;
    owner.supervised = attribution_.runs_under(pid, self_exe_);
  }
  if (started && attribution_.start_time(pid) != started) {
    // The pid changed hands while it was read: the answer may mix two processes, and the memory
    // NVML gave was the one before's. Nobody's for this sample, looked at afresh at the next.
    owner = Owner{std::nullopt, std::nullopt, now, runs_seen};
  }
  owners_[pid] = owner;
  return owner.run_id;
}

GpuMonitor::RunState* GpuMonitor::state_of(int64_t run_id, const std::string& job) {
  const auto [it, inserted] = states_.try_emplace(run_id);
  RunState& state = it->second;
  if (!inserted) return &state;
  state.job = job;
  state.watch = triage::NearOomWatch(share_);
  // A restarted daemon goes on with what it stored: the timeline, and the warning sent.
  auto rows = store_.gpu_memory_of_run(run_id);
  if (!rows) {
    // Not a blank state: its next write would replace what is stored (and what was warned).
    // The run is left out of this sample and read again at the next.
    ++metrics_.store_errors["read_gpu_memory"];
    states_.erase(it);
    return nullptr;
  }
  uint64_t warned = 0;
  for (const db::GpuMemoryRow& row : *rows) {
    if (auto timeline = triage::GpuTimeline::from_json(row.timeline_json)) {
      state.cards.emplace(row.gpu, std::move(*timeline));
    }
    if (row.warned_bytes) {
      state.warned_bytes[row.gpu] = *row.warned_bytes;
      warned = std::max(warned, *row.warned_bytes);
    }
  }
  if (warned > 0) state.watch.restore(warned);
  return &state;
}

void GpuMonitor::sampled(const std::vector<GpuSample>& cards) {
  if (const auto since = health_.answered(wall_clock_())) {
    // Every timeline being drawn now misses what the card held meanwhile: said in `report`.
    const int64_t now = wall_clock_();
    for (auto& [run_id, state] : states_) {
      for (auto& [gpu, timeline] : state.cards) timeline.add_gap(*since, now);
      state.dirty = true;
    }
    metrics_.gpu_not_answering.clear();
  }
  health_.sampled(cards);
  // The runs are asked for only when a card has a process: an idle machine costs one NVML call.
  const bool any_process = std::any_of(
      cards.begin(), cards.end(), [](const GpuSample& card) { return !card.processes.empty(); });
  const std::vector<SampledRun> runs = any_process ? runs_() : std::vector<SampledRun>{};
  std::vector<JobFiles> files;
  files.reserve(runs.size());
  for (const SampledRun& run : runs) {
    // A config named relatively was opened from the daemon's working folder.
    std::error_code absolute_error;
    const std::string config =
        run.config.empty() ? "" : std::filesystem::absolute(run.config, absolute_error).string();
    files.push_back({std::to_string(run.run_id), run.folder, run.logs, run.pod_uid, config});
  }
  // The followed runs as a number that changes when one comes or goes: an unattributed process
  // is looked at again at once when a run appears (its log often comes after its trainer).
  int64_t runs_seen = static_cast<int64_t>(runs.size());
  for (const SampledRun& run : runs) runs_seen = runs_seen * 31 + run.run_id;
  // Each process's memory to its run, or to no followed job, per card.
  std::map<std::pair<int64_t, unsigned>, uint64_t> held;  // (run, card)
  std::map<unsigned, uint64_t> processes_total;
  std::set<pid_t> seen;
  std::set<int64_t> supervised;  // runs with a process under `oomtriage run`
  metrics_.gpu_other_memory.clear();
  for (const GpuSample& card : cards) {
    uint64_t& others = metrics_.gpu_other_memory[card.index];
    for (const GpuProcess& process : card.processes) {
      seen.insert(static_cast<pid_t>(process.pid));
      const uint64_t bytes = process.used_bytes.value_or(0);
      processes_total[card.index] += bytes;
      if (const auto run = owner_of(static_cast<pid_t>(process.pid), runs, files, runs_seen)) {
        held[{*run, card.index}] += bytes;
        if (owners_[static_cast<pid_t>(process.pid)].supervised) supervised.insert(*run);
      } else {
        others += bytes;
      }
    }
  }
  std::erase_if(owners_, [&](const auto& entry) { return !seen.contains(entry.first); });

  metrics_.job_gpu_memory.clear();
  fast_ = false;
  const int64_t now = wall_clock_();
  const auto steady_now = clock_.now();
  std::set<int64_t> sampled;
  for (const SampledRun& run : runs) {
    for (const GpuSample& card : cards) {
      const auto it = held.find({run.run_id, card.index});
      if (it == held.end() || card.total_bytes == 0) continue;
      RunState* found = state_of(run.run_id, run.alert.job);
      if (found == nullptr) continue;
      RunState& state = *found;
      sampled.insert(run.run_id);
      const uint64_t bytes = it->second;
      const triage::GpuReading reading{
          now, run.step, run.phase, bytes, processes_total[card.index] - bytes, card.total_bytes};
      triage::GpuTimeline& timeline =
          state.cards.try_emplace(card.index, triage::GpuTimeline(card.index)).first->second;
      timeline.add(reading);
      state.dirty = true;
      metrics_.job_gpu_memory[{run.alert.job, card.index}] += bytes;
      const uint64_t usable =
          card.total_bytes > reading.others_bytes ? card.total_bytes - reading.others_bytes : 0;
      if (static_cast<double>(bytes) > 0.9 * static_cast<double>(usable)) fast_ = true;
      // A job under `oomtriage run` is warned by `run`, which samples it too: not twice.
      const auto warning = state.watch.check(timeline, reading);
      if (warning && !supervised.contains(run.run_id)) {
        warn(run, state, card.index, card.total_bytes, *warning);
      } else if (warning) {
        state.warned_bytes[card.index] = warning->peak_bytes;
      }
    }
  }
  // Written every kStoreInterval while sampled, at once when its processes left the cards, and
  // forgotten once its run is no longer followed.
  for (auto it = states_.begin(); it != states_.end();) {
    const int64_t run_id = it->first;
    RunState& state = it->second;
    const bool left = !sampled.contains(run_id);
    if (state.dirty && (left || steady_now - state.stored_at >= kStoreInterval)) {
      store(run_id, state);
    }
    const bool followed = std::any_of(runs.begin(), runs.end(),
                                      [&](const SampledRun& run) { return run.run_id == run_id; });
    it = followed || state.dirty ? std::next(it) : states_.erase(it);
  }
}

std::optional<db::GpuMemoryRow> timeline_row(int64_t run_id, const triage::GpuTimeline& timeline,
                                             int64_t now) {
  const triage::GpuPoint* peak = timeline.peak();
  if (peak == nullptr) return std::nullopt;
  db::GpuMemoryRow row;
  row.run_id = run_id;
  row.gpu = timeline.gpu();
  row.total_bytes = timeline.total_bytes();
  row.peak_bytes = peak->peak_bytes;
  row.peak_phase = std::string(parsers::to_string(peak->phase));
  row.peak_step = peak->step_to;
  row.others_peak_bytes = timeline.others_peak_bytes();
  row.timeline_json = timeline.to_json();
  row.from_start = timeline.from_start();
  row.updated_at = now;
  return row;
}

void GpuMonitor::store(int64_t run_id, RunState& state) {
  for (const auto& [gpu, timeline] : state.cards) {
    std::optional<db::GpuMemoryRow> row = timeline_row(run_id, timeline, wall_clock_());
    if (!row) continue;
    if (const auto warned = state.warned_bytes.find(gpu); warned != state.warned_bytes.end()) {
      row->warned_bytes = warned->second;
    }
    if (auto stored = store_.record_gpu_memory(*row); !stored) {
      // Kept dirty: the next turn tries again; counted, not logged per turn.
      ++metrics_.store_errors["record_gpu_memory"];
      return;
    }
  }
  state.dirty = false;
  state.stored_at = clock_.now();
}

void GpuMonitor::warn(const SampledRun& run, RunState& state, unsigned gpu, uint64_t card_bytes,
                      const triage::NearOomWatch::Warning& warning) {
  NearOomRun about = run.alert;
  about.run_id = run.run_id;
  about.gpu = gpu;
  about.card_bytes = card_bytes;
  // Its number: the memory in MiB, so a warning after a restart or a further rise has an id of
  // its own and one sent twice (never, by the watch) would have the same.
  about.warning = static_cast<int>(warning.peak_bytes >> 20);
  about.starts_at = utc_time(wall_clock_());
  const std::vector<triage::Fix> fixes =
      run.fixes ? run.fixes(warning.phase, warning.peak_bytes, card_bytes)
                : std::vector<triage::Fix>{};
  AlertContent alert = near_oom_alert(about, warning, fixes);
  state.warned_bytes[gpu] = warning.peak_bytes;
  ++metrics_.near_oom_warnings;
  say_(near_oom_line(alert));
  // Stored first: a restart after the warning does not send it again.
  store(run.run_id, state);
  db::WarningRow kept;
  kept.run_id = run.run_id;  // its job is the run's (db/store_live.cc)
  kept.kind = "near_oom";
  kept.summary = near_oom_line(alert);
  kept.created_at = wall_clock_();
  count_store_failure(metrics_, "record_warning", store_.record_warning(kept));
  warn_(std::move(alert));
}

}  // namespace oomtriage::daemon
