// daemon/main.cc
//
// The oomtriage command line: argv -> a subcommand -> an exit code (0 ok, 1 bad input or usage,
// 2 environment failure). Each subcommand lives in its own file; this one only wires them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/service/daemon.h"
#include "daemon/common/daemon_config.h"
#include "daemon/cli/alerts_command.h"
#include "daemon/cli/fix_command.h"
#include "daemon/cli/report_command.h"
#include "daemon/cli/run_command.h"
#include "daemon/cli/scan_command.h"
#include "daemon/common/version.h"
#include "daemon/render/did_you_mean.h"
#include "db/state_dir.h"
#include "parsers/event.h"
#include "parsers/log_analyzer.h"
#include "parsers/oom_patterns.h"

namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

std::string store_path(const std::string& state_dir_option, const std::string& config_state_dir) {
  std::string dir = state_dir_option.empty() ? config_state_dir : state_dir_option;
  if (dir.empty()) {
    dir = oomtriage::db::default_state_dir(
        {env("STATE_DIRECTORY"), env("XDG_STATE_HOME"), env("HOME"), ::geteuid() == 0});
  }
  return (std::filesystem::path(dir) / "oomtriage.db").string();
}

const std::vector<std::string> kSubcommands = {"scan", "fix",          "daemon", "watch",
                                               "jobs", "report",       "alert",  "alerts",
                                               "run",  "check-config", "version"};

// The first word that is neither an option nor an option's value, when it names no subcommand.
std::optional<std::string> unknown_subcommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--state-dir" || arg == "--store" || arg == "--color") {
      ++i;  // its value
      continue;
    }
    if (arg.starts_with("-")) continue;
    if (std::find(kSubcommands.begin(), kSubcommands.end(), arg) != kSubcommands.end()) {
      return std::nullopt;
    }
    return std::string(arg);
  }
  return std::nullopt;
}

// --trainer: a name or alias trainer_from_string knows, else the closest names.
std::string known_trainer(const std::string& name) {
  using namespace oomtriage;
  if (parsers::trainer_from_string(name)) return "";
  const auto close = daemon::close_matches(name, parsers::trainer_names());
  return "unknown trainer '" + name + "'" +
         (close.empty() ? ""
                        : "; did you mean " + fmt::format("{}", fmt::join(close, ", ")) + "?") +
         " (ai-toolkit, sd-scripts, diffusers, simpletuner, onetrainer, transformers, comfyui, "
         "auto)";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace oomtriage;
  CLI::App app{"oomtriage: finds out-of-memory crashes in training logs and ranks the fixes"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  app.set_version_flag("--version", kVersion);

  // A mistyped subcommand: CLI11 would only say that one is required.
  if (auto unknown = unknown_subcommand(argc, argv)) {
    const auto close = daemon::close_matches(*unknown, kSubcommands);
    fmt::print(stderr, "oomtriage: unknown command '{}'{}\nRun with --help for the commands.\n",
               *unknown, close.empty() ? "" : "; did you mean '" + close[0] + "'?");
    return 1;
  }

  std::string state_dir;
  bool verbose = false;
  std::string color = "auto";
  app.add_option("--state-dir", state_dir, "Where the store lives")->option_text("DIR");
  std::string store_option;
  app.add_option("--store", store_option,
                 "The store jobs and report read: a SQLite file or postgresql://... (the fleet "
                 "store); default $OOMTRIAGE_STORE, else the state dir's")
      ->option_text("URL");
  app.add_flag("--verbose", verbose, "Say more on stderr");
  app.add_option("--color", color, "Colour the output")
      ->check(CLI::IsMember({"auto", "always", "never"}));

  daemon::ScanOptions scan;
  std::string trainer = "auto";
  CLI::App* scan_cmd = app.add_subcommand("scan", "Analyse logs once and print what happened");
  scan_cmd->add_option("LOG", scan.logs, "Training logs, folders (walked) or - (standard input)")
      ->required();
  scan_cmd->add_option("--glob", scan.globs,
                       "In folders, the log names to read (default: log.txt, *.log, *.out, *.err)");
  bool follow = false;
  scan_cmd->add_flag("--follow,-f", follow, "Follow one log as it grows, printing each incident");
  scan_cmd->add_option("--config", scan.config, "The job config (default: found beside the log)");
  scan_cmd->add_option("--trainer", trainer, "The trainer that wrote the log (kohya = sd-scripts)")
      ->check(known_trainer);
  scan_cmd->add_flag("--json", scan.json, "Print the JSON contract instead of text");
  scan_cmd->add_flag("--fail-on-oom", scan.fail_on_oom,
                     "Exit 3 when a log shows a fatal OOM (for scripts and CI)");

  daemon::FixOptions fix;
  CLI::App* fix_cmd =
      app.add_subcommand("fix", "Print a diff of the job config that applies one ranked fix");
  fix_cmd->add_option("LOG", fix.log, "The training log")->required();
  fix_cmd->add_option("--config", fix.config, "The job config (default: found beside the log)");
  auto* fix_id = fix_cmd->add_option("--fix", fix.fix_id, "A fix id (default: the top-ranked fix)");
  fix_cmd->add_option("--rank", fix.rank, "The fix at this rank")->excludes(fix_id);
  fix_cmd->add_option("--write", fix.write_to, "Write the patched config to this file");

  std::string daemon_config_path = "/etc/oomtriage/oomtriage.yaml";
  CLI::App* daemon_cmd = app.add_subcommand("daemon", "Run the service (systemd starts this)");
  daemon_cmd->add_option("--config", daemon_config_path, "The daemon config");
  bool backfill = false;
  daemon_cmd->add_flag("--backfill", backfill,
                       "On the first start, read the logs already there from their beginning");

  std::vector<std::string> watch_dirs;
  std::string webhook;
  CLI::App* watch_cmd =
      app.add_subcommand("watch", "Run the daemon in the foreground on training folders");
  watch_cmd->add_option("DIR", watch_dirs, "Training folders (AI Toolkit: <dir>/<job>/log.txt)")
      ->required();
  watch_cmd->add_flag("--backfill", backfill,
                      "On the first start, read the logs already there from their beginning");
  watch_cmd->add_option("--webhook", webhook,
                        "Also send alerts to this webhook (Alertmanager webhook v4 JSON)");

  bool jobs_json = false;
  std::string host_filter;
  std::optional<std::string> reader_config;
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "Jobs known to the store, newest first");
  jobs_cmd->add_flag("--json", jobs_json, "Print JSON");
  jobs_cmd->add_option("--host", host_filter, "Only this node's jobs (a fleet store)");
  std::string jobs_since;
  daemon::JobsFilter jobs_filter;
  jobs_cmd->add_option("--since", jobs_since, "Only jobs seen in this long (90s, 30m, 24h, 7d)")
      ->check([](const std::string& text) -> std::string {
        return daemon::parse_duration(text) ? "" : "a duration like 90s, 30m, 24h or 7d";
      });
  jobs_cmd->add_option("--outcome", jobs_filter.outcome, "Only jobs whose newest run ended so")
      ->check(CLI::IsMember(
          {"crashed_oom", "crashed_other", "completed", "stopped", "running", "unknown"}));
  jobs_cmd->add_option("--limit", jobs_filter.limit, "At most this many (newest first)");
  jobs_cmd->add_option("--config", reader_config, "Read the store this daemon config names");

  std::string report_job;
  bool report_json = false;
  bool report_markdown = false;
  std::string report_html;
  CLI::App* report_cmd = app.add_subcommand("report", "The story of one job");
  report_cmd->add_option("JOB", report_job, "The job's name (default: the newest that crashed)");
  CLI::Option* report_json_opt = report_cmd->add_flag("--json", report_json, "Print JSON");
  CLI::Option* report_markdown_opt = report_cmd->add_flag(
      "--markdown", report_markdown, "Print a short Markdown version for chat");
  report_cmd
      ->add_option("--html", report_html,
                   "Write a self-contained HTML page (runs, loss curve, memory, fixes) to FILE")
      ->excludes(report_json_opt)
      ->excludes(report_markdown_opt);
  report_json_opt->excludes(report_markdown_opt);
  report_cmd->add_option("--host", host_filter, "The node whose job it is (a fleet store)");
  report_cmd->add_option("--config", reader_config, "Read the store this daemon config names");

  std::string alert_config_path = "/etc/oomtriage/oomtriage.yaml";
  std::optional<std::string> alert_receiver;
  CLI::App* alert_cmd = app.add_subcommand("alert", "Alert receivers");
  alert_cmd->require_subcommand(1);
  CLI::App* alert_test_cmd = alert_cmd->add_subcommand("test", "Send a sample alert");
  alert_test_cmd->add_option("--config", alert_config_path, "The daemon config");
  alert_test_cmd->add_option("--receiver", alert_receiver, "Only this receiver (its name)");

  daemon::RunOptions run;
  std::string run_trainer = "auto";
  int backoff_seconds = 10;
  CLI::App* run_cmd = app.add_subcommand(
      "run", "Run a trainer, analyse its output live; with --heal restart it with the next fix");
  run_cmd->add_flag("--heal", run.heal,
                    "After an OOM crash apply the next resume-safe fix and resume the job");
  run_cmd->add_option("--max-attempts", run.max_attempts, "Attempts in all (default 3)")
      ->check(CLI::Range(1, 20));
  run_cmd->add_option("--job", run.job, "The job's name (default: from the config or the log)");
  run_cmd->add_option("--trainer", run_trainer, "The trainer (default: from its output)")
      ->check(known_trainer);
  run_cmd->add_option("--config", run.config,
                      "The job config (default: the config file the command names)");
  run_cmd->add_option("--log", run.log, "Also write the output here (appended)");
  run_cmd
      ->add_option("--backoff", backoff_seconds,
                   "Seconds before the second attempt, doubled after (default 10)")
      ->check(CLI::Range(0, 3600));
  std::optional<std::string> run_daemon_config;
  std::string run_webhook;
  run_cmd->add_option("--daemon-config", run_daemon_config,
                      "Send alerts to this daemon config's receivers (default: "
                      "/etc/oomtriage/oomtriage.yaml when it exists)");
  run_cmd->add_option("--webhook", run_webhook,
                      "Send alerts to this webhook (Alertmanager webhook v4 JSON)");
  run_cmd->add_option("COMMAND", run.command, "The trainer's command, after --")->required();

  bool alerts_json = false;
  bool alerts_pending = false;
  bool alerts_failed = false;
  int64_t resend_id = 0;
  CLI::App* alerts_cmd =
      app.add_subcommand("alerts", "The alert outbox: what was sent, what waits, what failed");
  alerts_cmd->add_flag("--json", alerts_json, "Print JSON");
  auto* pending_flag = alerts_cmd->add_flag("--pending", alerts_pending, "Only those waiting");
  alerts_cmd->add_flag("--failed", alerts_failed, "Only those given up on")->excludes(pending_flag);
  CLI::App* resend_cmd = alerts_cmd->add_subcommand("resend", "Send a failed alert again");
  resend_cmd->add_option("ID", resend_id, "The alert's id (from `oomtriage alerts`)")->required();

  std::string check_config_path = "/etc/oomtriage/oomtriage.yaml";
  CLI::App* check_config_cmd = app.add_subcommand(
      "check-config", "Check a daemon config as the daemon would, then exit (like nginx -t)");
  check_config_cmd->add_option("FILE", check_config_path, "The daemon config");

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
  // A pattern that does not compile would match nothing and miss every OOM in silence. Only the
  // commands that read logs compile the tables; `jobs` and `report` read the store.
  const bool reads_logs = daemon_cmd->parsed() || watch_cmd->parsed() || fix_cmd->parsed() ||
                          scan_cmd->parsed() || run_cmd->parsed();
  if (reads_logs) {
    // The OOM table's set is the slowest to compile (~6 ms, a third of a small scan's time): a
    // second core builds it while this one builds the other tables, then checks it built.
    std::thread oom_table([] { parsers::oom_patterns_ok(nullptr); });
    std::string error;
    const bool ok = parsers::parser_patterns_ok(&error);
    oom_table.join();
    if (!ok) {
      fmt::print(stderr, "oomtriage: internal error: {}\n", error);
      return 2;
    }
  }
  if (check_config_cmd->parsed()) {
    auto config = daemon::load_daemon_config(check_config_path);
    if (!config) {
      fmt::print(stderr, "oomtriage: {}\n", config.error().message);
      return config.error().code == ErrorCode::kIo ? 2 : 1;
    }
    for (const std::string& warning : config->warnings) {
      fmt::print(stderr, "oomtriage: warning: {}\n", warning);
    }
    fmt::print(
        "{}: ok ({} watch rule(s), {} receiver(s){}{})\n", check_config_path, config->watch.size(),
        config->alerts.size(), config->store.empty() ? "" : ", a fleet store",
        config->warnings.empty() ? "" : fmt::format(", {} warning(s)", config->warnings.size()));
    return 0;
  }
  if (alert_test_cmd->parsed()) {
    auto config = daemon::load_daemon_config(alert_config_path);
    if (!config) {
      fmt::print(stderr, "oomtriage: {}\n", config.error().message);
      return config.error().code == ErrorCode::kIo ? 2 : 1;
    }
    return daemon::run_alert_test(*config, alert_receiver);
  }
  if (daemon_cmd->parsed()) {
    auto config = daemon::load_daemon_config(daemon_config_path);
    if (!config) {
      fmt::print(stderr, "oomtriage: {}\n", config.error().message);
      return config.error().code == ErrorCode::kIo ? 2 : 1;
    }
    const std::string path = store_path(state_dir, config->state_dir);
    config->backfill = config->backfill || backfill;
    return daemon::run_daemon(std::move(*config), path, verbose);
  }
  if (watch_cmd->parsed()) {
    for (const auto& dir : watch_dirs) {
      if (!std::filesystem::is_directory(dir)) {
        fmt::print(stderr, "oomtriage: {}: not a directory\n", dir);
        return 1;
      }
    }
    daemon::DaemonConfig inline_config = daemon::inline_watch_config(watch_dirs);
    inline_config.backfill = backfill;
    if (!webhook.empty()) {
      if (webhook.rfind("http://", 0) != 0 && webhook.rfind("https://", 0) != 0) {
        fmt::print(stderr, "oomtriage: --webhook must be an http:// or https:// URL\n");
        return 1;
      }
      daemon::Receiver receiver;
      receiver.name = "webhook";
      receiver.type = "webhook";
      receiver.url = webhook;
      inline_config.alerts.push_back(receiver);
    }
    return daemon::run_daemon(std::move(inline_config), store_path(state_dir, ""), verbose);
  }
  if (jobs_cmd->parsed() || report_cmd->parsed()) {
    // --store, else the daemon config's fleet store, else $OOMTRIAGE_STORE, else this node's.
    daemon::StoreTarget target{store_option, host_filter};
    std::string config_state_dir;
    if (reader_config) {
      auto config = daemon::load_daemon_config(*reader_config);
      if (!config) {
        fmt::print(stderr, "oomtriage: {}\n", config.error().message);
        return config.error().code == ErrorCode::kIo ? 2 : 1;
      }
      if (target.location.empty()) target.location = config->store;
      config_state_dir = config->state_dir;
    }
    if (target.location.empty()) target.location = env("OOMTRIAGE_STORE").value_or("");
    if (target.location.empty()) target.location = store_path(state_dir, config_state_dir);
    if (jobs_cmd->parsed()) {
      if (!jobs_since.empty()) jobs_filter.since_seconds = daemon::parse_duration(jobs_since);
      return daemon::run_jobs(target, jobs_filter, jobs_json, color_mode);
    }
    daemon::ReportOptions report_options;
    report_options.color = color_mode;
    report_options.format = report_json            ? daemon::ReportFormat::kJson
                            : report_markdown      ? daemon::ReportFormat::kMarkdown
                            : !report_html.empty() ? daemon::ReportFormat::kHtml
                                                   : daemon::ReportFormat::kText;
    report_options.html_path = report_html;
    return daemon::run_report(target, report_job, report_options);
  }
  if (resend_cmd->parsed()) return daemon::run_alerts_resend(store_path(state_dir, ""), resend_id);
  if (alerts_cmd->parsed()) {
    return daemon::run_alerts_list(store_path(state_dir, ""),
                                   alerts_pending  ? "pending"
                                   : alerts_failed ? "failed"
                                                   : "",
                                   alerts_json, color_mode);
  }
  if (fix_cmd->parsed()) {
    fix.store = store_path(state_dir, "");
    return daemon::run_fix(fix);
  }
  if (run_cmd->parsed()) {
    run.trainer = parsers::trainer_from_string(run_trainer).value_or(parsers::Trainer::kUnknown);
    run.backoff = std::chrono::seconds(backoff_seconds);
    run.store = store_path(state_dir, "");
    run.color = color_mode;
    std::error_code ec;
    if (run_daemon_config || std::filesystem::exists(daemon_config_path, ec)) {
      auto config = daemon::load_daemon_config(run_daemon_config.value_or(daemon_config_path));
      if (!config) {
        fmt::print(stderr, "oomtriage: {}\n", config.error().message);
        return 1;
      }
      run.alerts = std::move(*config);
    }
    if (!run_webhook.empty()) {
      if (run_webhook.rfind("http://", 0) != 0 && run_webhook.rfind("https://", 0) != 0) {
        fmt::print(stderr, "oomtriage: --webhook must be an http:// or https:// URL\n");
        return 1;
      }
      daemon::Receiver receiver;
      receiver.name = "webhook";
      receiver.type = "webhook";
      receiver.url = run_webhook;
      run.alerts.alerts.push_back(receiver);
    }
    return daemon::run_supervised(run);
  }
  if (scan_cmd->parsed()) {
    scan.trainer = parsers::trainer_from_string(trainer).value_or(parsers::Trainer::kUnknown);
    scan.color = color_mode;
    scan.store = store_path(state_dir, "");
    if (follow) {
      if (scan.logs.size() != 1 || scan.logs[0] == "-") {
        fmt::print(stderr, "oomtriage: --follow takes one log file\n");
        return 1;
      }
      return daemon::run_follow(scan.logs[0], scan);
    }
    return daemon::run_scan(scan);
  }
  return 1;
}
