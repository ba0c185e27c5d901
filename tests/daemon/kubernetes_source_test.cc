// tests/daemon/kubernetes_source_test.cc
//
// The daemon on a /var/log/pods-shaped tree written by a CRI writer as containerd writes (P
// fragments at 16 KiB, stdout and stderr lines): the job is named after the pod's namespace and
// owner, kubelet's rename rotation keeps the container's run, a container restart
// (<restart+1>.log) is the next run, and a kill -9 and restart in the middle of a P fragment
// store the OOM once with its step, as the plain log gives it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "daemon/common/daemon_config.h"
#include "tests/support/cri_writer.h"
#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// A container's log file that the test grows as the runtime would.
struct ContainerLog {
  fs::path path;
  CriWriter writer;
  size_t written = 0;  // bytes of writer.log() already in a file

  // The process writes `text` to stderr in pieces; each piece's CRI lines go to the file.
  void write(std::string_view text, size_t piece = 700) {
    for (size_t at = 0; at < text.size(); at += piece) {
      writer.write(true, text.substr(at, piece));
      flush();
    }
  }
  void flush() {
    write_slowly(path, std::string_view(writer.log()).substr(written), 4096);
    written = writer.log().size();
  }
};

fs::path kubernetes_config(const TempDir& dir) {
  const fs::path config = dir.path / "oomtriage.yaml";
  std::ofstream(config) << "watch:\n  - source: kubernetes\n    logs: "
                        << (dir.path / "pods" / "*" / "*" / "*.log").string() << "\n";
  return config;
}

}  // namespace

TEST_SUITE("daemon::kubernetes") {
  TEST_CASE("a pod's path names the job: namespace and the owner without the pod's suffix") {
    auto pod = daemon::pod_of("/var/log/pods/ml_my-lora-7xk2p_0f1e2d3c-uid/trainer/0.log");
    CHECK(pod.namespace_name == "ml");
    CHECK(pod.pod == "my-lora-7xk2p");
    CHECK(pod.owner == "my-lora");
    CHECK(pod.container == "trainer");
    // A pod named by hand keeps its name: "flux-train" has no generated suffix.
    pod = daemon::pod_of("/var/log/pods/default_flux-train_uid/main/3.log");
    CHECK(pod.owner == "flux-train");
    CHECK(daemon::expand_template("{namespace}/{pod_owner}",
                                  "/var/log/pods/ml_my-lora-7xk2p_uid/trainer/0.log") ==
          "ml/my-lora");
  }

  TEST_CASE("the DaemonSet's config loads: source kubernetes reads /var/log/pods by default") {
    const std::vector<YAML::Node> docs = YAML::LoadAllFromFile(
        (fs::path(OOMTRIAGE_SOURCE_DIR) / "deploy" / "kubernetes" / "daemonset.yaml").string());
    REQUIRE(docs.size() == 2);
    CHECK(docs[1]["kind"].as<std::string>() == "DaemonSet");
    TempDir dir;
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << docs[0]["data"]["oomtriage.yaml"].as<std::string>();
    const auto loaded = daemon::load_daemon_config(config.string());
    REQUIRE(loaded);
    REQUIRE(loaded->watch.size() == 1);
    CHECK(loaded->watch[0].source == "kubernetes");
    CHECK(loaded->watch[0].logs == "/var/log/pods/*/*/*.log");
    CHECK(loaded->watch[0].job == "{namespace}/{pod_owner}");

    std::ofstream(config, std::ios::trunc) << "watch:\n  - source: kubelet\n";
    const auto refused = daemon::load_daemon_config(config.string());
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("source must be `files`, `kubernetes` or `slurm`") !=
          std::string::npos);
  }

  TEST_CASE("a container log: a kill -9 in the middle of a P fragment, the OOM once with its step") {
    TempDir dir;
    const fs::path container = dir.path / "pods" / "ml_my-lora-7xk2p_0f1e2d3c-aaaa" / "trainer";
    fs::create_directories(container);
    const fs::path config = kubernetes_config(dir);
    const std::string plain = slurp(kGolden / "aitk_sampling_oom_step500.log");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    ContainerLog log{container / "0.log", CriWriter(300)};
    {
      DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                           dir.path / "err");
      log.write(plain.substr(0, plain.size() * 2 / 3));
      REQUIRE(wait_until([&] {
        auto story = view.story("ml/my-lora");
        return story && !story->runs.empty();
      }));
      std::this_thread::sleep_for(300ms);
      CHECK(daemon.stop(SIGKILL) == -SIGKILL);
    }
    log.write(plain.substr(plain.size() * 2 / 3));
    log.writer.close();
    log.flush();
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err2");
    REQUIRE(wait_until([&] { return view.events("ml/my-lora") == 1; }));
    std::this_thread::sleep_for(600ms);  // longer than the settle delay: nothing more may come
    auto story = view.story("ml/my-lora");
    REQUIRE(story->events.size() == 1);
    const auto event = nlohmann::json::parse(story->events[0].event_json);
    CHECK(event["kind"] == "cuda");
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);
    CHECK(event["tried_to_allocate_bytes"] == 1610612736);
    CHECK(story->runs.size() == 1);

    // The container restarts: 1.log is the next run of the same job.
    ContainerLog restarted{container / "1.log", CriWriter()};
    restarted.write(slurp(kGolden / "aitk_completed.log"));
    restarted.writer.close();
    restarted.flush();
    REQUIRE(wait_until([&] {
      auto s = view.story("ml/my-lora");
      return s && s->runs.size() == 2 && s->runs[1].outcome == "completed";
    }));
    CHECK(view.events("ml/my-lora") == 1);
  }

  TEST_CASE(
      "kubelet rotates the container log mid-bar: the new file goes on with the bar, the step is "
      "known") {
    TempDir dir;
    const fs::path container = dir.path / "pods" / "ml_wan-video-q9z2m_uid" / "trainer";
    fs::create_directories(container);
    const fs::path config = kubernetes_config(dir);
    const std::string plain = slurp(kGolden / "aitk_sampling_oom_step500.log");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    ContainerLog log{container / "0.log", CriWriter(300)};
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err");
    // Up to the middle of the bar (line 67 of the plain log), then kubelet's rename and the
    // runtime's new file; the job's name and its bar were only in the old one.
    const size_t cut = plain.find("| 400/3000");
    REQUIRE(cut != std::string::npos);
    log.write(plain.substr(0, cut));
    REQUIRE(wait_until([&] {
      auto story = view.story("ml/wan-video");
      return story && !story->runs.empty();
    }));
    std::this_thread::sleep_for(300ms);
    fs::rename(container / "0.log", container / "0.log.20261130-101500");
    log.written = log.writer.log().size();
    log.write(plain.substr(cut));
    log.writer.close();
    log.flush();
    REQUIRE(wait_until([&] { return view.events("ml/wan-video") == 1; }));
    std::this_thread::sleep_for(600ms);
    auto story = view.story("ml/wan-video");
    REQUIRE(story->events.size() == 1);
    const auto event = nlohmann::json::parse(story->events[0].event_json);
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);
    CHECK(event["tried_to_allocate_bytes"] == 1610612736);
    CHECK(story->runs.size() == 1);
  }

  TEST_CASE("kubelet rotates the container log while the daemon is down: the OOM once, one run") {
    TempDir dir;
    const fs::path container = dir.path / "pods" / "ml_flux-1-x7k2p_uid" / "trainer";
    fs::create_directories(container);
    const fs::path config = kubernetes_config(dir);
    const std::string plain = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const size_t half = plain.size() / 2;
    StoreView view{dir.path / "state" / "oomtriage.db"};
    ContainerLog log{container / "0.log", CriWriter(300)};
    {
      DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                           dir.path / "err");
      log.write(plain.substr(0, half));
      REQUIRE(wait_until([&] {
        auto story = view.story("ml/flux-1");
        return story && !story->runs.empty();
      }));
      std::this_thread::sleep_for(300ms);
      CHECK(daemon.stop(SIGTERM) == 0);
    }
    log.write(plain.substr(half, plain.size() / 4));
    fs::rename(container / "0.log", container / "0.log.20261130-101500");
    log.written = log.writer.log().size();  // what follows goes to the new 0.log
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err2");
    log.write(plain.substr(half + plain.size() / 4));
    log.writer.close();
    log.flush();
    REQUIRE(wait_until([&] { return view.events("ml/flux-1") == 1; }));
    std::this_thread::sleep_for(600ms);
    auto story = view.story("ml/flux-1");
    REQUIRE(story->events.size() == 1);
    const auto event = nlohmann::json::parse(story->events[0].event_json);
    CHECK(event["kind"] == "cuda");
    CHECK(event["phase"] == "sampling");
    CHECK(event["tried_to_allocate_bytes"] == 1610612736);
    CHECK(story->runs.size() == 1);  // rotation is not a restart
  }
}
