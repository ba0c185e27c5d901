// daemon/cli/serve_command.h
//
// `oomtriage serve`: a read-only web view of the store (a node's own or the fleet store). `/`
// lists the jobs, newest first, filtered and paged by its URL; `/job/<key>` is the job's report
// (the page `report --html` writes), `/job/<key>.json` and `.md` what `report --json` and
// `--markdown` print; `/fleet` draws OOMs per day by phase and by model family, the fixes that
// healed jobs, the nodes with their last batch, and the jobs closest to their card's limit.
// Loopback by default; anywhere else only with an access file (daemon/net/web_access.h).
// docs/serve.md has the deployment: the unit, a read-only PostgreSQL role, nginx for TLS.
#pragma once

#include <string>

#include "daemon/cli/store_views.h"

namespace oomtriage::daemon {

struct ServeOptions {
  std::string listen = "127.0.0.1:9840";
  StoreTarget store;
  std::string access_file;         // "" for none (loopback only)
  bool allow_writer_role = false;  // serve a fleet store whose role could write
  unsigned threads = 4;
  int fleet_days = 30;
  int fleet_cache_seconds = 30;  // /fleet's figures are per day: recomputed at most this often
  size_t page_size = 50;
  size_t max_connections = 128;
  size_t max_per_address = 16;    // connections from one address (IPv6: one /64); 0: no limit
  int header_timeout_ms = 5000;   // a request's line and headers must arrive within this
  int client_timeout_ms = 10000;  // a request must arrive whole within this
};

int run_serve(const ServeOptions& options);

}  // namespace oomtriage::daemon
