// tests/daemon/open_set_tables_test.cc
//
// The tables of the open sets hold together: every fix a ranking row names has a planner and
// every planner a ranking row, resume-safety is the table's; every trainer has one row whose
// names all read back, and the completions and the man page name exactly the table's trainers
// and fixes; every receiver kind parses and is sent as its row says; every daemon config key's
// example parses, and an unknown key's "did you mean" comes from the table.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/common/daemon_config.h"
#include "daemon/common/daemon_config_keys.h"
#include "daemon/common/receiver_kinds.h"
#include "db/fleet_store.h"
#include "parsers/context_patterns.h"
#include "parsers/event.h"
#include "parsers/trainer_table.h"
#include "tests/support/e2e.h"
#include "triage/fix.h"
#include "triage/fix_table.h"
#include "triage/heal_plan.h"
#include "triage/ranker.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const fs::path kSource = fs::path(OOMTRIAGE_SOURCE_DIR);

std::set<std::string> words_of(const std::string& text) {
  std::set<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    if (word != "\\") words.insert(word);
  }
  return words;
}

// The words between `open` and `close` after `anchor` in a script.
std::set<std::string> script_list(const std::string& script, const std::string& anchor,
                                  const std::string& open, const std::string& close) {
  const std::string text = slurp(kSource / "scripts" / script);
  const size_t at = text.find(anchor);
  REQUIRE_MESSAGE(at != std::string::npos, script, ": ", anchor);
  const size_t begin = text.find(open, at + anchor.size()) + open.size();
  const size_t end = text.find(close, begin);
  return words_of(text.substr(begin, end - begin));
}

// The trainer and fix lists of the three completion scripts.
std::vector<std::set<std::string>> completion_lists(const std::string& what) {
  if (what == "trainers") {
    return {script_list("oomtriage.bash-completion", "--trainer)", "-W \"", "\""),
            script_list("oomtriage.zsh", "local -a trainers=", "(", ")"),
            script_list("oomtriage.fish", "set -l trainers", " ", "\n")};
  }
  return {script_list("oomtriage.bash-completion", "--fix)", "-W \"", "\""),
          script_list("oomtriage.zsh", "local -a fixes=", "(", ")"),
          script_list("oomtriage.fish", "set -l fixes", " ", "\nset")};
}

std::set<std::string> fix_ids() {
  std::set<std::string> ids;
  for (const triage::FixRow& row : triage::fix_table()) ids.emplace(row.id);
  return ids;
}

const char* kWatch = "watch:\n  - logs: /srv/ai-toolkit/output/*/log.txt\n";

}  // namespace

TEST_SUITE("daemon::open_set_tables") {
  TEST_CASE("fixes: one row per id, every ranked id has a planner, every planner a ranking row") {
    const auto& rows = triage::fix_table();
    CHECK(fix_ids().size() == rows.size());
    std::vector<std::string_view> table_ids;
    for (const auto& row : rows) {
      table_ids.push_back(row.id);
      CHECK_MESSAGE(!row.doc.empty(), row.id);
      CHECK(triage::find_fix(row.id) == &row);
      CHECK(triage::is_known_fix_id(row.id));
      CHECK(triage::resume_safe(row.id) == row.resume_safe);
    }
    CHECK(triage::known_fix_ids() == table_ids);
    CHECK(triage::find_fix("lower_batchsize") == nullptr);
    CHECK_FALSE(triage::resume_safe("lower_batchsize"));

    std::set<std::string> ranked;
    for (const triage::RankingRow& situation : triage::ranking_table()) {
      for (const auto& [id, priority] : situation.fixes) ranked.emplace(id);
    }
    for (const auto& row : rows) {
      CAPTURE(row.id);
      const bool named = ranked.count(std::string(row.id)) == 1;
      CHECK(named == (row.plan != nullptr));
    }
    for (const std::string& id : ranked) {
      CAPTURE(id);
      CHECK(triage::find_fix(id) != nullptr);
    }
  }

  TEST_CASE("fixes: design.md, the completions and `heal: fixes:` name exactly the table's") {
    const std::string design = slurp(kSource / "docs" / "design.md");
    const size_t begin = design.find("## Fix ids");
    const size_t end = design.find("\n## ", begin + 1);
    REQUIRE(begin != std::string::npos);
    const std::string section = design.substr(begin, end - begin);
    std::set<std::string> documented;
    static const std::regex code("`([a-z0-9_]+)`");
    for (auto it = std::sregex_iterator(section.begin(), section.end(), code);
         it != std::sregex_iterator(); ++it) {
      const std::string id = (*it)[1];
      if (id.find('_') != std::string::npos) documented.insert(id);
    }
    CHECK(documented == fix_ids());
    for (const auto& list : completion_lists("fixes")) CHECK(list == fix_ids());

    for (const auto& row : triage::fix_table()) {
      CAPTURE(row.id);
      const auto config = daemon::parse_daemon_config(
          fmt::format("{}heal:\n  ai_toolkit_db: /srv/aitk_db.db\n  fixes: [{}]\n", kWatch, row.id),
          "c.yaml");
      CHECK(bool(config) == row.resume_safe);
    }
  }

  TEST_CASE("trainers: one row per trainer, every name reads back, the fingerprints are real") {
    const auto& rows = parsers::trainer_table();
    std::set<std::string_view> names;
    size_t count = 0;
    for (const auto& row : rows) {
      CAPTURE(row.name);
      CHECK(&parsers::trainer_row(row.trainer) == &row);
      CHECK(parsers::to_string(row.trainer) == row.name);
      std::vector<std::string_view> all = row.aliases;
      all.push_back(row.name);
      if (!row.short_name.empty()) all.push_back(row.short_name);
      for (const std::string_view name : all) {
        CAPTURE(name);
        CHECK(names.insert(name).second);  // no name is two trainers'
        CHECK(parsers::trainer_from_string(name) == row.trainer);
        ++count;
      }
      if (!row.rules_prefix.empty()) {
        const auto& patterns = parsers::context_patterns();
        CHECK(std::any_of(patterns.begin(), patterns.end(), [&](const auto& pattern) {
          return pattern.name.substr(0, row.rules_prefix.size()) == row.rules_prefix;
        }));
      }
      // A resume from the newest state says where the states are, and why it cannot without one.
      if (row.resume.value.empty() && (row.resume.how == parsers::ResumeOption::How::kFlag ||
                                       row.resume.how == parsers::ResumeOption::How::kGluedFlag)) {
        CHECK(!row.checkpoint.glob.empty());
        CHECK(!row.checkpoint.missing.empty());
        CHECK(triage::with_resume(row.trainer, {"train.py"}, std::nullopt).missing ==
              row.checkpoint.missing);
      }
    }
    CHECK(count == names.size());
    CHECK(rows.front().trainer == parsers::Trainer::kUnknown);
    // Every value of the enum (kComfyUi is its last) has its own row.
    CHECK(rows.size() == static_cast<size_t>(parsers::Trainer::kComfyUi) + 1);
    for (int i = 0; i <= static_cast<int>(parsers::Trainer::kComfyUi); ++i) {
      CHECK(parsers::trainer_row(static_cast<parsers::Trainer>(i)).trainer ==
            static_cast<parsers::Trainer>(i));
    }
    CHECK_FALSE(parsers::trainer_from_string("kohyaa"));
  }

  TEST_CASE("trainers: the completions and the man page name exactly the table's trainers") {
    std::set<std::string> contract_names;
    for (const auto& row : parsers::trainer_table()) {
      if (row.trainer != parsers::Trainer::kUnknown) contract_names.emplace(row.name);
    }
    for (const auto& list : completion_lists("trainers")) {
      for (const std::string& name : contract_names) CHECK_MESSAGE(list.count(name) == 1, name);
      for (const std::string& word : list) CHECK_MESSAGE(parsers::trainer_from_string(word), word);
    }
    const std::string man = slurp(kSource / "scripts" / "oomtriage.1");
    const size_t at = man.find("The trainer that wrote the log:");
    REQUIRE(at != std::string::npos);
    std::string paragraph = man.substr(at, man.find(".TP", at) - at);
    paragraph = std::regex_replace(paragraph, std::regex(R"(\\-)"), "-");
    std::set<std::string> named;
    static const std::regex word("[a-z][a-z-]+");
    for (auto it = std::sregex_iterator(paragraph.begin(), paragraph.end(), word);
         it != std::sregex_iterator(); ++it) {
      const std::string w = it->str();
      if (const auto trainer = parsers::trainer_from_string(w);
          trainer && *trainer != parsers::Trainer::kUnknown && contract_names.count(w)) {
        named.insert(w);
      }
    }
    CHECK(named == contract_names);
  }

  TEST_CASE("receivers: every kind parses with its defaults and is sent as its row says") {
    TempDir dir;
    const fs::path url_file = dir.path / "url";
    std::ofstream(url_file) << "https://receiver.example/hook/token\n";
    for (const daemon::ReceiverKind& kind : daemon::receiver_kinds()) {
      CAPTURE(kind.type);
      const std::string url_line = kind.url_is_secret ? "url_file: " + url_file.string()
                                                      : "url: https://receiver.example/hook";
      auto config = daemon::parse_daemon_config(
          fmt::format("{}alerts:\n  - type: {}\n    {}\n", kWatch, kind.type, url_line), "c.yaml");
      REQUIRE(config);
      REQUIRE(config->alerts.size() == 1);
      const daemon::Receiver& receiver = config->alerts[0];
      CHECK(receiver.group_wait_ms == kind.group_wait_ms);
      CHECK(receiver.name == fmt::format("{}-1", kind.type));
      // Inline, a secret URL is refused.
      const auto inline_url = daemon::parse_daemon_config(
          fmt::format("{}alerts:\n  - type: {}\n    url: https://receiver.example/hook\n", kWatch,
                      kind.type),
          "c.yaml");
      CHECK(bool(inline_url) == !kind.url_is_secret);

      daemon::AlertContent alert;
      alert.event_id = 7;
      alert.job = "my_lora";
      const daemon::HttpRequest request = daemon::alert_request(receiver, alert, 1700000000);
      CHECK(request.url == receiver.url + std::string(kind.url_path));
      const bool signed_headers =
          std::any_of(request.headers.begin(), request.headers.end(),
                      [](const auto& header) { return header.first == "webhook-id"; });
      CHECK(signed_headers == kind.standard_webhook_headers);
      CHECK_FALSE(request.body.empty());
    }
    const auto unknown = daemon::parse_daemon_config(
        fmt::format("{}alerts:\n  - type: teams\n    url: https://x.example\n", kWatch), "c.yaml");
    REQUIRE_FALSE(unknown);
    CHECK(unknown.error().message == "c.yaml:4: unknown alert type `teams`");
  }

  TEST_CASE("config keys: every key's example parses - an unknown key's did-you-mean is a row") {
    TempDir dir;
    const fs::path token = dir.path / "token";
    std::ofstream(token) << "secret\n";
    for (const auto& key : daemon::daemon_config_keys()) {
      CAPTURE(key.name);
      if (key.name == "store" && !db::check_fleet_url(std::string(key.example)))
        continue;  // no libpq
      const std::string text = key.name == "watch"
                                   ? fmt::format("watch: {}\n", key.example)
                                   : fmt::format("{}{}: {}\n", kWatch, key.name, key.example);
      const auto config = daemon::parse_daemon_config(text, "c.yaml");
      CHECK_MESSAGE(config, (config ? "" : config.error().message));
      // One letter more is a typo the table's name answers.
      const auto typo = daemon::parse_daemon_config(
          fmt::format("{}{}x: {}\n", kWatch, key.name, key.example), "c.yaml");
      REQUIRE_FALSE(typo);
      CHECK(typo.error().message ==
            fmt::format("c.yaml:3: unknown key `{}x`; did you mean `{}`?", key.name, key.name));
    }
    for (const auto& key : daemon::heal_config_keys()) {
      CAPTURE(key.name);
      const std::string value =
          key.name == "token_file" ? token.string() : std::string(key.example);
      const auto config = daemon::parse_daemon_config(
          fmt::format("{}heal:\n  ai_toolkit_db: /srv/aitk_db.db\n  ui_url: http://127.0.0.1:8675\n"
                      "  {}: {}\n",
                      kWatch, key.name, value),
          "c.yaml");
      CHECK_MESSAGE(config, (config ? "" : config.error().message));
    }
    for (const auto& [section, keys] : {std::pair{"fleet", &daemon::fleet_config_keys()},
                                        std::pair{"metrics", &daemon::metrics_config_keys()}}) {
      for (const auto& key : *keys) {
        CAPTURE(key.name);
        CHECK(daemon::parse_daemon_config(
            fmt::format("{}{}:\n  {}: {}\n", kWatch, section, key.name, key.example), "c.yaml"));
      }
      const auto unknown = daemon::parse_daemon_config(
          fmt::format("{}{}:\n  colour: 1\n", kWatch, section), "c.yaml");
      REQUIRE_FALSE(unknown);
      CHECK(unknown.error().message == fmt::format("c.yaml:4: unknown {} key `colour`", section));
    }
    const auto far = daemon::parse_daemon_config(fmt::format("{}colour: 1\n", kWatch), "c.yaml");
    REQUIRE_FALSE(far);
    CHECK(far.error().message == "c.yaml:3: unknown key `colour`");
  }
}
