// triage/triage_job.cc: a job's history turned into the fixes tried, then the ranker.
#include "triage/triage_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "triage/history.h"
#include "triage/ranker.h"
#include "triage/run_config.h"

namespace oomtriage::triage {

namespace {

// A fix the previous run carried from its crash, when this run crashed again in the same phase,
// did not work: it goes last, so the next lever leads.
std::vector<std::string> tried_and_failed(const MemoryPressure& pressure, const JobView& job,
                                          const History& history) {
  std::vector<std::string> tried = history.tried_and_failed;
  const std::optional<StoredCrash>& previous = history.previous_crash;
  if (pressure.recovered || job.files == nullptr || job.files->empty() || !previous ||
      previous->phase != parsers::to_string(pressure.phase)) {
    return tried;
  }
  for (std::string& id : carried_fixes(previous->fixes, *job.files)) {
    if (std::find(tried.begin(), tried.end(), id) == tried.end()) tried.push_back(std::move(id));
  }
  return tried;
}

}  // namespace

std::vector<Fix> triage_pressure(const MemoryPressure& pressure, parsers::Trainer trainer,
                                 const parsers::PrintedArguments& arguments, const JobView& job,
                                 const History& history) {
  TriageInput input;
  input.pressure = &pressure;
  input.trainer = trainer;
  input.arguments = arguments;
  input.config = job.config;
  input.config_problem = job.config_problem;
  input.tried_and_failed = tried_and_failed(pressure, job, history);
  // The crash is explained from the config it ran with; the fixes still edit today's file.
  std::optional<RunConfig> as_run;
  if (job.config != nullptr && job.run_config != nullptr) {
    as_run = as_the_run_had_it(*job.config, *job.run_config);
    if (as_run->changed.empty()) {
      as_run.reset();
    } else {
      input.config = &as_run->config;
    }
  }
  std::vector<Fix> fixes = rank_fixes(input);
  if (as_run) {
    for (Fix& fix : fixes) {
      fix.why +=
          fmt::format(" (ranked from the config this run printed; the file changed since: {})",
                      fmt::join(as_run->changed, ", "));
    }
  }
  return fixes;
}

std::vector<Fix> triage_event(const parsers::OomEvent& event, parsers::Trainer trainer,
                              const parsers::PrintedArguments& arguments, const JobView& job,
                              const History& history) {
  return triage_pressure(pressure_of_crash(event), trainer, arguments, job, history);
}

Triage triage_log(const parsers::LogAnalysis& analysis, const JobView& job,
                  const History& history) {
  Triage triage;
  triage.incident = incident_to_fix(analysis);
  if (triage.incident != nullptr) {
    triage.fixes =
        triage_event(*triage.incident, analysis.trainer, analysis.arguments, job, history);
  }
  return triage;
}

}  // namespace oomtriage::triage
