// daemon/main.cc
//
// The oomtriage command line: argv -> a subcommand -> an exit code (0 ok, 1 bad input or usage,
// 2 environment failure). Each subcommand lives in its own file; this one only wires them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "daemon/fix_command.h"
#include "daemon/scan_command.h"
#include "parsers/event.h"

namespace {

constexpr const char* kVersion = "0.1.0";

}  // namespace

int main(int argc, char** argv) {
  using namespace oomtriage;
  CLI::App app{"oomtriage: finds out-of-memory crashes in training logs and ranks the fixes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);

  std::string state_dir;
  bool verbose = false;
  std::string color = "auto";
  app.add_option("--state-dir", state_dir, "Where the store lives")->option_text("DIR");
  app.add_flag("--verbose", verbose, "Say more on stderr");
  app.add_option("--color", color, "Colour the output")
      ->check(CLI::IsMember({"auto", "always", "never"}));

  daemon::ScanOptions scan;
  std::string trainer = "auto";
  CLI::App* scan_cmd = app.add_subcommand("scan", "Analyse logs once and print what happened");
  scan_cmd->add_option("LOG", scan.logs, "Training log files")->required();
  scan_cmd->add_option("--config", scan.config, "The job config (default: found beside the log)");
  scan_cmd->add_option("--trainer", trainer, "The trainer that wrote the log")
      ->check(CLI::IsMember({"auto", "ai-toolkit", "sd-scripts", "diffusers", "simpletuner",
                             "onetrainer", "transformers", "comfyui", "unknown"}));
  scan_cmd->add_flag("--json", scan.json, "Print the JSON contract instead of text");

  daemon::FixOptions fix;
  CLI::App* fix_cmd =
      app.add_subcommand("fix", "Print a diff of the job config that applies one ranked fix");
  fix_cmd->add_option("LOG", fix.log, "The training log")->required();
  fix_cmd->add_option("--config", fix.config, "The job config (default: found beside the log)");
  auto* fix_id = fix_cmd->add_option("--fix", fix.fix_id, "A fix id (default: the top-ranked fix)");
  fix_cmd->add_option("--rank", fix.rank, "The fix at this rank")->excludes(fix_id);
  fix_cmd->add_option("--write", fix.write_to, "Write the patched config to this file");

  CLI::App* version_cmd = app.add_subcommand("version", "Print the version");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 1;
  }

  const daemon::ColorMode color_mode = color == "always"  ? daemon::ColorMode::kAlways
                                       : color == "never" ? daemon::ColorMode::kNever
                                                          : daemon::ColorMode::kAuto;
  if (version_cmd->parsed()) {
    fmt::print("oomtriage {}\n", kVersion);
    return 0;
  }
  if (fix_cmd->parsed()) {
    return daemon::run_fix(fix);
  }
  if (scan_cmd->parsed()) {
    scan.trainer = parsers::trainer_from_string(trainer).value_or(parsers::Trainer::kUnknown);
    scan.color = color_mode;
    return daemon::run_scan(scan);
  }
  return 1;
}
