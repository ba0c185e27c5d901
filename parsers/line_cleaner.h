// parsers/line_cleaner.h
//
// Strips what logs put around a message before the message patterns run: ANSI escapes, launcher
// and rank prefixes ("[rank0]:", "[default1]:", "(RayWorker pid=7)", srun's "0: ", pdsh's
// "node-3: "), timestamps (ISO, dmesg, syslog, glog, docker, GitHub Actions, a bare time),
// logging levels ("ERROR:root:", "ERROR    |", "[INFO]", "[ERROR rank1]"), source locations
// ("[trainer.py:88]"), log-viewer line numbers ("[80746]"), markdown residue (backticks, "**",
// "> ", "- ") and ComfyUI's "- **Exception Type:** " report fields. The patterns live in
// line_cleaner.cc with sample lines; tests/parsers/line_cleaner_test.cc checks each.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include "parsers/result.h"

namespace oomtriage::parsers {

struct CleanLine {
  std::string_view text;  // points into the input or into the scratch string
  // From the first "[rankN]:", "[defaultN]:", "[rank: N]" or "[ERROR rankN]" prefix, else from
  // srun --label's task id ("N: ").
  std::optional<int> rank;
};

// `scratch` receives a copy only when ANSI escapes had to be removed.
CleanLine clean_line(std::string_view raw, std::string& scratch);

// Removes ANSI escape sequences; used by clean_line and by the record prefilter.
std::string strip_ansi(std::string_view raw);

// True when every RE2 of the cleaner compiled; otherwise false, and `error` (if not null) names
// each bad pattern with RE2's reason. For a start-up check.
Result<Ok> line_cleaner_ok();

}  // namespace oomtriage::parsers
