// daemon/cli/command_table.h
//
// The subcommands, declared once: name, one line of help, whether it reads logs (the pattern
// tables are compiled and checked first), its options and what it runs. `main()` builds the
// command line from this table and runs the subcommand that was named; `--help`, the man page
// test and the completion tests all see the same list. Exit codes: daemon/common/exit_codes.h.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace oomtriage::daemon {

// The options every subcommand takes (they may come before or after its name).
struct GlobalOptions {
  std::string state_dir;  // --state-dir
  std::string store;      // --store: what jobs and report read
  std::string color = "auto";
  bool verbose = false;
};

// One subcommand's options and what it does with them.
class Subcommand {
 public:
  virtual ~Subcommand() = default;
  // Adds its positional arguments, options and sub-subcommands to `app`, bound to its members.
  virtual void declare(CLI::App& app) = 0;
  // Runs once the command line parsed; returns the exit code.
  virtual int run(const GlobalOptions& global) = 0;
};

struct CommandEntry {
  std::string_view name;
  std::string_view help;
  bool reads_logs;  // compiles and checks the pattern tables before it runs
  std::unique_ptr<Subcommand> (*make)();
};

// Every subcommand, in the order --help lists them.
std::span<const CommandEntry> command_table();

}  // namespace oomtriage::daemon
