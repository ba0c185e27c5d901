// daemon/main.cc
//
// The oomtriage command line: argv -> the subcommand the table in daemon/cli/command_table.h
// names -> its exit code. Exit codes (daemon/common/exit_codes.h): 0 done, 1 bad input or usage,
// 2 the environment failed, 3 `scan --fail-on-oom` found a fatal OOM or `check` predicts the job
// will not fit, 4 `check` cannot know; `run` exits with its trainer's code.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/cli/command_table.h"
#include "daemon/common/did_you_mean.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/version.h"
#include "parsers/log_analyzer.h"
#include "parsers/oom_patterns.h"

namespace {

using namespace oomtriage;

// The first word that is neither an option nor an option's value, when it names no subcommand:
// CLI11 alone would only say that one is required.
std::optional<std::string> unknown_subcommand(int argc, char** argv,
                                              const std::vector<std::string>& names) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--state-dir" || arg == "--store" || arg == "--color") {
      ++i;  // its value
      continue;
    }
    if (arg.starts_with("-")) continue;
    if (std::find(names.begin(), names.end(), arg) != names.end()) return std::nullopt;
    return std::string(arg);
  }
  return std::nullopt;
}

// A pattern that does not compile would match nothing and miss every OOM in silence.
bool patterns_compile() {
  // The OOM table's set is the slowest to compile (~6 ms, a third of a small scan's time): a
  // second core builds it while this one builds the other tables, then checks it built.
  // Its verdict is not needed here: parser_patterns_ok() asks again once it is built.
  std::thread oom_table([] { (void)parsers::oom_patterns_ok(); });
  const Result<Ok> compiled = parsers::parser_patterns_ok();
  oom_table.join();
  if (!compiled) fmt::print(stderr, "oomtriage: internal error: {}\n", compiled.error().message);
  return static_cast<bool>(compiled);
}

}  // namespace

int main(int argc, char** argv) {
  const auto table = daemon::command_table();
  std::vector<std::string> names;
  for (const daemon::CommandEntry& entry : table) names.emplace_back(entry.name);
  if (auto unknown = unknown_subcommand(argc, argv, names)) {
    const auto close = daemon::close_matches(*unknown, names);
    fmt::print(stderr, "oomtriage: unknown command '{}'{}\nRun with --help for the commands.\n",
               *unknown, close.empty() ? "" : "; did you mean '" + close[0] + "'?");
    return daemon::kExitBadInput;
  }

  CLI::App app{"oomtriage: finds out-of-memory crashes in training logs and ranks the fixes"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  app.set_version_flag("--version", kVersion);
  app.footer(daemon::kExitCodesHelp);
  daemon::GlobalOptions global;
  app.add_option("--state-dir", global.state_dir, "Where the store lives")->option_text("DIR");
  app.add_option("--store", global.store,
                 "The store jobs and report read: a SQLite file or postgresql://... (the fleet "
                 "store); default $OOMTRIAGE_STORE, else the state dir's")
      ->option_text("URL");
  app.add_flag("--verbose", global.verbose, "Say more on stderr");
  app.add_option("--color", global.color, "Colour the output")
      ->check(CLI::IsMember({"auto", "always", "never"}));

  std::vector<std::pair<CLI::App*, std::unique_ptr<daemon::Subcommand>>> commands;
  for (const daemon::CommandEntry& entry : table) {
    CLI::App* cli = app.add_subcommand(std::string(entry.name), std::string(entry.help));
    auto command = entry.make();
    command->declare(*cli);
    commands.emplace_back(cli, std::move(command));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? daemon::kExitOk : daemon::kExitBadInput;
  }
  for (size_t i = 0; i < table.size(); ++i) {
    auto& [cli, command] = commands[i];
    if (!cli->parsed()) continue;
    if (table[i].reads_logs && !patterns_compile()) return daemon::kExitEnvironment;
    return command->run(global);
  }
  return daemon::kExitBadInput;
}
