// daemon/common/gpu_sample_worker.cc: the sampling thread, its hand-over, and what is said
// about the cards.
#include "daemon/common/gpu_sample_worker.h"

#include <fmt/format.h>

namespace oomtriage::daemon {

struct GpuSampleWorker::Shared {
  std::mutex mutex;
  std::condition_variable wake;
  std::unique_ptr<NvmlSampler> sampler;  // set by the thread once NVML is open
  Opened opened;
  std::function<void()> ready;  // cleared by the owner's destructor, under `mutex`
  bool requested = false;
  bool busy = false;  // in an NVML call (opening, or a sample)
  bool stopping = false;
  std::chrono::steady_clock::time_point started{};
  std::optional<std::vector<GpuSample>> done;
};

GpuSampleWorker::GpuSampleWorker(std::function<void()> ready, Open open,
                                 std::chrono::milliseconds deadline)
    : shared_(std::make_shared<Shared>()), deadline_(deadline) {
  if (!open) open = [] { return NvmlSampler::open(); };
  shared_->ready = std::move(ready);
  shared_->busy = true;
  shared_->started = std::chrono::steady_clock::now();
  thread_ = std::thread([shared = shared_, open = std::move(open)] {
    auto sampler = open();
    std::unique_lock lock(shared->mutex);
    shared->busy = false;
    shared->opened.done = true;
    if (sampler) {
      shared->sampler = std::move(*sampler);
      shared->opened.device_count = shared->sampler->device_count();
      shared->opened.process_query = shared->sampler->process_query();
    } else {
      shared->opened.error = sampler.error().message;
    }
    if (shared->ready) shared->ready();
    if (!shared->sampler) return;
    for (;;) {
      shared->wake.wait(lock, [&] { return shared->requested || shared->stopping; });
      if (shared->stopping) return;
      shared->requested = false;
      shared->busy = true;
      shared->started = std::chrono::steady_clock::now();
      lock.unlock();
      std::vector<GpuSample> cards = shared->sampler->sample();
      lock.lock();
      shared->busy = false;
      shared->done = std::move(cards);
      if (shared->ready) shared->ready();
    }
  });
}

GpuSampleWorker::~GpuSampleWorker() {
  bool hung = false;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->ready = nullptr;
    hung = shared_->busy;
  }
  shared_->wake.notify_one();
  // A call that does not return cannot be waited for: the thread keeps `shared_` (and so the
  // sampler, which it is inside) alive, and ends when the call returns or the process does.
  if (hung) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

GpuSampleWorker::Opened GpuSampleWorker::opened() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->opened;
}

bool GpuSampleWorker::request() {
  {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->sampler || shared_->busy || shared_->requested) return false;
    shared_->requested = true;
  }
  shared_->wake.notify_one();
  return true;
}

std::optional<std::vector<GpuSample>> GpuSampleWorker::take() {
  std::lock_guard lock(shared_->mutex);
  return std::exchange(shared_->done, std::nullopt);
}

std::optional<GpuSampleWorker::Stuck> GpuSampleWorker::stuck() const {
  std::lock_guard lock(shared_->mutex);
  if (!shared_->busy) return std::nullopt;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - shared_->started);
  if (waited < deadline_) return std::nullopt;
  if (!shared_->sampler) return Stuck{std::nullopt, "nvmlInit_v2", waited};
  const char* call = shared_->sampler->call_name();
  return Stuck{shared_->sampler->call_gpu(), call && *call ? call : "NVML", waited};
}

void GpuHealth::sampled(const std::vector<GpuSample>& cards) {
  for (const GpuSample& card : cards) {
    if (card.index >= errors_.size()) errors_.resize(card.index + 1);
    std::string& said = errors_[card.index];
    if (card.error == said) continue;
    if (card.error.empty()) {
      say_(fmt::format("GPU {}: NVML answers again", card.index));
    } else {
      say_(
          fmt::format("GPU {}: NVML error, its memory is not sampled: {}", card.index, card.error));
    }
    said = card.error;
  }
}

bool GpuHealth::not_answering(const GpuSampleWorker::Stuck& stuck, int64_t now) {
  if (silent_) return false;
  silent_ = true;
  silent_gpu_ = stuck.gpu;
  silent_since_ = now - stuck.waited.count() / 1000;
  const std::string who = stuck.gpu ? fmt::format("GPU {}", *stuck.gpu) : "NVML";
  say_(fmt::format(
      "{} is not answering: {} has not returned for {:.1f} s (a GPU off the bus or a stuck "
      "driver); the memory timeline has a gap until it answers, nothing else waits for it",
      who, stuck.call, static_cast<double>(stuck.waited.count()) / 1000.0));
  return true;
}

std::optional<int64_t> GpuHealth::answered(int64_t now) {
  if (!silent_) return std::nullopt;
  const std::string who = silent_gpu_ ? fmt::format("GPU {}", *silent_gpu_) : "NVML";
  say_(fmt::format("{} answers again after {} s", who, now - silent_since_));
  silent_ = false;
  silent_gpu_.reset();
  return silent_since_;
}

}  // namespace oomtriage::daemon
