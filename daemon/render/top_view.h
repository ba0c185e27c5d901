// daemon/render/top_view.h
//
// `oomtriage top`'s frame: every job on one line, those that need someone first, fitted to the
// terminal's width. Pure: the jobs, the width, the time and whether to colour in, text out;
// daemon/cli/top_command.cc reads the store and draws a frame every second.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/store.h"

namespace oomtriage::daemon {

struct TopFrame {
  int width = 80;      // the terminal's columns: no line is longer
  int rows = 0;        // job lines at most (0: every job); what is left out is counted
  int64_t now = 0;     // unix seconds: the header's clock and how long each log has been silent
  bool color = false;  // escape codes at all; off, the frame is plain text
  std::string source;  // the store read, named in the header ("" leaves it out)
  std::string note;    // a line under the header ("" for none): why the store could not be read
};

// What needs someone first: 0 stalled, 1 near or predicted OOM, 2 crashed, 3 running, 4 the rest.
int attention_rank(const db::JobSummary& job);

// `jobs` in attention order; within a rank the newest written first, then by name.
std::vector<db::JobSummary> by_attention(std::vector<db::JobSummary> jobs);

// The header (the time and the counts), the columns' titles and one line per job, each ending in
// '\n' and at most `frame.width` columns wide. Columns no job has a value for are left out; when
// the rest do not fit, the least needed go first (loss, the phase, the headroom) and the name
// is cut.
std::string render_top(const std::vector<db::JobSummary>& jobs, const TopFrame& frame);

}  // namespace oomtriage::daemon
