// daemon/cli/alerts_command.h
//
// `oomtriage alerts [--pending|--failed] [--json]`: the alert outbox as the daemon left it, with
// what each receiver answered; `oomtriage alerts resend ID`: a row pending again (the running
// daemon sends it within one rescan interval).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/render/text_output.h"

namespace oomtriage::daemon {

int run_alerts_list(const std::string& store_path, const std::string& state, bool json,
                    ColorMode color);
int run_alerts_resend(const std::string& store_path, int64_t id);

}  // namespace oomtriage::daemon
