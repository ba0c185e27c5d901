// daemon/service/store_failures.h
//
// A store call the daemon survives failing (a state mark, a job row's trainer, a story read for
// history) is never dropped silently: it is counted by operation in
// oomtriage_store_errors_total{operation} and logged the first time. The calls whose failure the
// daemon must act on (a commit, registering a file) go through the event sink instead.
#pragma once

#include "daemon/common/journal_log.h"
#include "daemon/common/metrics.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

template <class T>
void count_store_failure(Metrics& metrics, const char* operation, const Result<T>& result) {
  if (result) return;
  if (metrics.store_errors[operation]++ == 0) {
    log_line(kWarning, "store: {}: {} (counted in oomtriage_store_errors_total)", operation,
             result.error().message);
  }
}

}  // namespace oomtriage::daemon
