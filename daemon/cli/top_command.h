// daemon/cli/top_command.h
//
// `oomtriage top [--once] [--interval SECONDS]`: the jobs of a node's store or the fleet store as
// a live terminal view, like htop for training runs: redrawn every second from the store, those
// that need someone first (daemon/render/top_view.h), `q` quits. On a terminal it takes the screen
// and reads keys one at a time, and gives both back as it found them when it ends, by `q`, by
// SIGINT, SIGTERM or SIGHUP. Elsewhere (a pipe, a file) it prints a plain frame each interval;
// --once prints one and exits, for scripts.
#pragma once

#include "daemon/cli/store_views.h"
#include "daemon/render/text_output.h"

namespace oomtriage::daemon {

struct TopOptions {
  StoreTarget store;
  bool once = false;
  double interval_seconds = 1.0;
  ColorMode color = ColorMode::kAuto;
};

// 0 when it quit (or printed its one frame); 1 bad input; 2 when --once could not read the store.
int run_top(const TopOptions& options);

}  // namespace oomtriage::daemon
