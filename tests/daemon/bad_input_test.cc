// tests/daemon/bad_input_test.cc
//
// The bad-input battery for the daemon: a corrupt store, a state directory that cannot hold a
// store, a log replaced by a directory, a symlink loop in a watched folder, binary garbage and
// a 100 MiB line without a newline, each beside a healthy job that must keep being served.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

int run_status(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_SUITE("daemon::bad_input") {
  TEST_CASE(
      "a store file that is not a database: the reader says so (exit 2), the daemon moves it "
      "aside and starts - a state directory that is a file: exit 2") {
    TempDir dir;
    fs::create_directories(dir.path / "state" / "out");
    std::ofstream(dir.path / "state" / "oomtriage.db")
        << "this is not an SQLite database, it is text";
    CHECK(run_status(std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                     (dir.path / "state").string() + " jobs 2>" + (dir.path / "err2").string()) ==
          2);
    CHECK(slurp(dir.path / "err2").find("oomtriage.db") != std::string::npos);
    const std::string watch =
        " watch " + (dir.path / "state" / "out").string() + " 2>" + (dir.path / "err").string();
    std::ofstream(dir.path / "plainfile") << "x";
    CHECK(run_status(std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                     (dir.path / "plainfile").string() + watch) == 2);
    CHECK(slurp(dir.path / "err").find("cannot open store") != std::string::npos);
    {
      DaemonProcess daemon(dir.path / "state", {"watch", (dir.path / "state" / "out").string()},
                           dir.path / "err3");
      REQUIRE(wait_until(
          [&] { return daemon.stderr_text().find("store ready") != std::string::npos; }));
      CHECK(daemon.stderr_text().find("was damaged (file is not a database)") != std::string::npos);
      CHECK(daemon.stop(SIGTERM) == 0);
    }
    bool kept = false;
    for (const auto& entry : fs::directory_iterator(dir.path / "state")) {
      if (entry.path().filename().string().starts_with("oomtriage.db.damaged-"))
        kept = slurp(entry.path()) == "this is not an SQLite database, it is text";
    }
    CHECK(kept);
  }
  TEST_CASE(
      "garbage, a huge line, a log turned directory and a symlink loop do not stop the others") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    for (const char* job : {"garbage", "huge", "turned", "healthy"})
      fs::create_directories(out / job);
    fs::create_symlink(out / "loop", out / "loop");  // a symlink to itself
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};

    std::string garbage;
    for (int i = 0; i < 200000; ++i) garbage.push_back(static_cast<char>((i * 2654435761u) >> 24));
    write_slowly(out / "garbage" / "log.txt", garbage, 65536);
    {
      std::ofstream huge(out / "huge" / "log.txt", std::ios::binary);
      const std::string block(1 << 20, 'x');
      for (int i = 0; i < 100; ++i) huge << block;
      huge << "\nKilled\n";
    }
    write_slowly(out / "turned" / "log.txt", "Running 1 job\n");
    REQUIRE(wait_until([&] { return view.story("turned").has_value(); }));
    fs::remove(out / "turned" / "log.txt");
    fs::create_directories(out / "turned" / "log.txt");  // the log is now a directory

    write_slowly(out / "healthy" / "log.txt", slurp(kGolden / "aitk_host_sigkill.log"), 4096);
    REQUIRE(wait_until([&] { return view.events("healthy") == 1; }, 15s));
    REQUIRE(wait_until([&] { return view.events("huge") == 1; }, 15s));  // after the cut line
    CHECK(daemon.alive());
    CHECK(daemon.stderr_text().find("longer than") != std::string::npos);
    CHECK(daemon.stop(SIGTERM) == 0);
  }
}
