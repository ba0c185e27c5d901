// triage/ranker.cc: the entry points of triage/ranker.h: the incident a log's fixes answer, the
// config a log alone shows, and rank_fixes(), which runs the planner (triage/planner.h) on the
// job's config or, without one, on the log's. The rules are data in triage/ranking_table.cc.
#include "triage/ranker.h"

#include "parsers/trainer_dialect.h"
#include "triage/planner.h"

namespace oomtriage::triage {
namespace {

using detail::Planner;
using parsers::JobConfig;
using parsers::Knob;

}  // namespace

const parsers::OomEvent* incident_to_fix(const parsers::LogAnalysis& analysis) {
  for (auto it = analysis.events.rbegin(); it != analysis.events.rend(); ++it) {
    if (!it->recovered) return &*it;
  }
  return analysis.events.empty() ? nullptr : &analysis.events.back();
}

parsers::JobConfig config_from_log(parsers::Trainer trainer,
                                   const parsers::PrintedArguments& args) {
  // Nothing is known but what the log prints; the target is the trainer's command line.
  JobConfig config;
  config.trainer = trainer;
  config.process_path = "";
  config.datasets.clear();
  config.unknown.set();
  if (config.trainer == parsers::Trainer::kAiToolkit) {
    config.process_path = "config.process[0]";
    config.targets.push_back({parsers::TargetKind::kYaml, "", ""});
  } else if (parsers::writes_flags(config.trainer)) {
    config.targets.push_back({parsers::TargetKind::kArgs, "", ""});
  } else {
    config.targets.push_back({parsers::TargetKind::kJson, "", ""});  // OneTrainer: its UI's JSON
  }
  if (args.batch_size) {
    config.batch_size = *args.batch_size;
    config.unknown.reset(static_cast<size_t>(Knob::kBatchSize));
  }
  if (args.gradient_accumulation) {
    config.gradient_accumulation = *args.gradient_accumulation;
    config.unknown.reset(static_cast<size_t>(Knob::kGradientAccumulation));
  }
  if (args.gradient_checkpointing) {
    config.gradient_checkpointing = *args.gradient_checkpointing;
    config.gradient_checkpointing_explicit = true;
    config.unknown.reset(static_cast<size_t>(Knob::kGradientCheckpointing));
  }
  if (args.resolution) {
    parsers::DatasetView dataset;
    dataset.resolutions = {*args.resolution};
    config.datasets.push_back(dataset);
    config.unknown.reset(static_cast<size_t>(Knob::kResolution));
  }
  return config;
}

std::vector<Fix> rank_fixes(const TriageInput& input) {
  if (input.pressure == nullptr) return {};
  if (input.config != nullptr) return Planner(input, *input.pressure, *input.config, false).plan();
  TriageInput with_note = input;
  if (input.arguments.any()) {
    with_note.config_problem += "; using the training arguments the log prints";
  }
  const JobConfig from_log = config_from_log(input.trainer, input.arguments);
  return Planner(with_note, *input.pressure, from_log, true).plan();
}

}  // namespace oomtriage::triage
