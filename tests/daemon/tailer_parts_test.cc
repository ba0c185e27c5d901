// tests/daemon/tailer_parts_test.cc
//
// The daemon's parts, in process, with real files, a real inotify instance and a real SQLite
// store, and time passed in (no process is started, nothing sleeps): the file follower (reads,
// truncation and in-place rewrites, the NUL hole, rewind after a refused commit), content
// identity and the rotation search, the read pacer, the directory watcher, the event sink's
// refusals and backoff, the instance lock and descriptor budget, and `scan --follow`'s log tail.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/service/directory_watcher.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/file_follower.h"
#include "daemon/service/file_identity.h"
#include "daemon/service/log_tail.h"
#include "daemon/service/read_pacer.h"
#include "daemon/service/service_manager.h"
#include "daemon/service/wal_checkpointer.h"
#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::daemon;
using namespace oomtriage::testing;

namespace {

const std::string kOomLog = slurp(kGolden / "aitk_sampling_oom_step500.log");

void write_file(const fs::path& path, std::string_view text,
                std::ios::openmode mode = std::ios::trunc) {
  std::ofstream(path, std::ios::binary | mode) << text;
}

struct Opened {
  int fd;
  uint64_t dev;
  uint64_t ino;
};

Opened open_log(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return {fd, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

std::unique_ptr<FileFollower> follow(const fs::path& path, const Checkpoint& start = {}) {
  const Opened o = open_log(path);
  return std::make_unique<FileFollower>(path.string(), parsers::Trainer::kUnknown, o.fd, o.dev,
                                        o.ino, start);
}

// Reads everything there is; returns the events the analyzer settled on.
std::vector<parsers::OomEvent> read_all(FileFollower& follower, std::vector<char>& buffer,
                                        size_t budget = 1 << 20) {
  std::vector<parsers::OomEvent> events;
  for (FileFollower::Read r; (r = follower.read(budget, buffer)).bytes > 0;) {
    for (auto& e : follower.analyzer().take_events()) events.push_back(std::move(e));
  }
  follower.analyzer().settle();
  for (auto& e : follower.analyzer().take_events()) events.push_back(std::move(e));
  return events;
}

}  // namespace

TEST_SUITE("daemon::service parts") {
  TEST_CASE("the WAL is checkpointed on the checkpointer's thread, not by the writer") {
    TempDir dir;
    const fs::path path = dir.path / "oomtriage.db";
    auto store = db::Store::open(path.string());
    REQUIRE(store);
    REQUIRE((*store)->set_auto_checkpoint(daemon::WalCheckpointer::kLoopAutoCheckpointPages));
    const auto db_size = [&] { return fs::file_size(path); };
    const uintmax_t before = db_size();
    for (int i = 0; i < 2000; ++i) {
      REQUIRE((*store)->upsert_job("job" + std::to_string(i), "/out/" + std::to_string(i),
                                   "ai-toolkit", "/out/" + std::string(200, 'x'), i));
    }
    // Every page is in the WAL: the writer did not checkpoint (SQLite's default would have at
    // 1,000 pages).
    CHECK(fs::file_size(dir.path / "oomtriage.db-wal") > 1000 * 4096);
    CHECK(db_size() == before);
    daemon::WalCheckpointer checkpointer(path.string(), 20ms);
    CHECK(wait_until([&] { return db_size() > before + 100 * 4096; }, 5s));
  }

  TEST_CASE("file follower: a log read in budgets of any size gives its OOM once") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    write_file(log, kOomLog);
    for (size_t budget : {size_t{7}, size_t{4096}, size_t{1} << 20}) {
      auto follower = follow(log);
      std::vector<char> buffer(997);
      const FileFollower::Read first = follower->read(budget, buffer);
      CHECK(first.bytes == std::min(budget, kOomLog.size()));
      CHECK(first.more == (budget < kOomLog.size()));
      std::vector<parsers::OomEvent> events = follower->analyzer().take_events();
      for (auto& e : read_all(*follower, buffer, budget)) events.push_back(std::move(e));
      REQUIRE(events.size() == 1);
      CHECK(events[0].step == 500);
      CHECK(follower->read_pos() == kOomLog.size());
      CHECK_FALSE(follower->rewritten());
    }
  }

  TEST_CASE(
      "file follower: copytruncate written past the old offset, and a same-size rewrite, are new "
      "generations") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    const std::string head = "Running 1 job\n# Running job: my_lora\n";
    write_file(log, head + "step 1\n");
    auto follower = follow(log);
    std::vector<char> buffer(4096);
    read_all(*follower, buffer);
    CHECK_FALSE(follower->rewritten());
    // Truncated, then the trainer writes on past the old offset with the same first lines.
    ::truncate(log.c_str(), 0);
    write_file(log, head + "generation two is longer\n", std::ios::app);
    CHECK(follower->rewritten());
    // The read itself sees it (its one pread brings the last bytes read back) and feeds nothing.
    const FileFollower::Read seen = follower->read(1 << 20, buffer);
    CHECK(seen.rewritten);
    CHECK(seen.bytes == 0);
    follower->restart();
    CHECK(follower->generation() == 1);
    CHECK(follower->read_pos() == 0);
    CHECK_FALSE(follower->fingerprinted());
    read_all(*follower, buffer);
    CHECK_FALSE(follower->rewritten());
    // Rewritten in place (cp over it) at the same size.
    std::string same_size = head + "generation two is longer\n";
    same_size[same_size.size() - 2] = 'X';
    write_file(log, same_size);
    CHECK(follower->rewritten());
    // Shorter than what was read.
    write_file(log, "x\n");
    CHECK(follower->rewritten());
  }

  TEST_CASE(
      "file follower: the NUL hole copytruncate leaves is skipped, the OOM after it is read") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    write_file(log, std::string(100000, '\0') + kOomLog);
    auto follower = follow(log);
    std::vector<char> buffer(65536);
    const auto events = read_all(*follower, buffer);
    REQUIRE(events.size() == 1);
    // Offsets and lines are the file's: the hole counts as bytes, not as text.
    const size_t error_at = kOomLog.find("CUDA out of memory");
    REQUIRE(error_at != std::string::npos);
    CHECK(events[0].offset >= 100000);
    CHECK(events[0].offset <= 100000 + error_at);
    CHECK(follower->checkpoint().offset <= follower->read_pos());
  }

  TEST_CASE(
      "file follower: after a refused commit, rewind reads the same event again from the committed "
      "checkpoint") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    const size_t half = kOomLog.size() / 3;
    write_file(log, kOomLog.substr(0, half));
    auto follower = follow(log);
    std::vector<char> buffer(4096);
    read_all(*follower, buffer);
    const Checkpoint accepted = follower->checkpoint();
    follower->committed(accepted);
    write_file(log, kOomLog.substr(half), std::ios::app);
    const auto lost_if_skipped = read_all(*follower, buffer);
    REQUIRE(lost_if_skipped.size() == 1);
    // The store refused that commit: back to what it accepted.
    follower->rewind();
    CHECK(follower->read_pos() == accepted.offset);
    const auto again = read_all(*follower, buffer);
    REQUIRE(again.size() == 1);
    CHECK(again[0].offset == lost_if_skipped[0].offset);
    CHECK(again[0].step == 500);
  }

  TEST_CASE(
      "file follower: resumed from a stored checkpoint, with its descriptor given back and taken "
      "again") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    const size_t half = kOomLog.size() / 2;
    write_file(log, kOomLog.substr(0, half));
    Checkpoint stored;
    {
      auto first = follow(log);
      std::vector<char> buffer(4096);
      read_all(*first, buffer);
      stored = first->checkpoint();
    }
    write_file(log, kOomLog.substr(half), std::ios::app);
    auto resumed = follow(log, stored);
    resumed->close_descriptor();
    CHECK_FALSE(resumed->is_open());
    const Opened again = open_log(log);
    CHECK(resumed->holds_last_read(again.fd));
    resumed->adopt_descriptor(again.fd);
    std::vector<char> buffer(4096);
    const auto events = read_all(*resumed, buffer);
    REQUIRE(events.size() == 1);
    CHECK(events[0].step == 500);
  }

  TEST_CASE(
      "content identity: no head fingerprint under a KiB, anchors see rewrites, rotation found by "
      "inode and bytes") {
    TempDir dir;
    const fs::path job = dir.path / "my_lora";
    fs::create_directories(job / "logs");
    fs::create_directories(dir.path / "archive" / "my_lora");
    const fs::path log = job / "log.txt";
    write_file(log, std::string(1000, 'a'));
    Opened o = open_log(log);
    CHECK_FALSE(head_fingerprint(o.fd));
    CHECK(anchor_of(o.fd, 0).empty());
    const std::string anchor = anchor_of(o.fd, 1000);
    write_file(log, std::string(100, 'b'), std::ios::app);
    REQUIRE(head_fingerprint(o.fd));
    CHECK(anchor_of(o.fd, 1000) == anchor);
    CHECK(tail_before(o.fd, 1100) == std::string(64, 'b'));
    CHECK(count_lines(o.fd, 1100) == 1);
    ::close(o.fd);

    WatchRule rule;
    rule.logs = (dir.path / "*" / "log.txt").string();
    rule.rotated_to = {(dir.path / "archive" / "{parent}").string()};
    const auto folders = rotation_folders(log.string(), rule);
    REQUIRE(folders.size() == 3);
    CHECK(folders[1] == job / "logs");
    CHECK(folders[2] == dir.path / "archive" / "my_lora");
    o = open_log(log);
    ::close(o.fd);
    const auto same = [&](int fd) { return anchor_of(fd, 1000) == anchor; };
    for (const fs::path& to :
         {job / "logs" / "1_log.txt", dir.path / "archive" / "my_lora" / "log.txt.1"}) {
      fs::rename(log, to);
      CHECK(find_by_identity(folders, o.dev, o.ino, same) == to.string());
      fs::rename(to, log);
    }
    // The same inode with other bytes before the offset is not the same file.
    write_file(log, std::string(1100, 'c'));
    CHECK_FALSE(find_by_identity(folders, o.dev, o.ino, same));
  }

  TEST_CASE(
      "read pacer: a log written again within the interval turns busy, and quiet after two empty "
      "polls") {
    using namespace std::chrono;
    const ReadPacer pacer(milliseconds(500));
    const MonoTime t0{seconds(1000)};
    Pace pace;
    CHECK_FALSE(pacer.on_write(pace, t0));  // the first write: read now, stays quiet
    CHECK_FALSE(pacer.on_write(pace, t0 + milliseconds(600)));  // slower than the interval
    CHECK(pacer.on_write(pace, t0 + milliseconds(700)));        // faster: busy from now on
    CHECK(pace.busy);
    CHECK_FALSE(pacer.on_write(pace, t0 + milliseconds(710)));  // already busy
    CHECK_FALSE(pacer.on_poll(pace, 120));
    CHECK_FALSE(pacer.on_poll(pace, 0));
    CHECK_FALSE(pacer.on_poll(pace, 80));  // growth resets the count
    CHECK_FALSE(pacer.on_poll(pace, 0));
    CHECK(pacer.on_poll(pace, 0));  // two empty polls in a row: quiet
    CHECK_FALSE(pace.busy);
    // Quiet again, the next write is read at once and does not count the old spell.
    CHECK_FALSE(pacer.on_write(pace, t0 + milliseconds(720)));
    CHECK_FALSE(pacer.on_poll(pace, 0));  // a quiet log is not polled
  }

  TEST_CASE(
      "directory watcher: new names, renames and deletions, new folders, a log's own writes, read "
      "without blocking") {
    TempDir dir;
    auto opened = DirectoryWatcher::open();
    REQUIRE(opened);
    DirectoryWatcher watcher = std::move(*opened);
    REQUIRE(watcher.watch(dir.path.string()));
    CHECK(watcher.watching(dir.path.string()));
    CHECK(watcher.drain().empty());
    const fs::path log = dir.path / "log.txt";
    write_file(log, "a\n");
    // Folders report names only: a log's writes come from its own watch.
    write_file(log, "b\n", std::ios::app);
    auto first = watcher.drain();
    REQUIRE(first.size() == 1);
    CHECK(first[0].kind == FsChange::kAppeared);
    CHECK(first[0].path == log.string());
    auto watch = watcher.watch_file(log.string());
    REQUIRE(watch);
    write_file(log, "c\n", std::ios::app);
    write_file(log, "d\n", std::ios::app);
    auto written = watcher.drain();
    REQUIRE(written.size() >= 1);  // the kernel merges identical events in a row
    CHECK(written[0].kind == FsChange::kFileWritten);
    CHECK(written[0].watch == *watch);
    // Unwatched (busy): its writes are no longer reported.
    watcher.unwatch_file(*watch);
    write_file(log, "e\n", std::ios::app);
    CHECK(watcher.drain().empty());
    // The watch follows the file, not the name.
    watch = watcher.watch_file(log.string());
    REQUIRE(watch);
    fs::rename(log, dir.path / "log.txt.1");
    write_file(dir.path / "log.txt.1", "f\n", std::ios::app);
    fs::remove(dir.path / "log.txt.1");
    fs::create_directories(dir.path / "new_job");
    const auto changes = watcher.drain();
    const auto has = [&](FsChange::Kind kind, const fs::path& path) {
      return std::any_of(changes.begin(), changes.end(), [&](const FsChange& c) {
        return c.kind == kind && c.path == path.string();
      });
    };
    CHECK(has(FsChange::kVanished, log));
    CHECK(has(FsChange::kAppeared, dir.path / "log.txt.1"));
    CHECK(has(FsChange::kVanished, dir.path / "log.txt.1"));
    CHECK(std::any_of(changes.begin(), changes.end(), [&](const FsChange& c) {
      return c.kind == FsChange::kFileWritten && c.watch == *watch;
    }));
    // A new folder is named, so that only it is looked into.
    CHECK(has(FsChange::kFolderAppeared, dir.path / "new_job"));
    CHECK(watcher.drain().empty());
    // A watched folder that goes away is forgotten and asks for a rescan.
    REQUIRE(watcher.watch((dir.path / "new_job").string()));
    fs::remove(dir.path / "new_job");
    const auto gone = watcher.drain();
    CHECK(std::any_of(gone.begin(), gone.end(),
                      [](const FsChange& c) { return c.kind == FsChange::kRescan; }));
    CHECK_FALSE(watcher.watching((dir.path / "new_job").string()));
    CHECK_FALSE(watcher.watch((dir.path / "missing").string()));
    CHECK_FALSE(watcher.watch_file((dir.path / "missing").string()));
  }

  TEST_CASE("globs: the static prefix is watched, the first matching rule wins") {
    CHECK(static_prefix("/srv/out/*/log.txt") == "/srv/out");
    CHECK(static_prefix("/srv/out/job/log.txt") == "/srv/out/job");
    CHECK(static_prefix("/*.log") == "/");
    CHECK(static_prefix("*.log") == ".");
    std::vector<WatchRule> rules(2);
    rules[0].logs = "/srv/out/*/log.txt";
    rules[1].logs = "/srv/*/*.log";
    CHECK(rule_for(rules, "/srv/out/a/log.txt") == &rules[0]);
    CHECK(rule_for(rules, "/srv/kohya/train.log") == &rules[1]);
    CHECK(rule_for(rules, "/srv/out/a/b/log.txt") == nullptr);  // * never crosses a /
  }

  TEST_CASE(
      "event sink: a locked store refuses, is counted once, backs off 250 ms to 30 s, and kept "
      "progress lands once") {
    TempDir dir;
    const fs::path db_path = dir.path / "oomtriage.db";
    auto opened = db::Store::open(db_path.string(), 10);
    REQUIRE(opened);
    db::Store& store = **opened;
    const int64_t job = *store.upsert_job("j", "/out/j", "ai-toolkit", "/out/j", 100);
    const int64_t run = *store.start_run(job, "/out/j/log.txt", std::nullopt, 100);
    db::FileRow file;
    file.path = "/out/j/log.txt";
    file.ino = 7;
    file.job_id = job;
    file.run_id = run;
    const int64_t file_id = *store.insert_file(file, 100);
    Metrics metrics;
    int pokes = 0;
    int64_t now = 1000;
    EventSink sink(
        store, metrics, [&] { ++pokes; }, [&] { return now; });
    parsers::OomEvent event;
    event.offset = 4000;
    event.kind = parsers::OomKind::kCuda;
    event.phase = parsers::Phase::kSampling;
    event.step = 500;
    db::Progress progress;
    progress.file_id = file_id;
    progress.job_id = job;
    progress.run_id = run;
    progress.offset = 5000;
    progress.analyzer_state = "{}";
    progress.events = {event_row(event, {}, "flux.1")};
    progress.receivers = {"slack"};

    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open(db_path.c_str(), &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    CHECK_FALSE(sink.commit(progress));
    CHECK_FALSE(sink.commit(std::vector<db::Progress>{progress}));
    CHECK(sink.failing());
    CHECK(metrics.store_failures == 2);
    std::vector<int64_t> delays;
    for (int i = 0; i < 10; ++i) delays.push_back(sink.next_retry_delay().count());
    CHECK(delays ==
          std::vector<int64_t>{250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000});
    sink.keep(progress);
    CHECK_FALSE(sink.retry_kept());
    CHECK(pokes == 0);
    REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(other);
    now = 2000;
    CHECK(sink.retry_kept());
    CHECK_FALSE(sink.failing());
    CHECK(pokes == 1);
    CHECK(sink.next_retry_delay().count() == 250);
    CHECK((metrics.events[{"cuda", "sampling"}]) == 1);
    // Committed again (a file read again after a restart): stored once, counted once.
    CHECK(sink.commit(progress));
    CHECK(*store.count_events() == 1);
    CHECK((metrics.events[{"cuda", "sampling"}]) == 1);
    CHECK(pokes == 1);
    const auto story = *store.job_story("j");
    REQUIRE(story);
    CHECK(story->events.at(0).created_at == 2000);  // the injected clock
  }

  TEST_CASE("event journal text names the job, phase, step, place and top fix") {
    parsers::OomEvent event;
    event.kind = parsers::OomKind::kCuda;
    event.phase = parsers::Phase::kSampling;
    event.step = 500;
    event.total_steps = 3000;
    event.line = 67;
    triage::Fix fix;
    fix.id = "cheapen_previews";
    CHECK(event_journal_text("my_lora", "/out/my_lora/log.txt", event, {fix}) ==
          "job my_lora: cuda OOM in sampling at step 500/3000 (/out/my_lora/log.txt:67); top fix: "
          "cheapen_previews");
    event.step.reset();
    event.recovered = true;
    CHECK(event_journal_text("j", "/l", event, {}) ==
          "job j: cuda OOM (recovered) in sampling (/l:67)");
  }

  TEST_CASE(
      "instance lock: a second holder is refused with the first one's pid, and may lock once it is "
      "gone") {
    TempDir dir;
    const std::string state = (dir.path / "state").string();
    {
      auto first = InstanceLock::acquire(state);
      REQUIRE(first);
      auto second = InstanceLock::acquire(state);
      REQUIRE_FALSE(second);
      CHECK(second.error().message.find("pid " + std::to_string(::getpid())) != std::string::npos);
      CHECK(second.error().message.find(state) != std::string::npos);
    }
    CHECK(InstanceLock::acquire(state));
  }

  TEST_CASE("descriptor budget: the soft limit minus what is open and a reserve, never under 8") {
    CHECK(log_descriptor_budget(1024, 10) == 1024 - 10 - 64);
    CHECK(log_descriptor_budget(64, 5) == 64 - 5 - 16);
    CHECK(log_descriptor_budget(16, 5) == 8);
    CHECK(log_descriptor_budget(0, 5) == SIZE_MAX);
    CHECK(log_descriptor_budget() >= 8);
  }
  TEST_CASE(
      "a log followed by its name (scan --follow): truncated, then rotated, the new lines are "
      "read from each file's start, and the rotated file on while its writer writes") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    write_file(log, "Running 1 job\n" + kOomLog);
    struct Seen {
      int file;
      std::string phase;
      std::optional<int64_t> step;
    };
    std::vector<Seen> seen;
    std::vector<std::string> notices;
    LogTail tail(
        log.string(), parsers::Trainer::kUnknown, std::chrono::milliseconds(25),
        [&](LogTail::Found found) {
          for (const parsers::OomEvent& event : found.events) {
            seen.push_back(
                {found.file_number, std::string(parsers::to_string(event.phase)), event.step});
          }
        },
        [&](const std::string& notice) { notices.push_back(notice); });
    // Virtual time: each incident settles once its file has been quiet long enough.
    LogTail::Clock::time_point now{std::chrono::hours(1)};
    const auto quiet = [&] {
      now += parsers::LogAnalyzer::kTracebackWait + std::chrono::seconds(1);
      return tail.turn(now);
    };
    REQUIRE(tail.open(now));
    CHECK(tail.turn(now) == LogTail::Turn::kRead);
    quiet();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].file == 0);
    CHECK(seen[0].phase == "sampling");
    CHECK(seen[0].step == 500);

    // copytruncate, and the writer goes on with a shorter log: read again from its start.
    write_file(log, slurp(kGolden / "diffusers_train_step_oom.log"));
    CHECK(tail.turn(now) == LogTail::Turn::kRead);
    quiet();
    REQUIRE(seen.size() == 2);
    CHECK(seen[1].file == 1);
    CHECK(seen[1].phase == "train_step");
    CHECK(seen[1].step == 37);
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].find("was truncated") != std::string::npos);

    // Rotated: renamed away, a new file under the name, read from its start.
    fs::rename(log, dir.path / "log.txt.1");
    write_file(log, slurp(kGolden / "aitk_gc_off_oom_step2.log"));
    CHECK(tail.turn(now) == LogTail::Turn::kRead);
    quiet();
    REQUIRE(seen.size() == 3);
    CHECK(seen[2].file == 2);
    CHECK(seen[2].phase == "train_step");
    CHECK(seen[2].step == 2);
    REQUIRE(notices.size() == 2);
    CHECK(notices[1].find("was rotated away") != std::string::npos);

    // The old file's writer has not reopened its log yet: what it writes there is read too.
    write_file(dir.path / "log.txt.1", "Running 1 job\n" + kOomLog, std::ios::app);
    CHECK(tail.turn(now) == LogTail::Turn::kRead);
    quiet();
    REQUIRE(seen.size() == 4);
    CHECK(seen[3].file == 1);
    CHECK(seen[3].step == 500);
    // Quiet for as long as the daemon waits: let go of, so what comes later is not read.
    now += LogTail::kLeavingQuiet;
    tail.turn(now);
    write_file(dir.path / "log.txt.1", "Running 1 job\n" + kOomLog, std::ios::app);
    CHECK(tail.turn(now) == LogTail::Turn::kIdle);
    quiet();
    CHECK(seen.size() == 4);
    tail.stop();
    CHECK(seen.size() == 4);
  }
}
