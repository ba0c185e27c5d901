// daemon/service/daemon.h
//
// The service: follows every log the config's globs match, through appends, rename-and-create and
// copytruncate rotation, delete-and-recreate, and jobs restarted into a new log.txt; feeds each
// file's new bytes to its own streaming analyzer; stores OOM events with the job's config snapshot
// and ranked fixes; logs one line per event to stderr with a journald priority prefix. inotify on
// directories drives it (Boost.Asio, no busy polling), a slow rescan catches what inotify missed,
// and a file's identity is (device, inode) plus its content (file_identity.h). The parts live
// beside it: file_follower, directory_watcher, read_pacer, event_sink, service_manager.
#pragma once

#include <string>

#include "daemon/common/daemon_config.h"
#include "daemon/service/preflight_alerts.h"

namespace oomtriage::daemon {

// Runs until SIGTERM or SIGINT (drains every file first). SIGHUP reloads `config_path` (when the
// config came from a file), keeping the old config if the new one is bad. Returns an exit code.
// `card_size` tells the GPU's memory for the pre-flight when `gpu_memory:` does not (NVML).
int run_daemon(DaemonConfig config, const std::string& store_path, bool verbose,
               CardSizeProvider card_size = unknown_card_size());

}  // namespace oomtriage::daemon
