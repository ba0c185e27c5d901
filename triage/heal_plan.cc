// triage/heal_plan.cc: the stop rules, the resume-safe fixes, and command-line rewriting.
#include "triage/heal_plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "parsers/trainer_table.h"
#include "triage/fix_table.h"

#include "triage/fix_codec.h"

namespace oomtriage::triage {
namespace {

bool is_flag(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

// Where `flag` is in argv: its index, and whether its value is glued on ("--flag=V").
struct FlagAt {
  size_t index;
  bool glued;
};

std::optional<FlagAt> find_flag(const std::vector<std::string>& argv, std::string_view flag) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag) return FlagAt{i, false};
    if (argv[i].size() > flag.size() && argv[i].compare(0, flag.size(), flag) == 0 &&
        argv[i][flag.size()] == '=') {
      return FlagAt{i, true};
    }
  }
  return std::nullopt;
}

// A flag's value as a command line writes it: strings as they are, lists joined with commas
// (kohya's "--resolution 768,768").
std::string argument_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string joined;
    for (const auto& item : value) {
      if (!joined.empty()) joined += ',';
      joined += argument_text(item);
    }
    return joined;
  }
  return value.dump();
}

void remove_flag(std::vector<std::string>& argv, std::string_view flag) {
  while (const auto at = find_flag(argv, flag)) {
    const bool has_value =
        !at->glued && at->index + 1 < argv.size() && !is_flag(argv[at->index + 1]);
    argv.erase(argv.begin() + static_cast<std::ptrdiff_t>(at->index),
               argv.begin() + static_cast<std::ptrdiff_t>(at->index + (has_value ? 2 : 1)));
  }
}

void set_flag(std::vector<std::string>& argv, std::string_view flag, const std::string& value) {
  const auto at = find_flag(argv, flag);
  if (!at) {
    argv.emplace_back(flag);
    argv.push_back(value);
  } else if (at->glued) {
    argv[at->index] = std::string(flag) + "=" + value;
  } else if (at->index + 1 < argv.size() && !is_flag(argv[at->index + 1])) {
    argv[at->index + 1] = value;
  } else {
    argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(at->index + 1), value);
  }
}

void add_switch(std::vector<std::string>& argv, std::string_view flag) {
  if (!find_flag(argv, flag)) argv.emplace_back(flag);
}

}  // namespace

bool resume_safe(std::string_view fix_id) {
  const FixRow* row = find_fix(fix_id);
  return row != nullptr && row->resume_safe;
}

std::string describe_changes(const Fix& fix) {
  std::string text;
  for (const auto& change : fix.changes) {
    std::string_view path = change.path;
    if (path.rfind("config.process[", 0) == 0 && path.find("].") != std::string_view::npos) {
      path.remove_prefix(path.find("].") + 2);
    }
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {} -> {}", path, value_text(change.from), value_text(change.to));
  }
  return text;
}

HealStep next_heal_step(const parsers::LogAnalysis& analysis, const std::vector<Fix>& ranked,
                        const std::vector<std::string>& tried) {
  using parsers::OomKind;
  using parsers::Outcome;
  HealStep step;
  if (analysis.outcome == Outcome::kCompleted) {
    step.stop_reason = "the job completed";
    return step;
  }
  if (analysis.outcome != Outcome::kCrashedOom) {
    step.stop_reason = "the job did not end with an out-of-memory crash (outcome " +
                       std::string(parsers::to_string(analysis.outcome)) + "); not retried";
    return step;
  }
  const parsers::OomEvent* incident = nullptr;
  for (const auto& event : analysis.events) {
    if (!event.recovered) incident = &event;
  }
  if (incident == nullptr) {
    step.stop_reason = "no fatal out-of-memory event";
    return step;
  }
  if (incident->kind == OomKind::kHostKilled || incident->kind == OomKind::kHostMemoryError ||
      incident->kind == OomKind::kShm) {
    step.stop_reason = "host memory ran out (" + std::string(parsers::to_string(incident->kind)) +
                       "): no GPU setting fixes it";
    return step;
  }
  if (!incident->figures.other_processes.empty() ||
      (!ranked.empty() && ranked.front().id == "free_gpu")) {
    step.stop_reason = "another process holds memory on the GPU: free it, then run again";
    return step;
  }
  const auto usable = [&](const Fix& fix) {
    return resume_safe(fix.id) && !fix.changes.empty() &&
           std::find(tried.begin(), tried.end(), fix.id) == tried.end();
  };
  // The first fix the memory model says makes every phase fit, else the first in rank order.
  for (const Fix& fix : ranked) {
    if (usable(fix) && fix.fits == true) {
      step.fix = &fix;
      return step;
    }
  }
  for (const Fix& fix : ranked) {
    if (usable(fix)) {
      step.fix = &fix;
      return step;
    }
  }
  step.stop_reason = "every resume-safe fix for this crash (" +
                     std::string(parsers::to_string(incident->phase)) + ") has been tried";
  return step;
}

std::vector<std::string> apply_argument_changes(std::vector<std::string> argv,
                                                const std::vector<ConfigChange>& changes) {
  for (const ConfigChange& change : changes) {
    if (change.kind != parsers::TargetKind::kArgs) continue;
    const nlohmann::json& to = change.to;
    if (to.is_null() || to == false) {
      remove_flag(argv, change.path);
    } else if (to == true) {
      add_switch(argv, change.path);
    } else {
      set_flag(argv, change.path, argument_text(to));
    }
  }
  return argv;
}

std::vector<std::string> replace_path_argument(std::vector<std::string> argv,
                                               const std::string& from, const std::string& to) {
  for (std::string& arg : argv) {
    if (arg == from) {
      arg = to;
    } else if (const size_t eq = arg.find('='); is_flag(arg) && eq != std::string::npos &&
                                                arg.compare(eq + 1, std::string::npos, from) == 0) {
      arg = arg.substr(0, eq + 1) + to;
    }
  }
  return argv;
}

std::optional<std::string> argument_value(const std::vector<std::string>& argv,
                                          std::string_view flag) {
  const auto at = find_flag(argv, flag);
  if (!at) return std::nullopt;
  if (at->glued) return argv[at->index].substr(flag.size() + 1);
  if (at->index + 1 < argv.size() && !is_flag(argv[at->index + 1])) return argv[at->index + 1];
  return std::nullopt;
}

std::vector<std::string> prepare_first_attempt(parsers::Trainer trainer,
                                               std::vector<std::string> argv) {
  const std::string_view needed = parsers::trainer_row(trainer).resume.first_attempt;
  if (!needed.empty()) add_switch(argv, needed);
  return argv;
}

ResumeArguments with_resume(parsers::Trainer trainer, std::vector<std::string> argv,
                            const std::optional<std::string>& newest_state) {
  using How = parsers::ResumeOption::How;
  const parsers::TrainerRow& row = parsers::trainer_row(trainer);
  const parsers::ResumeOption& resume = row.resume;
  ResumeArguments out;
  // "": the state the caller found in the trainer's checkpoint folder.
  const bool needs_state =
      resume.value.empty() && (resume.how == How::kFlag || resume.how == How::kGluedFlag);
  if (needs_state && !newest_state) {
    out.missing = std::string(row.checkpoint.missing);
    out.argv = std::move(argv);
    return out;
  }
  const std::string value = needs_state ? *newest_state : std::string(resume.value);
  switch (resume.how) {
    case How::kByItself: break;
    case How::kFlag: set_flag(argv, resume.flag, value); break;
    case How::kGluedFlag:
      remove_flag(argv, resume.flag);
      argv.push_back(std::string(resume.flag) + "=" + value);
      break;
    case How::kAppendOnce:
      if (std::find(argv.begin(), argv.end(), value) == argv.end()) {
        argv.emplace_back(resume.flag);
        argv.push_back(value);
      }
      break;
    case How::kNotKnown:
      out.missing = "the trainer is not known, so neither is how it resumes";
      break;
  }
  if (!resume.also_switch.empty()) add_switch(argv, resume.also_switch);
  out.argv = std::move(argv);
  return out;
}

}  // namespace oomtriage::triage
