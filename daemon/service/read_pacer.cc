// daemon/service/read_pacer.cc
#include "daemon/service/read_pacer.h"

namespace oomtriage::daemon {

bool ReadPacer::on_write(Pace& pace, MonoTime now) const {
  const bool soon = pace.last_write && now - *pace.last_write < interval_;
  pace.last_write = now;
  if (pace.busy || !soon) return false;
  pace.busy = true;
  pace.idle_polls = 0;
  return true;
}

bool ReadPacer::on_poll(Pace& pace, uint64_t bytes) const {
  if (!pace.busy) return false;
  if (bytes > 0) {
    pace.idle_polls = 0;
    return false;
  }
  if (++pace.idle_polls < idle_polls_to_quiet_) return false;
  pace.busy = false;
  pace.idle_polls = 0;
  pace.last_write.reset();
  return true;
}

}  // namespace oomtriage::daemon
