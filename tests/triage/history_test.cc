// tests/triage/history_test.cc
//
// After a crash: which proposed fixes the config now carries (a patch that changes nothing), and
// the escalation when a run carried a fix and crashed again in the same phase.
#include "triage/history.h"
#include "triage/triage_job.h"

#include <doctest/doctest.h>

#include "triage/config_patch.h"
#include "triage/ranker.h"

using namespace oomtriage;
using parsers::TargetKind;

namespace {

const std::string kYaml =
    "config:\n"
    "  name: job\n"
    "  process:\n"
    "    - train:\n"
    "        batch_size: 1\n"
    "      sample:\n"
    "        width: 1024\n"
    "        height: 1024\n"
    "        sample_steps: 30\n"
    "        sample_every: 250\n";

std::vector<triage::Fix> rank_sampling(const std::string& yaml,
                                       std::vector<std::string> tried = {}) {
  parsers::LogAnalysis analysis;
  analysis.trainer = parsers::Trainer::kAiToolkit;
  parsers::OomEvent event;
  event.phase = parsers::Phase::kSampling;
  event.step = 250;
  analysis.events.push_back(event);
  auto load = parsers::parse_job_config(yaml, parsers::ConfigFormat::kYaml, "config.yaml");
  REQUIRE(load);
  return triage::triage_log(analysis, {&*load, ""}, {std::nullopt, std::move(tried)}).fixes;
}

}  // namespace

TEST_SUITE("triage::history") {
  TEST_CASE("a fix is carried when the config already holds all its changes") {
    const auto fixes = rank_sampling(kYaml);
    REQUIRE(fixes.front().id == "cheapen_previews");
    CHECK(triage::carried_fixes(fixes, {{TargetKind::kYaml, "config.yaml", kYaml}}).empty());
    const auto patched = triage::patch_file(TargetKind::kYaml, kYaml, fixes.front().changes);
    REQUIRE(patched);
    CHECK(triage::carried_fixes(fixes, {{TargetKind::kYaml, "/elsewhere/config.yaml", *patched}}) ==
          std::vector<std::string>{"cheapen_previews"});
    // Half of a fix is not the fix.
    const auto half = triage::patch_file(TargetKind::kYaml, kYaml, {fixes.front().changes.front()});
    REQUIRE(half);
    CHECK(triage::carried_fixes(fixes, {{TargetKind::kYaml, "config.yaml", *half}}).empty());
    // An environment change cannot be seen in a file.
    triage::Fix env;
    env.id = "expandable_segments";
    env.changes.push_back(
        {"env.PYTORCH_CUDA_ALLOC_CONF", "null", "\"expandable_segments:True\"", TargetKind::kEnv});
    CHECK(triage::carried_fixes({env}, {{TargetKind::kYaml, "config.yaml", kYaml}}).empty());
  }

  TEST_CASE("carried and crashed again in the same phase: the next lever comes first") {
    const auto first = rank_sampling(kYaml);
    REQUIRE(first.front().id == "cheapen_previews");
    const auto patched = triage::patch_file(TargetKind::kYaml, kYaml, first.front().changes);
    REQUIRE(patched);
    const auto again = rank_sampling(*patched, {"cheapen_previews"});
    REQUIRE(again.size() >= 2);
    CHECK(again.front().id == "disable_sampling");
    CHECK(again.back().id == "cheapen_previews");
    CHECK(again.back().why.find("the previous run carried this fix") != std::string::npos);
  }

  TEST_CASE(
      "the one triage path: the previous crash's fixes the config carries count as tried "
      "only in the same phase and only for a fatal crash") {
    const auto first = rank_sampling(kYaml);
    REQUIRE(first.front().id == "cheapen_previews");
    const auto patched = triage::patch_file(TargetKind::kYaml, kYaml, first.front().changes);
    REQUIRE(patched);
    auto load = parsers::parse_job_config(*patched, parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(load);
    const std::vector<parsers::NativeFile> files{{TargetKind::kYaml, "config.yaml", *patched}};
    const triage::JobView job{&*load, "", &files};
    parsers::OomEvent event;
    event.phase = parsers::Phase::kSampling;
    event.step = 250;
    parsers::LogAnalysis analysis;
    analysis.trainer = parsers::Trainer::kAiToolkit;
    analysis.events.push_back(event);

    const triage::History same_phase{triage::StoredCrash{"sampling", first}, {}};
    const triage::Triage again = triage::triage_log(analysis, job, same_phase);
    REQUIRE(again.incident == &analysis.events.back());
    REQUIRE(again.fixes.size() >= 2);
    CHECK(again.fixes.front().id == "disable_sampling");
    CHECK(again.fixes.back().id == "cheapen_previews");

    // The same fixes after a crash in another phase say nothing about this one.
    const triage::History other_phase{triage::StoredCrash{"train_step", first}, {}};
    CHECK(triage::triage_log(analysis, job, other_phase).fixes.front().id != "disable_sampling");
    // Nor for a recovered OOM, nor without the job's files to compare.
    analysis.events.back().recovered = true;
    CHECK(triage::triage_log(analysis, job, same_phase).fixes.back().id != "cheapen_previews");
    analysis.events.back().recovered = false;
    CHECK(triage::triage_log(analysis, {&*load, "", nullptr}, same_phase).fixes.back().id !=
          "cheapen_previews");
    // An analysis without an OOM has no incident and no fixes.
    const triage::Triage none = triage::triage_log(parsers::LogAnalysis{}, job, same_phase);
    CHECK(none.incident == nullptr);
    CHECK(none.fixes.empty());
  }
}
