// tests/daemon/job_registry_test.cc
//
// The job registry (daemon/service/job_locator.h), in process: which config a log gets, in the
// documented order, and what is said when one cannot be read or has bad fields.
#include <doctest/doctest.h>

#include "daemon/service/job_locator.h"
#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::daemon;
using namespace oomtriage::testing;

namespace {

const fs::path kSource(OOMTRIAGE_SOURCE_DIR);
const fs::path kConfigs = kSource / "tests" / "testdata" / "configs";

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_SUITE("daemon::job registry") {
  TEST_CASE("AI Toolkit: the config.yaml beside log.txt, the job named after its folder") {
    TempDir dir;
    const fs::path job = dir.path / "my_lora";
    fs::create_directories(job);
    fs::copy_file(kSource / "examples/training_folder/my_lora/config.yaml", job / "config.yaml");
    write_file(job / "log.txt", "Running 1 job\n");
    auto found = locate_job(job / "log.txt", std::nullopt, parsers::Trainer::kAiToolkit, {});
    REQUIRE(found);
    REQUIRE(found->job);
    CHECK(found->job->name == "my_lora");
    CHECK(found->job->config_path == (job / "config.yaml").string());
    REQUIRE(found->config);
    CHECK(found->config->family == parsers::ModelFamily::kFlux1);
    CHECK(found->config->sample.steps == 30);
    CHECK(found->warning.empty());
  }

  TEST_CASE(
      "an explicit config wins over the one beside the log - an unreadable one is an error naming "
      "it") {
    TempDir dir;
    fs::copy_file(kSource / "examples/training_folder/my_lora/config.yaml",
                  dir.path / "config.yaml");
    write_file(dir.path / "train.log", "steps: 1\n");
    auto found = locate_job(dir.path / "train.log", kConfigs / "kohya_flux_lora.toml",
                            parsers::Trainer::kSdScripts, {});
    REQUIRE(found);
    REQUIRE(found->config);
    CHECK(found->config->trainer == parsers::Trainer::kSdScripts);
    CHECK(found->config->batch_size == 2);
    auto missing = locate_job(dir.path / "train.log", dir.path / "nope.toml",
                              parsers::Trainer::kSdScripts, {});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message.find("nope.toml") != std::string::npos);
  }

  TEST_CASE("kohya: the file the log says it loads, wherever it is") {
    TempDir dir;
    fs::create_directories(dir.path / "cfg");
    fs::create_directories(dir.path / "run");
    fs::copy_file(kConfigs / "kohya_flux_lora.toml", dir.path / "cfg" / "flux_lora.toml");
    write_file(dir.path / "run" / "train.log",
               "2025-01-04 10:21:33 INFO     Loading settings from " +
                   (dir.path / "cfg" / "flux_lora.toml").string() + "...   train_util.py:4174\n");
    auto found =
        locate_job(dir.path / "run" / "train.log", std::nullopt, parsers::Trainer::kUnknown, {});
    REQUIRE(found);
    REQUIRE(found->job);
    CHECK(found->job->config_path == (dir.path / "cfg" / "flux_lora.toml").string());
    REQUIRE(found->config);
    CHECK(found->config->batch_size == 2);
  }

  TEST_CASE("no config anywhere: no claims, and the reason in words") {
    TempDir dir;
    write_file(dir.path / "log.txt", "hello\n");
    auto found = locate_job(dir.path / "log.txt", std::nullopt, parsers::Trainer::kUnknown, {});
    REQUIRE(found);
    CHECK_FALSE(found->config);
    CHECK_FALSE(found->config_problem.empty());
  }

  TEST_CASE("a bad field is one warning with the file and line - the rest of the config is used") {
    TempDir dir;
    const fs::path job = dir.path / "bad_field";
    fs::create_directories(job);
    std::string yaml = slurp(kSource / "examples/training_folder/my_lora/config.yaml");
    const std::string from = "batch_size: 1";
    REQUIRE(yaml.find(from) != std::string::npos);
    yaml.replace(yaml.find(from), from.size(), "batch_size: lots");
    write_file(job / "config.yaml", yaml);
    write_file(job / "log.txt", "Running 1 job\n");
    auto found = locate_job(job / "log.txt", std::nullopt, parsers::Trainer::kAiToolkit, {});
    REQUIRE(found);
    REQUIRE(found->config);
    CHECK(found->config->sample.steps == 30);
    CHECK_FALSE(found->config->knows(parsers::Knob::kBatchSize));
    CHECK(found->warning.find("config.yaml:") != std::string::npos);
    CHECK(found->warning.find("batch_size") != std::string::npos);
  }
}
