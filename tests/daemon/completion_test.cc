// tests/daemon/completion_test.cc
//
// The bash, zsh and fish completions, asked in the real shells: every subcommand `--help` lists
// and every option each subcommand's `--help` lists is offered, values complete (trainers, fix
// ids, outcomes), and `report` offers the job names in the store. The lists in the scripts are
// written by hand; this keeps them in step with the binary. zsh's compadd and _files exist only
// inside its completion system, so they are stood in for by functions that print what they get.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <regex>
#include <set>
#include <sstream>

#include "daemon/common/clock.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const fs::path kScripts = fs::path(OOMTRIAGE_SOURCE_DIR) / "scripts";

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string run_capture(const std::string& command) { return run_shell(command).second; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// What `shell` offers for the command line `words` (the last one being completed).
std::set<std::string> completions(const std::string& shell, const std::vector<std::string>& words) {
  std::string out;
  if (shell == "bash") {
    std::string array;
    for (const auto& w : words) array += shell_quoted(w) + " ";
    out = run_capture(
        fmt::format("bash -c {} 2>/dev/null",
                    shell_quoted(fmt::format(
                        "source {}; COMP_WORDS=({}); COMP_CWORD={}; _oomtriage; printf '%s\\n' "
                        "\"${{COMPREPLY[@]}}\"",
                        shell_quoted((kScripts / "oomtriage.bash-completion").string()), array,
                        words.size() - 1))));
  } else if (shell == "fish") {
    std::string line;
    for (const auto& w : words) line += (line.empty() ? "" : " ") + w;
    out = run_capture(
        fmt::format("fish --no-config -c {} 2>/dev/null",
                    shell_quoted(fmt::format("source {}; complete -C {}",
                                             shell_quoted((kScripts / "oomtriage.fish").string()),
                                             shell_quoted(line)))));
    std::string names;
    for (const auto& l : lines_of(out)) names += l.substr(0, l.find('\t')) + "\n";
    out = names;
  } else {
    std::string array;
    for (const auto& w : words) array += shell_quoted(w) + " ";
    out = run_capture(fmt::format(
        "zsh -f -c {} 2>/dev/null",
        shell_quoted(fmt::format(
            "compadd() {{ local arr=0 a; for a in \"$@\"; do case $a in -a) arr=1;; --) ;; *) if "
            "(( arr )); then print -l -- ${{(P)a}}; else print -- $a; fi;; esac; done }}; "
            "_files() {{ print -- '<files>' }}; compdef() {{ }}; source {}; words=({}); "
            "CURRENT={}; _oomtriage",
            shell_quoted((kScripts / "oomtriage.zsh").string()), array, words.size()))));
  }
  // Real shells keep only what starts with the word being completed; the zsh stand-in does not.
  std::set<std::string> offered;
  for (const auto& l : lines_of(out)) {
    if (l.starts_with(words.back())) offered.insert(l);
  }
  return offered;
}

std::vector<std::string> subcommands() {
  const std::string help = run_capture(std::string(OOMTRIAGE_BINARY) + " --help");
  std::vector<std::string> out;
  const size_t at = help.find("Subcommands:");
  REQUIRE(at != std::string::npos);
  static const std::regex row(R"(^  ([a-z-]+) )");
  for (const auto& line : lines_of(help.substr(at))) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out.push_back(m[1]);
  }
  return out;
}

std::vector<std::string> long_options(const std::string& subcommand) {
  const std::string help =
      run_capture(std::string(OOMTRIAGE_BINARY) + " " + subcommand + " --help");
  std::vector<std::string> out;
  static const std::regex row(R"(^  (?:-[a-z],)?(--[a-z-]+))");
  for (const auto& line : lines_of(help)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out.push_back(m[1]);
  }
  return out;
}

void check_shell(const std::string& shell) {
  const std::vector<std::string> subs = subcommands();
  REQUIRE(subs.size() >= 10);
  const std::set<std::string> top = completions(shell, {"oomtriage", ""});
  for (const auto& sub : subs) {
    CAPTURE(sub);
    CHECK(top.count(sub) == 1);
    if (sub == "version") continue;
    const std::set<std::string> options = completions(shell, {"oomtriage", sub, "--"});
    for (const auto& option : long_options(sub)) {
      CAPTURE(option);
      CHECK(options.count(option) == 1);
    }
  }
  CHECK(completions(shell, {"oomtriage", "scan", "--trainer", "ko"}) ==
        std::set<std::string>{"kohya"});
  CHECK(completions(shell, {"oomtriage", "fix", "--fix", "cheap"}) ==
        std::set<std::string>{"cheapen_previews"});
  CHECK(completions(shell, {"oomtriage", "jobs", "--outcome", "crashed_o"}) ==
        std::set<std::string>{"crashed_oom", "crashed_other"});

  // `report` offers the store's jobs (through `oomtriage jobs --json`, found on PATH).
  TempDir dir;
  const fs::path db = dir.path / "oomtriage.db";
  {
    auto store = db::Store::open(db.string());
    REQUIRE(store);
    REQUIRE((*store)->upsert_job("my_lora", "/out/my_lora", "ai-toolkit", "/out/my_lora",
                                 daemon::unix_now()));
  }
  ScopedEnv store_env("OOMTRIAGE_STORE", db.string());
  ScopedEnv path_env("PATH",
                     fs::path(OOMTRIAGE_BINARY).parent_path().string() + ":" + std::getenv("PATH"));
  CHECK(completions(shell, {"oomtriage", "report", "my"}) == std::set<std::string>{"my_lora"});
}

}  // namespace

TEST_SUITE("daemon::completion") {
  TEST_CASE("bash completes every subcommand, option, value and job") {
    if (!have_program("bash")) OOMTRIAGE_SKIP("bash is not installed");
    check_shell("bash");
  }
  TEST_CASE("zsh completes every subcommand, option, value and job") {
    if (!have_program("zsh")) OOMTRIAGE_SKIP("Debian's zsh is not installed");
    check_shell("zsh");
  }
  TEST_CASE("fish completes every subcommand, option, value and job") {
    if (!have_program("fish")) OOMTRIAGE_SKIP("Debian's fish is not installed");
    check_shell("fish");
  }
}
