// daemon/cli/command_fixes.cc: the launcher's words (parsers/launcher.h) are split off first, so
// that a fix's flag never lands on the launcher's own option of the same name (accelerate's
// --mixed_precision, --config_file).
#include "daemon/cli/command_fixes.h"

#include <algorithm>

#include "parsers/launcher.h"
#include "triage/heal_plan.h"

namespace oomtriage::daemon {
namespace {

bool has_args_change(const triage::Fix& fix) {
  return std::any_of(fix.changes.begin(), fix.changes.end(), [](const triage::ConfigChange& c) {
    return c.kind == parsers::TargetKind::kArgs;
  });
}

// The command's trainer part: what follows the launcher's words.
size_t trainer_start(const std::vector<std::string>& command) {
  return command.size() - parsers::read_launcher(command).trainer_argv.size();
}

bool names_flag(const std::vector<std::string>& argv, const std::string& flag) {
  return std::any_of(argv.begin(), argv.end(), [&](const std::string& word) {
    return word == flag || word.rfind(flag + "=", 0) == 0;
  });
}

}  // namespace

void as_edits_of(const std::vector<std::string>& command, std::vector<triage::Fix>& fixes) {
  const std::vector<std::string> trainer(
      command.begin() + static_cast<long>(trainer_start(command)), command.end());
  for (triage::Fix& fix : fixes) {
    for (triage::ConfigChange& change : fix.changes) {
      if (change.kind == parsers::TargetKind::kArgs && !names_flag(trainer, change.path)) {
        change.from = nullptr;
      }
    }
  }
}

std::optional<std::vector<std::string>> with_fix(const std::vector<std::string>& command,
                                                 const triage::Fix& fix) {
  if (!has_args_change(fix)) return std::nullopt;
  const size_t start = trainer_start(command);
  std::vector<std::string> out(command.begin(), command.begin() + static_cast<long>(start));
  const std::vector<std::string> trainer = triage::apply_argument_changes(
      std::vector<std::string>(command.begin() + static_cast<long>(start), command.end()),
      fix.changes);
  out.insert(out.end(), trainer.begin(), trainer.end());
  return out;
}

std::vector<std::vector<std::string>> fixed_commands(const std::vector<std::string>& command,
                                                     const std::vector<triage::Fix>& fixes) {
  std::vector<std::vector<std::string>> out;
  for (const triage::Fix& fix : fixes)
    out.push_back(with_fix(command, fix).value_or(std::vector<std::string>{}));
  return out;
}

}  // namespace oomtriage::daemon
