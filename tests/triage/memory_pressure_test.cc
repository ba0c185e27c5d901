// tests/triage/memory_pressure_test.cc: the ranker's one input (triage/memory_pressure.h) as a
// crash, a prediction and a near-OOM warning make it, and the one table of bytes per parameter
// that the memory model and the crash figures both price weights with.
#include "triage/memory_pressure.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "parsers/job_config.h"
#include "triage/crash_figures.h"
#include "triage/memory_model.h"
#include "triage/spec_from_config.h"
#include "triage/triage_job.h"

using namespace oomtriage;
using namespace oomtriage::triage;
using parsers::Phase;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

parsers::JobConfig flux_lora(const std::string& model_lines) {
  const std::string yaml =
      "job: extension\nconfig:\n  name: job\n  process:\n    - type: sd_trainer\n"
      "      network:\n        type: lora\n        linear: 16\n"
      "      datasets:\n        - folder_path: /data\n          resolution: [512, 768, 1024]\n"
      "      train:\n        steps: 3000\n        batch_size: 2\n"
      "        gradient_checkpointing: false\n        cache_text_embeddings: true\n"
      "        dtype: bf16\n"
      "      model:\n        name_or_path: black-forest-labs/FLUX.1-dev\n        is_flux: true\n" +
      model_lines;
  auto load = parsers::parse_job_config(yaml, parsers::ConfigFormat::kYaml, "config.yaml");
  INFO(load.error().message);
  REQUIRE(load);
  return *load;
}

parsers::OomEvent crash(uint64_t in_use, uint64_t tried) {
  parsers::OomEvent event;
  event.phase = Phase::kTrainStep;
  event.step = 2;
  event.total_steps = 3000;
  event.figures.total_capacity_bytes = 24 * kGiB;
  event.figures.this_process_in_use_bytes = in_use;
  event.figures.tried_to_allocate_bytes = tried;
  return event;
}

uint64_t term(const MemoryEstimate& estimate, Phase phase, const std::string& name) {
  const PhaseEstimate* p = estimate.phase(phase);
  REQUIRE(p != nullptr);
  for (const MemoryTerm& t : p->terms) {
    if (t.name == name) return t.bytes;
  }
  return 0;
}

}  // namespace

TEST_SUITE("triage::memory pressure") {
  TEST_CASE("a crash needs what it held plus the request that failed") {
    parsers::OomEvent event = crash(20 * kGiB, 2 * kGiB);
    event.figures.gpu_index = 1;
    event.figures.free_bytes = kGiB;
    event.figures.reserved_unallocated_bytes = kGiB / 2;
    const MemoryPressure p = pressure_of_crash(event);
    CHECK(p.phase == Phase::kTrainStep);
    CHECK(p.step == 2);
    CHECK(p.need_bytes == 22 * kGiB);
    CHECK(p.card_bytes == 24 * kGiB);
    CHECK(p.others_bytes == 0);
    CHECK(p.gpu_index == 1);
    CHECK(p.requested_bytes == 2 * kGiB);
    CHECK(p.reserved_unallocated_bytes == kGiB / 2);

    SUBCASE("other processes are summed; a lone one that is the job itself is the job") {
      parsers::OomEvent shared = event;
      shared.figures.other_processes = {{101, 3 * kGiB}, {102, kGiB}};
      const MemoryPressure two = pressure_of_crash(shared);
      CHECK(two.others_bytes == 4 * kGiB);
      CHECK(two.other_processes.size() == 2);
      CHECK(two.need_bytes == 22 * kGiB);
      // In a container the driver names the job by its host PID, with the job's own memory.
      parsers::OomEvent contained = crash(0, 2 * kGiB);
      contained.figures.this_process_in_use_bytes.reset();
      contained.figures.allocated_by_pytorch_bytes = 19 * kGiB;
      contained.figures.reserved_unallocated_bytes = kGiB / 2;
      contained.figures.other_processes = {{4242, 20 * kGiB}};
      const MemoryPressure itself = pressure_of_crash(contained);
      CHECK(itself.others_bytes == 0);
      CHECK(itself.other_processes.empty());
      CHECK(itself.need_bytes == 22 * kGiB);
    }
    SUBCASE("without the card's capacity the need is unknown") {
      parsers::OomEvent bare = event;
      bare.figures.total_capacity_bytes.reset();
      CHECK_FALSE(pressure_of_crash(bare).need_bytes);
    }
  }

  TEST_CASE("a near-OOM warning is ranked as a crash holding its peak on its card would be") {
    const parsers::JobConfig config = flux_lora("        quantize: true\n");
    const JobView job{&config, "", nullptr};
    const uint64_t peak = 23 * kGiB;
    parsers::OomEvent as_crash;
    as_crash.phase = Phase::kTrainStep;
    as_crash.step = 40;
    as_crash.figures.total_capacity_bytes = 24 * kGiB;
    as_crash.figures.this_process_in_use_bytes = peak;
    const auto warned = triage_pressure(
        pressure_of_near_oom(Phase::kTrainStep, 40, peak, 24 * kGiB), config.trainer, {}, job, {});
    const auto crashed = triage_event(as_crash, config.trainer, {}, job, {});
    REQUIRE_FALSE(warned.empty());
    REQUIRE(warned.size() == crashed.size());
    for (size_t i = 0; i < warned.size(); ++i) {
      CHECK(warned[i].id == crashed[i].id);
      CHECK(warned[i].fits == crashed[i].fits);
      CHECK(warned[i].predicted_peak_bytes == crashed[i].predicted_peak_bytes);
      CHECK(warned[i].estimate == crashed[i].estimate);
    }
  }

  TEST_CASE("a prediction's card makes the ranker's fit the check's usable memory") {
    const parsers::JobConfig config = flux_lora("        quantize: true\n");
    const MemoryEstimate estimate = estimate_memory(spec_from_config(config));
    const PhaseEstimate& step = *estimate.phase(Phase::kTrainStep);
    const uint64_t usable = 10 * kGiB;
    for (const double factor : {1.0, 1.25}) {
      const MemoryPressure p = pressure_of_prediction(config, step, usable, factor);
      REQUIRE(p.card_bytes);
      CHECK(static_cast<double>(*p.card_bytes) * kFitMargin * factor ==
            doctest::Approx(static_cast<double>(usable)));
      CHECK(p.need_bytes == step.peak_bytes);
      CHECK(p.others_bytes == 0);
      CHECK(p.step == 1500);  // a later step: the largest bucket comes at random
    }
  }

  TEST_CASE("one table of bytes per parameter: the crash figures price weights as the model does") {
    CHECK(bytes_per_weight("bf16") == 2);
    CHECK(bytes_per_weight("float32") == 4);
    CHECK(bytes_per_weight("float32", "none") == 4);
    CHECK(bytes_per_weight("bf16", "uint4|ostris/accuracy_recovery_adapters") ==
          bytes_per_weight("bf16", "uint4"));
    CHECK(bytes_per_weight("bf16", "int8-quanto") == bytes_per_weight("bf16", "int8"));
    CHECK(bytes_per_weight("bf16", "uint4") < bytes_per_weight("bf16", "qfloat8"));
    CHECK(bytes_per_weight("bf16", "qfloat8") < 2);
    // A quantization the table does not know reads as 8-bit, as the model reads it.
    CHECK(bytes_per_weight("bf16", "mystery") == bytes_per_weight("bf16", "int8"));

    for (const std::string qtype : {"qfloat8", "uint4"}) {
      CAPTURE(qtype);
      const parsers::JobConfig config =
          flux_lora("        quantize: true\n        qtype: " + qtype + "\n");
      const MemoryEstimate estimate = estimate_memory(spec_from_config(config));
      // The text encoder is cached: the crash figures' weights are the denoiser's alone.
      CHECK(static_cast<double>(weights_bytes(config)) ==
            doctest::Approx(
                static_cast<double>(term(estimate, Phase::kTrainStep, "denoiser_weights")))
                .epsilon(1e-9));
    }
  }
}
