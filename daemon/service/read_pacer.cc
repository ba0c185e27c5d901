// daemon/service/read_pacer.cc
#include "daemon/service/read_pacer.h"

#include <algorithm>

namespace oomtriage::daemon {

bool ReadPacer::admit(const std::string& path, MonoTime now) {
  Bucket& bucket = buckets_[path];
  if (!bucket.refilled_at) {
    bucket.tokens = burst_;
  } else if (interval_.count() > 0) {
    bucket.tokens += std::chrono::duration<double>(now - *bucket.refilled_at) / interval_;
  } else {
    bucket.tokens = burst_;
  }
  bucket.tokens = std::min(burst_, bucket.tokens);
  bucket.refilled_at = now;
  if (bucket.tokens >= 1.0) {
    bucket.tokens -= 1.0;
    return true;
  }
  if (!bucket.scheduled) {
    const auto grid = std::chrono::milliseconds(100);
    const auto due = std::chrono::duration_cast<std::chrono::milliseconds>(
        (bucket.last_read + interval_).time_since_epoch());
    schedule(path, MonoTime((due / grid + 1) * grid));
  }
  return false;
}

void ReadPacer::note_read(const std::string& path, MonoTime now) { buckets_[path].last_read = now; }

void ReadPacer::schedule(const std::string& path, MonoTime at) {
  Bucket& bucket = buckets_[path];
  if (bucket.scheduled) return;
  bucket.scheduled = true;
  due_.emplace(at, path);
}

std::optional<MonoTime> ReadPacer::next_due() const {
  if (due_.empty()) return std::nullopt;
  return due_.begin()->first;
}

std::vector<std::string> ReadPacer::take_due(MonoTime now) {
  std::vector<std::string> paths;
  while (!due_.empty() && due_.begin()->first <= now) {
    const std::string path = due_.begin()->second;
    due_.erase(due_.begin());
    if (auto it = buckets_.find(path); it != buckets_.end() && it->second.scheduled) {
      it->second.scheduled = false;
      paths.push_back(path);
    }
  }
  return paths;
}

void ReadPacer::forget(const std::string& path) {
  buckets_.erase(path);
  // A due entry left behind finds no bucket and is dropped by take_due().
}

}  // namespace oomtriage::daemon
