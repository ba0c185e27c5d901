// parsers/line_cleaner.h
//
// Strips what logs put around a message before the message patterns run: ANSI escapes, launcher
// and rank prefixes ("[rank0]:", "[default1]:", "(RayWorker pid=7)"), timestamps (ISO, dmesg,
// syslog, glog, docker), logging levels ("ERROR:root:", "ERROR    |", "[INFO]"), log-viewer line
// numbers ("[80746]") and markdown residue (backticks, "**", "> "). The patterns live in
// line_cleaner.cc with sample lines; tests/parsers/line_cleaner_test.cc checks each.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace oomtriage::parsers {

struct CleanLine {
  std::string_view text;  // points into the input or into the scratch string
  std::optional<int> rank;  // from a "[rankN]:" or "[defaultN]:" prefix
};

// `scratch` receives a copy only when ANSI escapes had to be removed.
CleanLine clean_line(std::string_view raw, std::string& scratch);

// Removes ANSI escape sequences; used by clean_line and by the record prefilter.
std::string strip_ansi(std::string_view raw);

}  // namespace oomtriage::parsers
