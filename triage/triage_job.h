// triage/triage_job.h
//
// The one path from a log's analysis, the job as the registry found it and the job's history to
// ranked fixes. `scan`, `fix`, `run` and the daemon all call it, so the same crash of the same job
// gets the same fixes whichever of them read it (tests/daemon/registry_parity_test.cc holds them
// to it); a prediction (triage/preflight.h) and a near-OOM warning come in the same way, as the
// memory pressure they are (triage/memory_pressure.h). Pure: the callers read the config and the
// store; this decides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "parsers/native_config.h"
#include "triage/fix.h"
#include "triage/memory_pressure.h"

namespace oomtriage::triage {

// The job as the registry found it.
struct JobView {
  const parsers::JobConfig* config = nullptr;  // null: none was found, or it did not parse
  std::string config_problem;                  // why there is none, in words, for the fixes' why
  // The job's config files as they are now: a fix they already carry counts as tried.
  const std::vector<parsers::NativeFile>* files = nullptr;
  // The config the run printed in its log, when there is a file too (triage/run_config.h): what
  // it shows of the settings that decide the peak is what the crash ran with.
  const parsers::JobConfig* run_config = nullptr;
};

// The job a log belongs to, as the registry names it (daemon/service/job_locator.h); `scan
// --json` prints it with the log.
struct JobInfo {
  std::string name;
  std::optional<std::string> config_path;
  std::optional<std::string> config_sha256;
};

// The previous run's last crash that was not recovered, as the store keeps it.
struct StoredCrash {
  std::string phase;       // parsers::to_string(Phase)
  std::vector<Fix> fixes;  // the fixes ranked for it then
};

// What the job's story says before this crash.
struct History {
  std::optional<StoredCrash> previous_crash;
  // Fixes applied to this job that did not prevent the crash (`run --heal` knows its own).
  std::vector<std::string> tried_and_failed;
};

// The fixes for one moment of memory pressure: a crash's, a prediction's or a near-OOM
// warning's; `trainer` and `arguments` are what the log shows so far.
std::vector<Fix> triage_pressure(const MemoryPressure& pressure, parsers::Trainer trainer,
                                 const parsers::PrintedArguments& arguments, const JobView& job,
                                 const History& history);

// One incident's fixes: triage_pressure() of pressure_of_crash(event).
std::vector<Fix> triage_event(const parsers::OomEvent& event, parsers::Trainer trainer,
                              const parsers::PrintedArguments& arguments, const JobView& job,
                              const History& history);

struct Triage {
  const parsers::OomEvent* incident = nullptr;  // points into the analysis; null: no OOM
  std::vector<Fix> fixes;                       // empty when there is no incident
};

// The fixes for the log's incident: its last OOM that was not recovered, else its last one.
Triage triage_log(const parsers::LogAnalysis& analysis, const JobView& job,
                  const History& history = {});

}  // namespace oomtriage::triage
