// daemon/cli/heal_copies.h
//
// The patched config copies of one `oomtriage run --heal`, and the user's files behind them.
// A copy is a new file beside its original, created with O_EXCL under the first free name from
// "job.oomtriage-<attempt>.yaml" on: no file that was there before the run (the config it was
// started with, a copy an earlier run left) is ever written over, and no copy is written twice
// (each attempt that needs one gets its own). Each copy is traced back to the user's file it was
// made from; when the user edits that file while the run goes on, the next attempt gets a new
// copy made from the edit with the run's fixes on top (triage/heal_rebase.h).
// docs/run-and-heal.md says what is written and when.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parsers/native_config.h"
#include "parsers/result.h"
#include "triage/heal_rebase.h"

namespace oomtriage::daemon {

class HealCopies {
 public:
  // A new copy of `file` (a file an attempt read: the user's, or a copy this run made) holding
  // `patched`: its text with `changes` of fix `fix_id`, for attempt `attempt`. Its path, or a
  // kIo error when it cannot be created.
  Result<std::string> write(const parsers::NativeFile& file, const std::string& patched,
                            const std::string& fix_id,
                            const std::vector<triage::ConfigChange>& changes, int attempt);

  // A user's file edited since its copy was made, and the new copy made from the edit.
  struct Followed {
    std::string original;
    std::string edited;                          // its bytes now
    std::string stale_copy;                      // the copy the attempt would have run
    std::string copy;                            // the one it runs instead
    std::string text;                            // the new copy's bytes
    std::vector<triage::AppliedChange> applied;  // the run's changes made on the edit
    std::vector<triage::AppliedChange> yielded;  // left out: the user edited their keys
    int read_before = 0;  // the copy was made from bytes read before this attempt began
    // Non-empty: the edit does not parse, or cannot take the changes ("SOURCE:LINE: reason");
    // no copy was made, and the run must go on neither from the stale copy nor from the edit.
    std::string problem;
  };
  // Before attempt `attempt` starts: a new copy for each user's file whose bytes are not those
  // its newest copy was made from; the list ends at an edit with a problem. A file that can no
  // longer be read keeps its copy. A kIo error when a copy cannot be created.
  Result<std::vector<Followed>> follow_edits(int attempt);

 private:
  struct Original {
    std::string path;  // as the attempt that read it spelled it
    parsers::TargetKind kind = parsers::TargetKind::kYaml;
    std::string base;                            // the bytes its newest copy was made from
    std::vector<triage::AppliedChange> changes;  // every change made on `base`, in order
    std::string copy;                            // its newest copy
    int read_before = 0;                         // `base` was read before this attempt began
  };
  // Both by canonical path: one entry per file, whatever spelling led to it.
  std::map<std::string, Original> originals_;  // the user's files
  std::map<std::string, std::string> copies_;  // a copy -> its user's file
};

// A path as the user would type it: relative to the working folder when it is inside it.
std::string shown_path(const std::string& path);

// The line that says what attempt `attempt` makes of an edit: "job.yaml changed during the
// back-off: attempt 2 uses your edit with drop_top_bucket applied", with the keys the user's
// values kept; or, for an edit with a problem, why the attempt is not started.
std::string followed_line(const HealCopies::Followed& edit, int attempt);

}  // namespace oomtriage::daemon
