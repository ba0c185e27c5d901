// tests/daemon/daemon_parts_test.cc
//
// The daemon's parts in process, each behind its header: which folders may hold a rule's logs
// (directory_watcher.h), the read scheduler's quiet and busy logs (read_scheduler.h), the job
// registry's jobs and runs (job_registry.h) and the followed logs' descriptor budget and reload
// (followed_logs.h), the burst checks' batched reads (batched_pread.h) and the loop's guard
// against a throwing handler (guarded_run.h), on real files, a real inotify and a real SQLite
// store, with the loop that reads and commits replaced by a recording LogHost.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "daemon/common/guarded_run.h"
#include "daemon/service/batched_pread.h"
#include "daemon/service/directory_watcher.h"
#include "daemon/service/file_identity.h"
#include "daemon/service/followed_logs.h"
#include "daemon/service/job_registry.h"
#include "daemon/service/read_scheduler.h"
#include "db/store.h"
#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::daemon;
using namespace oomtriage::testing;

namespace {

int64_t fixed_wall_clock() { return 1'700'000'000; }

WatchRule rule_for_logs(const fs::path& glob) {
  WatchRule rule;
  rule.logs = glob.string();
  return rule;
}

// A followed log on a real file, read from its start.
std::unique_ptr<Tracked> tracked(const fs::path& path, const WatchRule& rule) {
  const int fd = open_log(path.string());
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  auto file = std::make_unique<Tracked>();
  file->rule = rule;
  file->follower = std::make_unique<FileFollower>(path.string(), rule.trainer, fd, st.st_dev,
                                                  st.st_ino, Checkpoint{});
  return file;
}

// The loop's side of the followed logs: reads are counted, commits always accepted.
class RecordingHost final : public LogHost {
 public:
  uint64_t read(Tracked& file) override {
    file.last_read = Clock::now();
    ++reads[file.path()];
    return 0;
  }
  bool commit(Tracked& file, std::vector<parsers::OomEvent>, bool) override {
    ++commits[file.path()];
    return true;
  }
  void store_refused(const Error& error) override { refusals.push_back(error.message); }
  std::optional<WatchRule> rule_of(const std::string& path) const override {
    if (const WatchRule* rule = rule_for(rules, path)) return *rule;
    return std::nullopt;
  }

  std::vector<WatchRule> rules;
  std::map<std::string, int> reads;
  std::map<std::string, int> commits;
  std::vector<std::string> refusals;
};

struct StoreInDir {
  TempDir dir;
  std::unique_ptr<db::Store> store;
  StoreInDir() {
    auto opened = db::Store::open((dir.path / "oomtriage.db").string(), 250);
    REQUIRE(opened);
    store = std::move(*opened);
  }
};

// One log and a scheduler over a real inotify instance, its reads counted.
struct SchedulerRig {
  TempDir dir;
  std::optional<DirectoryWatcher> watcher;
  boost::asio::io_context io;
  int reads = 0;
  ReadScheduler scheduler{io, std::chrono::milliseconds(20), [this](Tracked&) {
                            ++reads;
                            return uint64_t{0};
                          }};
  std::unique_ptr<Tracked> file;

  SchedulerRig() {
    const fs::path log = dir.path / "log.txt";
    std::ofstream(log) << "step 1\n";
    auto opened = DirectoryWatcher::open();
    REQUIRE(opened);
    watcher.emplace(std::move(*opened));
    scheduler.set_watcher(&*watcher);
    file = tracked(log, rule_for_logs(dir.path / "*.txt"));
  }
};

// The followed logs over a real store, the loop's side recorded.
struct LogsRig {
  StoreInDir db;
  Metrics metrics;
  JobRegistry registry{*db.store, metrics, fixed_wall_clock};
  boost::asio::io_context io;
  RecordingHost host;
  ReadScheduler scheduler{io, std::chrono::milliseconds(20),
                          [this](Tracked& f) { return host.read(f); }};
  ReadBuffer buffer{kReadChunk};
  FollowedLogs logs{io,     *db.store, registry,         scheduler, metrics,
                    buffer, host,      fixed_wall_clock, false};
};

}  // namespace

TEST_SUITE("daemon::parts") {
  TEST_CASE("a new folder is looked into only where a rule's pattern may have logs") {
    std::vector<WatchRule> rules = {rule_for_logs("/out/*/*/log.txt")};
    CHECK(may_hold_logs(rules, "/out"));
    CHECK(may_hold_logs(rules, "/out/a"));
    CHECK(may_hold_logs(rules, "/out/a/b"));
    CHECK_FALSE(may_hold_logs(rules, "/out/a/b/c"));  // deeper than the pattern
    CHECK_FALSE(may_hold_logs(rules, "/srv/a"));
    WatchRule slurm;
    slurm.source = "slurm";  // squeue names its files: no folder of its own
    CHECK_FALSE(may_hold_logs({slurm}, "/out"));
  }

  TEST_CASE(
      "read scheduler: a quiet log is watched - written twice within the interval it is "
      "polled - unchanged for two polls it is watched again") {
    SchedulerRig rig;
    ReadScheduler& scheduler = rig.scheduler;
    Tracked* file = rig.file.get();
    scheduler.watch_quietly(*file);
    REQUIRE(file->watch >= 0);
    CHECK(scheduler.by_watch(file->watch) == file);

    const MonoTime now = Clock::now();
    scheduler.written(*file, now);
    CHECK(file->watch >= 0);  // one write is not busy
    scheduler.written(*file, now + std::chrono::milliseconds(5));
    CHECK(file->pace.busy);
    CHECK(file->watch < 0);
    REQUIRE(file->close_watch >= 0);  // busy, it is still heard when its writers close it
    CHECK(scheduler.by_close_watch(file->close_watch) == file);
    CHECK(scheduler.busy_count() == 1);

    // Polled until two polls found nothing, then watched again and read once more for what
    // came before the watch; with nothing busy the loop runs out of work.
    rig.io.run_for(std::chrono::seconds(5));
    CHECK_FALSE(file->pace.busy);
    CHECK(scheduler.busy_count() == 0);
    CHECK(file->watch >= 0);
    CHECK(file->close_watch < 0);
    CHECK(rig.reads == 3);
  }

  TEST_CASE(
      "read scheduler: a busy log of redraws is read by its burst checks, not its polls: at a "
      "line end, and when 4 KiB of redraws have gathered") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    std::ofstream(log) << "step 1\n";
    auto file = tracked(log, rule_for_logs(dir.path / "*.txt"));
    ReadBuffer buffer{kReadChunk};
    boost::asio::io_context io;
    int reads = 0;
    // One busy log: it is polled every slice (200 ms) and checked as often, so a poll that
    // read would be seen at once.
    ReadScheduler scheduler{io, std::chrono::milliseconds(4000), [&](Tracked& f) {
                              ++reads;
                              return f.follower->read(kReadChunk, buffer.span()).bytes;
                            }};
    scheduler.set_burst_check(std::chrono::milliseconds(20));
    file->follower->read(kReadChunk, buffer.span());
    file->pace.busy = true;
    scheduler.poll(*file);

    // A write every 40 ms, so each poll (200 ms) finds the log grown and it stays busy.
    const auto append = [&](const std::string& text) {
      std::ofstream(log, std::ios::app) << text;
      io.restart();
      io.run_for(std::chrono::milliseconds(40));
    };
    const std::string frame = "\r 10%|#         | 120/1000 [01:00<09:00,  1.40s/it, loss: 0.41]";
    for (int i = 0; i < 6; ++i) append(frame);
    CHECK(reads == 0);  // polled and checked a few times, the redraws wait
    CHECK(file->pace.busy);
    CHECK(file->checked_to > file->follower->read_pos());

    append("\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
    const uint64_t with_oom = fs::file_size(log);
    for (int i = 0; i < 25 && reads == 0; ++i) append(frame);
    CHECK(reads == 1);
    CHECK(file->follower->read_pos() >= with_oom);

    // Redraws gathered past 4 KiB are read, a check's worth at a time.
    const uint64_t unread_from = file->follower->read_pos();
    int appended = 0;
    while (reads == 1 && appended < 100) {
      append(frame + frame + frame + frame + frame);
      ++appended;
    }
    CHECK(reads == 2);
    CHECK(file->follower->read_pos() - unread_from >= 4096);
    CHECK(file->follower->read_pos() - unread_from < 2 * 4096);  // not left to grow on

    // Cut short and rewritten below what the checks saw: they read nothing past the new end
    // and the polls see no growth, so it turns quiet, and is read then (here with no watch to
    // get back, as when out of watches).
    const int before_quiet = reads;
    std::ofstream(log, std::ios::trunc) << "step 1\n";
    io.restart();
    io.run_for(std::chrono::milliseconds(1000));
    CHECK_FALSE(file->pace.busy);
    CHECK(reads == before_quiet + 1);
  }

  TEST_CASE(
      "batched pread: any number of reads, some refused, answer as pread does, batched or "
      "not") {
    TempDir dir;
    std::vector<int> fds;
    for (int i = 0; i < 3; ++i) {
      const fs::path path = dir.path / ("f" + std::to_string(i));
      std::ofstream(path) << std::string(1000 + 100 * i, static_cast<char>('a' + i));
      fds.push_back(::open(path.c_str(), O_RDONLY));
      REQUIRE(fds.back() >= 0);
    }
    const int closed = ::open((dir.path / "f0").c_str(), O_RDONLY);
    ::close(closed);
    std::vector<int> targets;
    for (int i = 0; i < 150; ++i) targets.push_back(i == 70 ? closed : fds[i % 3]);
    for (const bool batched : {true, false}) {
      BatchedPread batch(batched);
      if (batched && !batch.batched()) {
        MESSAGE("skipped: this kernel refuses native AIO (io_setup); only pread was tested");
        continue;
      }
      CHECK(batch.batched() == batched);
      std::vector<std::string> buffers(targets.size(), std::string(64, '\0'));
      std::vector<BatchedPread::Request> requests;
      for (size_t i = 0; i < targets.size(); ++i)
        requests.push_back({.fd = targets[i],
                            .offset = 10 * i,
                            .buffer = buffers[i].data(),
                            .size = buffers[i].size()});
      batch.read(requests);
      for (size_t i = 0; i < targets.size(); ++i) {
        std::string expected(64, '\0');
        const ssize_t n = ::pread(targets[i], expected.data(), 64, static_cast<off_t>(10 * i));
        CAPTURE(i);
        CHECK(requests[i].result == n);
        if (n > 0) CHECK(buffers[i].substr(0, n) == expected.substr(0, n));
      }
      CHECK(requests[70].result == -1);
      CHECK(requests[149].result == 0);   // offset 1490, past the end of f2 (1200 bytes)
      CHECK(requests[100].result == 64);  // f1 at 1000 of 1100
    }
    for (int fd : fds) ::close(fd);
  }

  TEST_CASE("read scheduler: a log forgotten is neither watched nor polled") {
    SchedulerRig rig;
    ReadScheduler& scheduler = rig.scheduler;
    Tracked* file = rig.file.get();
    scheduler.watch_quietly(*file);
    const int watch = file->watch;
    scheduler.written(*file, Clock::now());
    scheduler.written(*file, Clock::now());
    const int close_watch = file->close_watch;
    CHECK(close_watch >= 0);
    scheduler.forget(*file);
    CHECK(scheduler.by_watch(watch) == nullptr);
    CHECK(scheduler.by_close_watch(close_watch) == nullptr);
    CHECK(file->close_watch < 0);
    CHECK(scheduler.busy_count() == 0);
    rig.io.run_for(std::chrono::seconds(1));
    CHECK(rig.reads == 0);
  }

  TEST_CASE(
      "job registry: a log's job and a new run - a resumed log keeps its run - a container "
      "log renamed by kubelet goes on with the run of its name") {
    StoreInDir db;
    Metrics metrics;
    JobRegistry registry(*db.store, metrics, fixed_wall_clock);
    TempDir dir;
    fs::create_directories(dir.path / "my_lora");
    const fs::path log = dir.path / "my_lora" / "log.txt";
    std::ofstream(log) << "step 1\n";

    auto file = tracked(log, rule_for_logs(dir.path / "*" / "log.txt"));
    REQUIRE(registry.register_job(*file, 0));
    CHECK(file->job.name == "my_lora");
    CHECK(file->job.job_id > 0);
    CHECK(file->job.run_id > 0);

    auto resumed = tracked(log, file->rule);
    REQUIRE(registry.register_job(*resumed, file->job.run_id));
    CHECK(resumed->job.job_id == file->job.job_id);
    CHECK(resumed->job.run_id == file->job.run_id);

    auto next = tracked(log, file->rule);
    REQUIRE(registry.register_job(*next, 0));
    CHECK(next->job.run_id != file->job.run_id);  // a plain log started again is a new run

    WatchRule pods = rule_for_logs(dir.path / "*" / "0.log");
    pods.source = "kubernetes";
    pods.job = "trainer";
    const fs::path pod_log = dir.path / "my_lora" / "0.log";
    std::ofstream(pod_log) << "";
    auto container = tracked(pod_log, pods);
    REQUIRE(registry.register_job(*container, 0));
    auto renamed = tracked(pod_log, pods);
    REQUIRE(registry.register_job(*renamed, 0));
    CHECK(renamed->job.run_id == container->job.run_id);
    CHECK(metrics.store_errors.empty());
  }

  TEST_CASE(
      "followed logs: past the descriptor budget the least recently read idle log is "
      "closed, and reopened when it is read again") {
    LogsRig rig;
    FollowedLogs& logs = rig.logs;
    RecordingHost& host = rig.host;
    Metrics& metrics = rig.metrics;
    logs.set_descriptor_budget(2);
    TempDir dir;
    const WatchRule rule = rule_for_logs(dir.path / "*" / "log.txt");
    host.rules = {rule};
    std::vector<std::string> paths;
    for (const char* job : {"a", "b", "c"}) {
      fs::create_directories(dir.path / job);
      paths.push_back((dir.path / job / "log.txt").string());
      std::ofstream(paths.back()) << "step 1\n";
      logs.track(paths.back(), rule, StartAt::kBeginning);
    }
    REQUIRE(logs.size() == 3);
    CHECK(host.refusals.empty());
    CHECK(host.reads[paths[0]] == 1);  // each read once when tracked
    CHECK_FALSE(logs.find(paths[0])->follower->is_open());
    CHECK(logs.find(paths[1])->follower->is_open());
    CHECK(logs.find(paths[2])->follower->is_open());
    CHECK(metrics.files_closed_idle == 1);

    // A log with unsaved progress is not idle: b stays open, c (read last) goes.
    logs.find(paths[1])->dirty = true;
    REQUIRE(logs.ensure_open(*logs.find(paths[0])));
    CHECK(logs.find(paths[0])->follower->is_open());
    CHECK(logs.find(paths[1])->follower->is_open());
    CHECK_FALSE(logs.find(paths[2])->follower->is_open());
  }

  TEST_CASE("followed logs: a reload lets go only of the logs whose rule changed") {
    LogsRig rig;
    FollowedLogs& logs = rig.logs;
    RecordingHost& host = rig.host;
    TempDir dir;
    WatchRule kept = rule_for_logs(dir.path / "a" / "*.txt");
    WatchRule changed = rule_for_logs(dir.path / "b" / "*.txt");
    fs::create_directories(dir.path / "a");
    fs::create_directories(dir.path / "b");
    const std::string a = (dir.path / "a" / "log.txt").string();
    const std::string b = (dir.path / "b" / "log.txt").string();
    std::ofstream(a) << "step 1\n";
    std::ofstream(b) << "step 1\n";
    logs.track(a, kept, StartAt::kBeginning);
    logs.track(b, changed, StartAt::kBeginning);
    Tracked* before = logs.find(a);

    WatchRule renamed = changed;
    renamed.job = "renamed-{parent}";
    const std::vector<WatchRule> fresh = {kept, renamed};
    logs.let_go_if([&](const Tracked& file) {
      const WatchRule* rule = rule_for(fresh, file.path());
      return rule == nullptr || *rule != file.rule;
    });
    CHECK(logs.find(a) == before);  // the same log, as it was
    CHECK(logs.find(b) == nullptr);
    CHECK(host.commits[b] == 1);  // read to its end and committed before it went
    CHECK(host.commits[a] == 0);
  }
  TEST_CASE("a handler that throws does not end the loop: the handlers after it still run") {
    boost::asio::io_context io;
    std::vector<std::string> failures;
    std::vector<int> ran;
    boost::asio::post(io, [&] { ran.push_back(1); });
    boost::asio::post(io, [] { throw std::runtime_error("basic_filebuf::underflow"); });
    boost::asio::post(io, [&] { ran.push_back(3); });
    boost::asio::post(io, [] { throw 42; });
    boost::asio::post(io, [&] { ran.push_back(5); });
    run_guarded(io, [&](const std::string& what) { failures.push_back(what); });
    CHECK(ran == std::vector<int>{1, 3, 5});
    REQUIRE(failures.size() == 2);
    CHECK(failures[0] == "basic_filebuf::underflow");
    CHECK(failures[1] == "an exception that is not a std::exception");
    // A stopped loop returns once, with nothing said.
    boost::asio::post(io, [&] { io.stop(); });
    boost::asio::post(io, [&] { ran.push_back(7); });
    io.restart();
    run_guarded(io, [&](const std::string& what) { failures.push_back(what); });
    CHECK(ran.size() == 3);
    CHECK(failures.size() == 2);
  }
}
