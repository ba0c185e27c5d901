// daemon/cli/command_table.cc: each subcommand's options (CLI11) and the call into the file that
// does its work. Only wiring lives here: what a command does is in its own *_command.cc.
#include "daemon/cli/command_table.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/cli/alerts_command.h"
#include "daemon/cli/check_command.h"
#include "daemon/cli/filter_words.h"
#include "daemon/cli/fix_command.h"
#include "daemon/cli/report_command.h"
#include "daemon/cli/serve_command.h"
#include "daemon/cli/run_command.h"
#include "daemon/cli/scan_command.h"
#include "daemon/cli/top_command.h"
#include "daemon/common/daemon_config.h"
#include "daemon/common/did_you_mean.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/nvml_probe.h"
#include "daemon/common/version.h"
#include "daemon/service/daemon.h"
#include "db/state_dir.h"
#include "db/store.h"
#include "db/store_recovery.h"
#include "parsers/event.h"
#include "parsers/gpu_cards.h"
#include "parsers/trainer_table.h"

namespace oomtriage::daemon {

namespace {

constexpr const char* kDefaultDaemonConfig = "/etc/oomtriage/oomtriage.yaml";

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

// --state-dir, else the daemon config's state_dir, else systemd's or XDG's.
std::string store_path(const GlobalOptions& global, const std::string& config_state_dir = "") {
  std::string dir = global.state_dir.empty() ? config_state_dir : global.state_dir;
  if (dir.empty()) {
    dir = db::default_state_dir(
        {env("STATE_DIRECTORY"), env("XDG_STATE_HOME"), env("HOME"), ::geteuid() == 0});
  }
  return (std::filesystem::path(dir) / "oomtriage.db").string();
}

ColorMode color_mode(const GlobalOptions& global) {
  return global.color == "always"  ? ColorMode::kAlways
         : global.color == "never" ? ColorMode::kNever
                                   : ColorMode::kAuto;
}

// --trainer: a name or alias trainer_from_string knows, else the closest names.
std::string known_trainer(const std::string& name) {
  if (parsers::trainer_from_string(name)) return "";
  const auto close = close_matches(name, parsers::trainer_names());
  std::vector<std::string_view> known;
  for (const parsers::TrainerRow& row : parsers::trainer_table()) {
    if (row.trainer != parsers::Trainer::kUnknown) known.push_back(row.name);
  }
  known.push_back("auto");
  return "unknown trainer '" + name + "'" +
         (close.empty() ? ""
                        : "; did you mean " + fmt::format("{}", fmt::join(close, ", ")) + "?") +
         fmt::format(" ({})", fmt::join(known, ", "));
}

// A daemon config, or the exit code of its one-line error.
Result<DaemonConfig> load_config_or_say(const std::string& path) {
  auto config = load_daemon_config(path);
  if (!config) fmt::print(stderr, "oomtriage: {}\n", config.error().message);
  return config;
}

std::optional<Receiver> webhook_receiver(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) return std::nullopt;
  Receiver receiver;
  receiver.name = "webhook";
  receiver.type = "webhook";
  receiver.url = url;
  return receiver;
}

class ScanCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.add_option("LOG", options_.logs, "Training logs, folders (walked) or - (standard input)")
        ->required();
    app.add_option("--glob", options_.globs,
                   "In folders, the log names to read (default: log.txt, *.log, *.out, *.err)");
    app.add_flag("--follow,-f", follow_, "Follow one log as it grows, printing each incident");
    app.add_option("--config", options_.config, "The job config (default: found beside the log)");
    app.add_option("--trainer", trainer_, "The trainer that wrote the log (kohya = sd-scripts)")
        ->check(known_trainer);
    app.add_flag("--json", options_.json, "Print the JSON contract instead of text");
    app.add_flag("--fail-on-oom", options_.fail_on_oom,
                 "Exit 3 when a log shows a fatal OOM (for scripts and CI)");
  }
  int run(const GlobalOptions& global) override {
    options_.trainer = parsers::trainer_from_string(trainer_).value_or(parsers::Trainer::kUnknown);
    options_.color = color_mode(global);
    options_.store = store_path(global);
    if (!follow_) return run_scan(options_);
    if (options_.logs.size() != 1 || options_.logs[0] == "-") {
      fmt::print(stderr, "oomtriage: --follow takes one log file\n");
      return kExitBadInput;
    }
    return run_follow(options_.logs[0], options_);
  }

 private:
  ScanOptions options_;
  std::string trainer_ = "auto";
  bool follow_ = false;
};

class CheckCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app_ = &app;
    // One positional for both forms: CLI11 fills positionals in order, so a COMMAND option
    // declared after CONFIG would lose its first word to CONFIG. Whether `--` was given says
    // which form this is (run()).
    app.add_option("CONFIG", words_,
                   "The job's config file (any trainer's), or after -- the trainer's command line");
    app.add_option("--spec", options_.spec, "The model's own input: a spec JSON file");
    app.add_option("--trainer", options_.trainer,
                   "The trainer, when the config's content or the command does not say")
        ->check(known_trainer);
    app.add_option("--gpu", options_.gpu,
                   "The card: 24, 24GB, 24GiB, a card name ('RTX 4090', A100-80GB, H100), or auto "
                   "(NVML; the default)");
    app.add_option("--model", options_.model,
                   "The model family, when the config or command does not name one the model "
                   "knows (flux1-dev, sdxl, qwen-image, wan21-t2v-14b, ...)");
    app.add_flag("--json", options_.json, "Print one JSON object");
    app.add_flag("--explain", options_.explain, "Print the spec read and what was assumed");
  }
  int run(const GlobalOptions& global) override {
    const std::vector<std::string> rest = app_->remaining();
    const bool command = std::find(rest.begin(), rest.end(), "--") != rest.end();
    if (command) {
      options_.command = words_;
    } else if (words_.size() == 1) {
      options_.config = words_[0];
    } else if (words_.size() > 1) {
      fmt::print(stderr, "oomtriage: check takes one CONFIG; a command line goes after --\n");
      return kExitBadInput;
    }
    options_.store = store_path(global);
    options_.color = color_mode(global);
    return run_check(options_);
  }

 private:
  CLI::App* app_ = nullptr;
  std::vector<std::string> words_;
  CheckOptions options_;
};

class FixCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.add_option("LOG", options_.log, "The training log")->required();
    app.add_option("--config", options_.config, "The job config (default: found beside the log)");
    auto* fix_id =
        app.add_option("--fix", options_.fix_id, "A fix id (default: the top-ranked fix)");
    app.add_option("--rank", options_.rank, "The fix at this rank")->excludes(fix_id);
    app.add_option("--write", options_.write_to, "Write the patched config to this file");
  }
  int run(const GlobalOptions& global) override {
    options_.store = store_path(global);
    return run_fix(options_);
  }

 private:
  FixOptions options_;
};

class DaemonCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.add_option("--config", config_path_, "The daemon config");
    app.add_flag("--backfill", backfill_,
                 "On the first start, read the logs already there from their beginning");
  }
  int run(const GlobalOptions& global) override {
    auto config = load_config_or_say(config_path_);
    if (!config) return exit_code_for(config.error());
    const std::string path = store_path(global, config->state_dir);
    config->backfill = config->backfill || backfill_;
    return run_daemon(std::move(*config), path, global.verbose, visible_card_memory);
  }

 private:
  std::string config_path_ = kDefaultDaemonConfig;
  bool backfill_ = false;
};

class WatchCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.add_option("DIR", dirs_, "Training folders (AI Toolkit: <dir>/<job>/log.txt)")->required();
    app.add_flag("--backfill", backfill_,
                 "On the first start, read the logs already there from their beginning");
    app.add_option("--webhook", webhook_,
                   "Also send alerts to this webhook (Alertmanager webhook v4 JSON)");
  }
  int run(const GlobalOptions& global) override {
    for (const auto& dir : dirs_) {
      if (!std::filesystem::is_directory(dir)) {
        fmt::print(stderr, "oomtriage: {}: not a directory\n", dir);
        return kExitBadInput;
      }
    }
    DaemonConfig config = inline_watch_config(dirs_);
    config.backfill = backfill_;
    if (!webhook_.empty()) {
      auto receiver = webhook_receiver(webhook_);
      if (!receiver) {
        fmt::print(stderr, "oomtriage: --webhook must be an http:// or https:// URL\n");
        return kExitBadInput;
      }
      config.alerts.push_back(std::move(*receiver));
    }
    return run_daemon(std::move(config), store_path(global), global.verbose, visible_card_memory);
  }

 private:
  std::vector<std::string> dirs_;
  bool backfill_ = false;
  std::string webhook_;
};

// `jobs`, `report` and `top` read the same store: --store, else the daemon config's fleet store,
// else $OOMTRIAGE_STORE, else this node's.
class StoreReaderCommand : public Subcommand {
 protected:
  void declare_host(CLI::App& app, const char* help) { app.add_option("--host", host_, help); }
  void declare_config(CLI::App& app) {
    app.add_option("--config", reader_config_, "Read the store this daemon config names");
  }
  Result<StoreTarget> target(const GlobalOptions& global) const {
    StoreTarget target{global.store, host_, ""};
    std::string config_state_dir;
    if (reader_config_) {
      auto config = load_config_or_say(*reader_config_);
      if (!config) return config.error();
      if (target.location.empty()) target.location = config->store;
      config_state_dir = config->state_dir;
      target.web_url = config->web_url;
    } else if (std::error_code ec; std::filesystem::exists(kDefaultDaemonConfig, ec)) {
      // The installed daemon's web_url, for the job's page; a config that does not read (or may
      // not be read by this user) only costs the link.
      if (auto config = load_daemon_config(kDefaultDaemonConfig)) target.web_url = config->web_url;
    }
    if (target.location.empty()) target.location = env("OOMTRIAGE_STORE").value_or("");
    if (target.location.empty()) target.location = store_path(global, config_state_dir);
    return target;
  }

 private:
  std::string host_;
  std::optional<std::string> reader_config_;
};

class JobsCommand final : public StoreReaderCommand {
 public:
  void declare(CLI::App& app) override {
    app.add_flag("--json", json_, "Print JSON");
    declare_host(app, "Only this node's jobs (a fleet store)");
    app.add_option("--since", since_, "Only jobs seen in this long (90s, 30m, 24h, 7d)")
        ->check([](const std::string& text) -> std::string {
          return parse_duration(text) ? "" : "a duration like 90s, 30m, 24h or 7d";
        });
    app.add_option("--outcome", filter_.outcome, "Only jobs whose newest run ended so")
        ->check(CLI::IsMember(
            {"crashed_oom", "crashed_other", "completed", "stopped", "running", "unknown"}));
    app.add_option("--phase", filter_.phase, "Only jobs whose newest OOM was in this phase")
        ->check(CLI::IsMember({"model_load", "quantize", "cache_latents", "cache_text_embeddings",
                               "train_step", "sampling", "saving", "unknown"}));
    app.add_option("--trainer", filter_.trainer,
                   "Only jobs of this trainer (ai-toolkit or aitk, sd-scripts or kohya, ...)")
        ->check(known_trainer);
    app.add_option("--family", filter_.family,
                   "Only jobs whose newest OOM was of this model family, by any of its names "
                   "(flux.1, flux1-dev, FLUX, sdxl, wan2.2, ...)")
        ->check(known_family);
    app.add_option("--name", filter_.text, "Only jobs whose name holds this text (any case)");
    app.add_option("--limit", filter_.limit, "At most this many (newest first)");
    declare_config(app);
  }
  int run(const GlobalOptions& global) override {
    auto store = target(global);
    if (!store) return exit_code_for(store.error());
    if (!since_.empty()) filter_.since_seconds = parse_duration(since_);
    return run_jobs(*store, filter_, json_, color_mode(global));
  }

 private:
  bool json_ = false;
  std::string since_;
  JobsFilter filter_;
};

class ReportCommand final : public StoreReaderCommand {
 public:
  void declare(CLI::App& app) override {
    app.add_option("JOB", job_,
                   "The job's name, or a log or job folder to read (default: the newest that "
                   "crashed)");
    CLI::Option* json = app.add_flag("--json", json_, "Print JSON");
    CLI::Option* markdown =
        app.add_flag("--markdown", markdown_, "Print a short Markdown version for chat");
    app.add_option("--html", html_,
                   "Write a self-contained HTML page (runs, loss curve, memory, fixes) to FILE")
        ->excludes(json)
        ->excludes(markdown);
    json->excludes(markdown);
    declare_host(app, "The node whose job it is (a fleet store)");
    declare_config(app);
  }
  int run(const GlobalOptions& global) override {
    auto store = target(global);
    if (!store) return exit_code_for(store.error());
    ReportOptions options;
    options.color = color_mode(global);
    options.format = json_            ? ReportFormat::kJson
                     : markdown_      ? ReportFormat::kMarkdown
                     : !html_.empty() ? ReportFormat::kHtml
                                      : ReportFormat::kText;
    options.html_path = html_;
    return run_report(*store, job_, options);
  }

 private:
  std::string job_;
  bool json_ = false;
  bool markdown_ = false;
  std::string html_;
};

class TopCommand final : public StoreReaderCommand {
 public:
  void declare(CLI::App& app) override {
    app.add_flag("--once", options_.once, "Print one frame and exit (for scripts)");
    app.add_option("--interval", options_.interval_seconds, "Seconds between refreshes")
        ->capture_default_str();
    declare_host(app, "Only this node's jobs (a fleet store)");
    declare_config(app);
  }
  int run(const GlobalOptions& global) override {
    auto store = target(global);
    if (!store) return exit_code_for(store.error());
    options_.store = *store;
    options_.color = color_mode(global);
    return run_top(options_);
  }

 private:
  TopOptions options_;
};

class ServeCommand final : public StoreReaderCommand {
 public:
  void declare(CLI::App& app) override {
    app.add_option("--listen", options_.listen,
                   "Address and port (127.0.0.1:9840); beyond loopback only with --access-file")
        ->capture_default_str();
    app.add_option("--access-file", options_.access_file,
                   "Bearer tokens and basic-auth users (`token SECRET`, `user:$hash`), mode 600")
        ->check(CLI::ExistingFile);
    app.add_flag("--allow-writer-role", options_.allow_writer_role,
                 "Serve a fleet store whose role can write (read-only transactions all the same)");
    app.add_option("--threads", options_.threads, "Requests served at once")
        ->check(CLI::Range(1u, 64u))
        ->capture_default_str();
    app.add_option("--max-connections", options_.max_connections,
                   "Clients connected at once; the next is answered 503")
        ->check(CLI::Range(size_t{1}, size_t{10000}))
        ->capture_default_str();
    app.add_option("--max-per-address", options_.max_per_address,
                   "Connections from one address (an IPv6 /64) at once; the next is answered "
                   "503 (0: no limit)")
        ->check(CLI::Range(size_t{0}, size_t{10000}))
        ->capture_default_str();
    app.add_option("--header-timeout", header_timeout_seconds_,
                   "Seconds a client has to send its request's line and headers")
        ->check(CLI::Range(0.1, 300.0))
        ->capture_default_str();
    app.add_option("--client-timeout", client_timeout_seconds_,
                   "Seconds a client has to send its whole request")
        ->check(CLI::Range(0.1, 300.0))
        ->capture_default_str();
    app.add_option("--days", options_.fleet_days, "How many days /fleet draws")
        ->check(CLI::Range(1, 366))
        ->capture_default_str();
    declare_host(app, "Only this node's jobs (a fleet store)");
    declare_config(app);
  }
  int run(const GlobalOptions& global) override {
    auto store = target(global);
    if (!store) return exit_code_for(store.error());
    options_.store = *store;
    options_.client_timeout_ms = static_cast<int>(client_timeout_seconds_ * 1000);
    options_.header_timeout_ms = static_cast<int>(header_timeout_seconds_ * 1000);
    return run_serve(options_);
  }

 private:
  ServeOptions options_;
  double client_timeout_seconds_ = 10;
  double header_timeout_seconds_ = 5;
};

class AlertCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.require_subcommand(1);
    CLI::App* test = app.add_subcommand("test", "Send a sample alert");
    test->add_option("--config", config_path_, "The daemon config");
    test->add_option("--receiver", receiver_, "Only this receiver (its name)");
  }
  int run(const GlobalOptions&) override {
    auto config = load_config_or_say(config_path_);
    if (!config) return exit_code_for(config.error());
    return run_alert_test(*config, receiver_);
  }

 private:
  std::string config_path_ = kDefaultDaemonConfig;
  std::optional<std::string> receiver_;
};

class RunCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.add_flag("--heal", options_.heal,
                 "After an OOM crash apply the next resume-safe fix and resume the job");
    app.add_option("--max-attempts", options_.max_attempts, "Attempts in all (default 3)")
        ->check(CLI::Range(1, 20));
    app.add_option("--job", options_.job, "The job's name (default: from the config or the log)");
    app.add_option("--trainer", trainer_, "The trainer (default: from its output)")
        ->check(known_trainer);
    app.add_option("--config", options_.config,
                   "The job config (default: the config file the command names)");
    app.add_option("--log", options_.log, "Also write the output here (appended)");
    app.add_option("--backoff", backoff_seconds_,
                   "Seconds before the second attempt, doubled after (default 10)")
        ->check(CLI::Range(0, 3600));
    app.add_option("--daemon-config", daemon_config_,
                   "Send alerts to this daemon config's receivers (default: "
                   "/etc/oomtriage/oomtriage.yaml when it exists)");
    app.add_option("--webhook", webhook_,
                   "Send alerts to this webhook (Alertmanager webhook v4 JSON)");
    app.add_option("--gpu", options_.gpu,
                   "Judge the job config against this GPU before launching (24, 24GB, 24GiB, "
                   "a card name such as 'RTX 4090' or A100-80GB, or auto; default: the daemon "
                   "config's gpu_memory)")
        ->check([](const std::string& gpu) {
          if (gpu == "auto") return std::string();
          const Result<uint64_t> card = parsers::parse_card_memory(gpu);
          return card ? std::string() : card.error().message;
        });
    app.add_option("COMMAND", options_.command, "The trainer's command, after --")->required();
  }
  int run(const GlobalOptions& global) override {
    options_.trainer = parsers::trainer_from_string(trainer_).value_or(parsers::Trainer::kUnknown);
    options_.backoff = std::chrono::seconds(backoff_seconds_);
    options_.card_size = visible_card_memory;
    options_.store = store_path(global);
    options_.color = color_mode(global);
    std::error_code ec;
    if (daemon_config_ || std::filesystem::exists(kDefaultDaemonConfig, ec)) {
      auto config = load_config_or_say(daemon_config_.value_or(kDefaultDaemonConfig));
      if (!config) return exit_code_for(config.error());
      options_.alerts = std::move(*config);
    }
    if (!webhook_.empty()) {
      auto receiver = webhook_receiver(webhook_);
      if (!receiver) {
        fmt::print(stderr, "oomtriage: --webhook must be an http:// or https:// URL\n");
        return kExitBadInput;
      }
      options_.alerts.alerts.push_back(std::move(*receiver));
    }
    return run_supervised(options_);
  }

 private:
  RunOptions options_;
  std::string trainer_ = "auto";
  int backoff_seconds_ = 10;
  std::optional<std::string> daemon_config_;
  std::string webhook_;
};

class AlertsCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override {
    app.add_flag("--json", json_, "Print JSON");
    auto* pending = app.add_flag("--pending", pending_, "Only those waiting");
    app.add_flag("--failed", failed_, "Only those given up on")->excludes(pending);
    resend_ = app.add_subcommand("resend", "Send a failed alert again");
    resend_->add_option("ID", resend_id_, "The alert's id (from `oomtriage alerts`)")->required();
  }
  int run(const GlobalOptions& global) override {
    if (resend_->parsed()) return run_alerts_resend(store_path(global), resend_id_);
    return run_alerts_list(store_path(global),
                           pending_  ? "pending"
                           : failed_ ? "failed"
                                     : "",
                           json_, color_mode(global));
  }

 private:
  bool json_ = false;
  bool pending_ = false;
  bool failed_ = false;
  CLI::App* resend_ = nullptr;
  int64_t resend_id_ = 0;
};

class CheckConfigCommand final : public Subcommand {
 public:
  void declare(CLI::App& app) override { app.add_option("FILE", path_, "The daemon config"); }
  int run(const GlobalOptions& global) override {
    auto config = load_config_or_say(path_);
    if (!config) return exit_code_for(config.error());
    for (const std::string& warning : config->warnings) {
      fmt::print(stderr, "oomtriage: warning: {}\n", warning);
    }
    // The store the daemon would open: a recovery of it is worth a word before it starts. Read
    // only, so that any user (root too) leaves it, and what beside it, as it was.
    const std::string store = store_path(global, config->state_dir);
    struct stat st {};
    if (::stat(store.c_str(), &st) == 0) {
      if (auto opened = db::Store::open_read_only(store, db::ReadOnly::kOneCommand)) {
        if (const auto note = db::recovery_note(**opened))
          fmt::print(stderr, "oomtriage: note: {}\n", *note);
      }
    }
    fmt::print(
        "{}: ok ({} watch rule(s), {} receiver(s){}, {}{})\n", path_, config->watch.size(),
        config->alerts.size(), config->store.empty() ? "" : ", a fleet store",
        describe_preflight(*config),
        config->warnings.empty() ? "" : fmt::format(", {} warning(s)", config->warnings.size()));
    return kExitOk;
  }

 private:
  std::string path_ = kDefaultDaemonConfig;
};

class VersionCommand final : public Subcommand {
 public:
  void declare(CLI::App&) override {}
  int run(const GlobalOptions&) override {
    fmt::print("oomtriage {}\n", kVersion);
    return kExitOk;
  }
};

template <class T>
std::unique_ptr<Subcommand> make() {
  return std::make_unique<T>();
}

constexpr CommandEntry kCommands[] = {
    {"scan", "Analyse logs once and print what happened", true, make<ScanCommand>},
    {"check", "Predict before a job starts whether every phase fits the GPU, and what to change",
     false, make<CheckCommand>},
    {"fix", "Print a diff of the job config that applies one ranked fix", true, make<FixCommand>},
    {"daemon", "Run the service (systemd starts this)", true, make<DaemonCommand>},
    {"watch", "Run the daemon in the foreground on training folders", true, make<WatchCommand>},
    {"jobs", "Jobs known to the store, newest first", false, make<JobsCommand>},
    {"report", "The story of one job", false, make<ReportCommand>},
    {"top", "A live terminal view of the jobs, those that need someone first", false,
     make<TopCommand>},
    {"serve", "A read-only web view of the jobs, their reports and the fleet", false,
     make<ServeCommand>},
    {"alert", "Alert receivers", false, make<AlertCommand>},
    {"run", "Run a trainer, analyse its output live; with --heal restart it with the next fix",
     true, make<RunCommand>},
    {"alerts", "The alert outbox: what was sent, what waits, what failed", false,
     make<AlertsCommand>},
    {"check-config", "Check a daemon config as the daemon would, then exit (like nginx -t)", false,
     make<CheckConfigCommand>},
    {"version", "Print the version", false, make<VersionCommand>},
};

}  // namespace

std::span<const CommandEntry> command_table() { return kCommands; }

}  // namespace oomtriage::daemon
