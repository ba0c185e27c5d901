// tests/daemon/man_page_test.cc: the man page is written by hand, so it is checked: groff renders
// it without a warning, and it names every subcommand `oomtriage --help` lists, every exit code
// and the config file.
#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>

#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage::testing;

TEST_SUITE("daemon::man_page") {
  TEST_CASE("oomtriage(1) renders cleanly and names every subcommand, exit code and file") {
    if (!have_program("groff")) OOMTRIAGE_SKIP("groff is missing");
    TempDir dir;
    const fs::path page = fs::path(OOMTRIAGE_SOURCE_DIR) / "scripts" / "oomtriage.1";
    const fs::path text = dir.path / "page.txt";
    const fs::path warnings = dir.path / "warnings";
    // ASCII without bold or underlining: plain text for the checks.
    REQUIRE(std::system(("groff -man -Tascii -P-cbou -ww " + page.string() + " >" + text.string() +
                         " 2>" + warnings.string())
                            .c_str()) == 0);
    CHECK(slurp(warnings).empty());
    const std::string plain = slurp(text);

    const fs::path help = dir.path / "help";
    std::system((std::string(OOMTRIAGE_BINARY) + " --help > " + help.string()).c_str());
    const std::string listed = slurp(help);
    const size_t start = listed.find("Subcommands:");
    REQUIRE(start != std::string::npos);
    std::istringstream lines(listed.substr(start));
    std::string line;
    int subcommands = 0;
    std::getline(lines, line);
    while (std::getline(lines, line) && !line.empty()) {
      const std::string name =
          line.substr(line.find_first_not_of(' '),
                      line.find(' ', line.find_first_not_of(' ')) - line.find_first_not_of(' '));
      CAPTURE(name);
      CHECK(plain.find("oomtriage " + name) != std::string::npos);
      ++subcommands;
    }
    CHECK(subcommands >= 10);
    for (const char* part : {"EXIT STATUS", "FILES", "EXAMPLES", "/etc/oomtriage/oomtriage.yaml",
                             "--fail-on-oom", "--store"}) {
      CAPTURE(part);
      CHECK(plain.find(part) != std::string::npos);
    }
  }
}
