// tests/daemon/check_command_test.cc
//
// `oomtriage check` end to end, the real binary on made-up inputs: a spec file (fits, will not
// fit and which phase, the JSON keys, bad files), each trainer's config as the job registry reads
// it (the spec --explain shows holds the config's family, resolution, batch, checkpointing and
// dtype), a trainer's command line after `--`, `--gpu auto` without NVML, and the real AI
// Toolkit example configs in ../shared/configs/ai-toolkit when they are there.
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <nlohmann/json.hpp>

#include <numeric>
#include <tuple>

#include "tests/support/check_run.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage::testing;
using nlohmann::json;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

using Checked = CheckRun;

// Runs `oomtriage check ARGS` in `dir` (relative paths in a command line are the job's own).
Checked check(const TempDir& dir, const std::vector<std::string>& args) {
  return run_check_in(dir.path, args);
}

fs::path write(const TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir.path / name;
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

// A FLUX.1-dev LoRA at 1024x1024, batch 1, checkpointing on, bf16: ~20-30 GiB by any account.
const char* kFluxSpec = R"({
  "model_family": "flux1-dev", "training_type": "lora", "resolution": [1024, 1024],
  "batch_size": 1, "gradient_checkpointing": true, "dtype": "bf16", "quantization": "none",
  "optimizer": "adamw8bit", "lora_rank": 16
})";

// What `check --explain --json` read from a config, for the assertions below.
struct Read {
  std::string family;
  json resolution;
  json batch_size;
  json gradient_checkpointing;
  json dtype;
  std::vector<std::string> assumptions;
};

Read explain(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--explain", "--json"};
  all.insert(all.end(), args.begin(), args.end());
  const Checked c = check(dir, all);
  INFO("stderr: " << c.err);
  REQUIRE(c.exit_code == 0);
  const json doc = c.doc();
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("spec"));
  const json& spec = doc["spec"];
  return {doc.value("family", ""), spec["resolution"],
          spec["batch_size"],      spec["gradient_checkpointing"],
          spec["dtype"],           doc["assumptions"].get<std::vector<std::string>>()};
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

}  // namespace

TEST_SUITE("daemon::check") {
  TEST_CASE(
      "a spec that fits an 80 GiB card exits 0 and says fits - on 8 GiB it exits 3 naming the "
      "phase that fails first") {
    TempDir dir;
    write(dir, "spec.json", kFluxSpec);

    Checked big = check(dir, {"--spec", "spec.json", "--gpu", "80GiB"});
    INFO("stderr: " << big.err);
    CHECK(big.exit_code == 0);
    CHECK(big.out.rfind("fits: peak ", 0) == 0);
    CHECK(big.out.find("\n  train_step ") != std::string::npos);
    CHECK(big.out.find("\n    activations ") != std::string::npos);
    CHECK(big.out.find("usable: ") != std::string::npos);

    const Checked small_json = check(dir, {"--spec", "spec.json", "--gpu", "8GiB", "--json"});
    CHECK(small_json.exit_code == 3);
    const json doc = small_json.doc();
    REQUIRE(doc.is_object());
    CHECK(doc["fits"] == false);
    REQUIRE(doc["first_failing_phase"].is_string());
    const std::string failing = doc["first_failing_phase"];

    const Checked small = check(dir, {"--spec", "spec.json", "--gpu", "8GiB"});
    CHECK(small.exit_code == 3);
    CHECK(small.out.rfind("will not fit: " + failing + " needs ", 0) == 0);
    CHECK(small.out.find("  over") != std::string::npos);
  }

  TEST_CASE("--json has the documented keys, and every phase's terms add up to its peak") {
    TempDir dir;
    write(dir, "spec.json", kFluxSpec);
    const Checked c = check(dir, {"--spec", "spec.json", "--gpu", "24", "--json"});
    CHECK((c.exit_code == 0 || c.exit_code == 3));
    const json doc = c.doc();
    REQUIRE(doc.is_object());
    for (const char* key : {"peak_bytes", "peak_phase", "usable_bytes", "fits", "phases",
                            "assumptions", "fixes", "family", "verdict", "first_failing_phase"}) {
      CAPTURE(key);
      CHECK(doc.contains(key));
    }
    CHECK(doc["family"] == "flux1-dev");
    CHECK(doc["assumptions"].is_array());
    CHECK(doc["fixes"].is_array());
    CHECK(doc["fits"] == (c.exit_code == 0));
    // "24" is GiB; the usable memory is the card less the CUDA context and slack.
    CHECK(doc["usable_bytes"].get<uint64_t>() < 24 * kGiB);
    CHECK(doc["usable_bytes"].get<uint64_t>() > 20 * kGiB);
    REQUIRE(doc["phases"].is_array());
    REQUIRE(!doc["phases"].empty());
    uint64_t highest = 0;
    std::string highest_phase;
    for (const json& phase : doc["phases"]) {
      CAPTURE(phase.dump());
      REQUIRE(phase["terms"].is_object());
      uint64_t sum = 0;
      for (const auto& [name, bytes] : phase["terms"].items()) sum += bytes.get<uint64_t>();
      CHECK(sum == phase["peak_bytes"].get<uint64_t>());
      if (phase["peak_bytes"].get<uint64_t>() > highest) {
        highest = phase["peak_bytes"];
        highest_phase = phase["phase"];
      }
    }
    CHECK(doc["peak_bytes"].get<uint64_t>() == highest);
    CHECK(doc["peak_phase"] == highest_phase);
  }

  TEST_CASE("a spec file that is not JSON, or has a field of the wrong type, exits 1 naming it") {
    TempDir dir;
    write(dir, "broken.json", "{\n  \"model_family\": \"flux1-dev\",\n  \"batch_size\": 1,\n}\n");
    Checked c = check(dir, {"--spec", "broken.json", "--gpu", "24GiB"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.rfind("oomtriage: broken.json:4: not valid JSON: ", 0) == 0);
    CHECK(c.out.empty());

    write(dir, "typed.json", R"({"model_family": "flux1-dev", "batch_size": "two"})");
    c = check(dir, {"--spec", "typed.json", "--gpu", "24GiB"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("typed.json") != std::string::npos);
    CHECK(c.err.find("batch_size") != std::string::npos);

    c = check(dir, {"--spec", "absent.json", "--gpu", "24GiB"});
    CHECK(c.exit_code == 2);
    CHECK(c.err.find("absent.json") != std::string::npos);

    write(dir, "spec.json", kFluxSpec);
    c = check(dir, {"--spec", "spec.json", "--gpu", "lots"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("--gpu 'lots': not a memory size") != std::string::npos);
  }

  TEST_CASE("--gpu auto without NVML exits 2 with one line saying what to give instead") {
    if (void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
      ::dlclose(nvml);
      OOMTRIAGE_SKIP("NVML is installed here: --gpu auto has an answer");
    }
    TempDir dir;
    write(dir, "spec.json", kFluxSpec);
    const std::string said =
        "oomtriage: --gpu auto: NVML is not available (libnvidia-ml.so.1): give the card's size, "
        "e.g. --gpu 24GiB\n";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--spec", "spec.json"},
          std::vector<std::string>{"--spec", "spec.json", "--gpu", "auto", "--json"}}) {
      const Checked c = check(dir, args);
      CHECK(c.exit_code == 2);
      CHECK(c.err == said);
      CHECK(c.out.empty());
    }
    // --explain needs no card.
    CHECK(check(dir, {"--spec", "spec.json", "--explain"}).exit_code == 0);
  }

  TEST_CASE("an AI Toolkit YAML is read as the registry reads it") {
    TempDir dir;
    write(dir, "job.yaml", R"(job: extension
config:
  name: made_up
  process:
    - type: sd_trainer
      network: {type: lora, linear: 32, linear_alpha: 32}
      datasets:
        - folder_path: /data/a
          resolution: [512, 768]
      train:
        batch_size: 3
        steps: 2000
        gradient_checkpointing: false
        optimizer: adamw8bit
        dtype: fp16
      model:
        name_or_path: black-forest-labs/FLUX.1-dev
        is_flux: true
      sample:
        sample_every: 250
        width: 512
        height: 512
        prompts: [a photo]
)");
    const Read r = explain(dir, {"job.yaml"});
    CHECK(r.family == "flux1-dev");
    CHECK(r.resolution == json::array({768, 768}));
    CHECK(r.batch_size == 3);
    CHECK(r.gradient_checkpointing == false);
    CHECK(r.dtype == "fp16");

    // Whether batch 3 without checkpointing fits is the model's call; the answer must be whole
    // and its exit code must agree with it.
    const Checked sized = check(dir, {"job.yaml", "--gpu", "80GiB", "--json"});
    const json doc = sized.doc();
    REQUIRE(doc.is_object());
    CHECK(doc["peak_bytes"].get<uint64_t>() > kGiB);
    CHECK(sized.exit_code == (doc["fits"] == true ? 0 : 3));
  }

  TEST_CASE(
      "a config with a field it cannot read is checked, the field shown, and the verdict is "
      "unknown") {
    TempDir dir;
    write(dir, "job.yaml", R"(config:
  name: made_up
  process:
    - type: sd_trainer
      network:
        type: lora
        linear: 16
      datasets:
        - folder_path: /data/a
          resolution: [1024]
      train:
        batch_size: lots
        dtype: bf16
      model:
        name_or_path: black-forest-labs/FLUX.1-dev
)");
    const Checked c = check(dir, {"job.yaml", "--gpu", "80GiB"});
    INFO("stderr: " << c.err);
    CHECK(c.exit_code == 4);
    CHECK(c.out.rfind("unknown: batch_size could not be read", 0) == 0);
    CHECK(c.out.find("assumed:\n  - job.yaml:12: ") != std::string::npos);
    CHECK(c.out.find("batch_size") != std::string::npos);
  }

  TEST_CASE(
      "a batch it refuses to read is never judged as its default: unknown, exit 4 - absurd values "
      "that read are errors") {
    TempDir dir;
    const auto job = [&](const std::string& batch, const std::string& resolution) {
      write(dir, "job.yaml",
            "config:\n  name: made_up\n  process:\n    - type: sd_trainer\n"
            "      network: {type: lora, linear: 16}\n"
            "      datasets:\n        - folder_path: /data/a\n"
            "          resolution: [" +
                resolution +
                "]\n"
                "      train:\n        batch_size: " +
                batch +
                "\n        dtype: bf16\n"
                "        gradient_checkpointing: true\n"
                "      model:\n        name_or_path: black-forest-labs/FLUX.1-dev\n"
                "        quantize: true\n");
    };
    // Batch 1 fits a 24 GiB card and batch 16 does not: a refused batch read as 1 would "fit".
    job("1", "1024");
    CHECK(check(dir, {"job.yaml", "--gpu", "24GiB"}).exit_code == 0);
    job("16", "1024");
    CHECK(check(dir, {"job.yaml", "--gpu", "24GiB"}).exit_code == 3);
    for (const std::string batch :
         {"1000000000000", "9223372036854775807", "1e30", ".inf", "-3", "many"}) {
      CAPTURE(batch);
      job(batch, "1024");
      const Checked c = check(dir, {"job.yaml", "--gpu", "24GiB", "--json"});
      CHECK(c.exit_code == 4);
      const json doc = c.doc();
      REQUIRE(doc.is_object());
      CHECK(doc["fits"].is_null());
      CHECK(doc["verdict"] == "unknown");
      CHECK(doc["unread"] == json::array({"batch_size"}));
      CHECK(doc["fixes"].empty());
    }
    struct Refused {
      std::string batch, resolution, says;
    };
    for (const Refused& refused : std::vector<Refused>{
             {"100000", "1024", " batch_size 100000 is not a batch any card trains"},
             {"0", "1024", " batch_size 0 is not a batch any card trains"},
             {"1", "0",
              "8: datasets[0].resolution[0] is not an image size (1 to 65536 pixels), got 0"},
             {"1", "4294968320", "8: datasets[0].resolution[0] is not an image size"}}) {
      CAPTURE(refused.batch);
      CAPTURE(refused.resolution);
      job(refused.batch, refused.resolution);
      const Checked c = check(dir, {"job.yaml", "--gpu", "24GiB"});
      CHECK(c.exit_code == 1);
      CHECK(c.err.find("oomtriage: job.yaml:" + refused.says) == 0);
      CHECK(c.out.empty());
    }
    // kohya's command line: the same.
    const Checked kohya =
        check(dir, {"--json", "--gpu", "24GiB", "--", "accelerate", "launch",
                    "sdxl_train_network.py", "--pretrained_model_name_or_path",
                    "stabilityai/stable-diffusion-xl-base-1.0", "--resolution", "1024,1024",
                    "--train_batch_size", "1000000000000", "--network_module", "networks.lora",
                    "--output_name", "made_up", "--mixed_precision", "bf16"});
    INFO("kohya: " << kohya.out << kohya.err);
    CHECK(kohya.exit_code == 4);
    CHECK(kohya.doc()["fits"].is_null());
  }

  TEST_CASE("a config that does not parse exits 1 with its file, line and reason") {
    TempDir dir;
    write(dir, "job.yaml", "config:\n  process:\n    - type: x\n   bad: [\n");
    const Checked c = check(dir, {"job.yaml", "--gpu", "24GiB"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.rfind("oomtriage: job.yaml:4: ", 0) == 0);
    CHECK(std::count(c.err.begin(), c.err.end(), '\n') == 1);

    write(dir, "config.json", "{\"--model_family\": \"flux\",\n \"--resolution\": }\n");
    const Checked json_config = check(dir, {"config.json", "--gpu", "24GiB"});
    CHECK(json_config.exit_code == 1);
    CHECK(json_config.err.rfind("oomtriage: config.json:2: not valid JSON: ", 0) == 0);
  }

  TEST_CASE("a kohya TOML and the dataset config it names are read as the registry reads them") {
    TempDir dir;
    write(dir, "sdxl.toml", R"([model_arguments]
pretrained_model_name_or_path = "stabilityai/stable-diffusion-xl-base-1.0"

[training_arguments]
output_name = "made_up"
mixed_precision = "fp16"
train_batch_size = 3
gradient_checkpointing = true
optimizer_type = "AdamW8bit"
dataset_config = "dataset.toml"

[network_arguments]
network_module = "networks.lora"
network_dim = 8
)");
    write(dir, "dataset.toml", R"([general]
caption_extension = ".txt"

[[datasets]]
resolution = 896

  [[datasets.subsets]]
  image_dir = "/data/a"
)");
    const Read r = explain(dir, {"sdxl.toml"});
    CHECK(r.family == "sdxl");
    CHECK(r.resolution == json::array({896, 896}));
    CHECK(r.batch_size == 3);
    CHECK(r.gradient_checkpointing == true);
    CHECK(r.dtype == "fp16");

    // The same job from its command line: --config_file names it; the arguments beside it are
    // said not to be read over the file.
    const Read command = explain(dir, {"--", "accelerate", "launch", "sdxl_train_network.py",
                                       "--config_file", "sdxl.toml", "--max_train_steps", "10"});
    CHECK(command.family == "sdxl");
    CHECK(command.resolution == json::array({896, 896}));
    CHECK(command.batch_size == 3);
    CHECK(mentions(command.assumptions, "--max_train_steps not read"));
  }

  TEST_CASE(
      "a command line whose only config file is a dataset config is read from its "
      "arguments, and the dataset config beside it gives the sizes") {
    TempDir dir;
    write(dir, "dataset.toml", "[[datasets]]\nresolution = [960, 544]\nbatch_size = 1\n");
    const Read r =
        explain(dir, {"--", "accelerate", "launch", "sdxl_train_network.py",
                      "--pretrained_model_name_or_path", "stabilityai/stable-diffusion-xl-base-1.0",
                      "--dataset_config", "dataset.toml", "--mixed_precision", "fp16",
                      "--gradient_checkpointing"});
    CHECK(r.family == "sdxl");
    CHECK(r.dtype == "fp16");
    CHECK(r.gradient_checkpointing == true);
    CHECK(r.resolution == json::array({960, 544}));  // issue 44: read beside the command line
    CHECK(r.batch_size == 1);
  }

  TEST_CASE("a SimpleTuner config.json is read as the registry reads it") {
    TempDir dir;
    write(dir, "config.json", R"({
  "--model_family": "flux",
  "--pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev",
  "--train_batch_size": 2,
  "--gradient_checkpointing": true,
  "--mixed_precision": "bf16",
  "--optimizer": "adamw_bf16",
  "--resolution": 768,
  "--resolution_type": "pixel"
})");
    const Read r = explain(dir, {"config.json"});
    CHECK(r.family == "flux1-dev");
    CHECK(r.resolution == json::array({768, 768}));
    CHECK(r.batch_size == 2);
    CHECK(r.gradient_checkpointing == true);
    CHECK(r.dtype == "bf16");
  }

  TEST_CASE("a OneTrainer config is read as the registry reads it") {
    TempDir dir;
    write(dir, "onetrainer.json", R"({
  "__version": 6,
  "training_method": "LORA",
  "model_type": "FLUX_DEV_1",
  "base_model_name": "black-forest-labs/FLUX.1-dev",
  "gradient_checkpointing": "ON",
  "batch_size": 4,
  "resolution": "512",
  "train_dtype": "BFLOAT_16",
  "optimizer": {"__version": 0, "optimizer": "ADAMW_8BIT"}
})");
    const Read r = explain(dir, {"onetrainer.json"});
    CHECK(r.family == "flux1-dev");
    CHECK(r.resolution == json::array({512, 512}));
    CHECK(r.batch_size == 4);
    CHECK(r.gradient_checkpointing == true);
    CHECK(r.dtype == "bf16");
  }

  TEST_CASE("a diffusers command line is read from its arguments after --") {
    TempDir dir;
    const std::vector<std::string> command = {"--",
                                              "accelerate",
                                              "launch",
                                              "train_dreambooth_lora_flux.py",
                                              "--pretrained_model_name_or_path",
                                              "black-forest-labs/FLUX.1-dev",
                                              "--resolution",
                                              "1024",
                                              "--train_batch_size",
                                              "2",
                                              "--gradient_checkpointing",
                                              "--mixed_precision",
                                              "bf16",
                                              "--instance_prompt",
                                              "a photo of sks dog"};
    const Read r = explain(dir, command);
    CHECK(r.family == "flux1-dev");
    CHECK(r.resolution == json::array({1024, 1024}));
    CHECK(r.batch_size == 2);
    CHECK(r.gradient_checkpointing == true);
    CHECK(r.dtype == "bf16");

    std::vector<std::string> on_card = {"--gpu", "80GiB", "--json"};
    on_card.insert(on_card.end(), command.begin(), command.end());
    const Checked c = check(dir, on_card);
    CHECK(c.exit_code == 0);
    CHECK(c.doc()["family"] == "flux1-dev");
  }

  TEST_CASE("an AI Toolkit command line names its config - one that names nothing is refused") {
    TempDir dir;
    fs::create_directories(dir.path / "config");
    write(dir, "config/x.yaml", R"(config:
  name: x
  process:
    - type: sd_trainer
      datasets: [{folder_path: /data, resolution: [640]}]
      train: {batch_size: 2, dtype: bf16}
      model: {name_or_path: black-forest-labs/FLUX.1-dev}
)");
    const Read r = explain(dir, {"--", "python", "run.py", "config/x.yaml"});
    CHECK(r.family == "flux1-dev");
    CHECK(r.resolution == json::array({640, 640}));
    CHECK(r.batch_size == 2);

    Checked c = check(dir, {"--gpu", "24GiB", "--", "python", "run.py"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("names no config file") != std::string::npos);

    c = check(dir, {"--gpu", "24GiB", "--", "python", "mystery.py", "--resolution", "1024"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("--trainer") != std::string::npos);

    c = check(dir, {"a.yaml", "b.yaml"});
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("a command line goes after --") != std::string::npos);
  }

  TEST_CASE("every AI Toolkit example config in ../shared is read with a known family and sized") {
    const fs::path folder =
        fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "configs" / "ai-toolkit";
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) OOMTRIAGE_SKIP("../shared/configs/ai-toolkit is absent");
    TempDir dir;
    int read = 0;
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".yaml" && ext != ".yml") continue;
      CAPTURE(entry.path().string());
      ++read;
      const Read r = explain(dir, {entry.path().string()});
      CHECK(!r.family.empty());
      CHECK(r.family != "unknown");
      CHECK(!mentions(r.assumptions, "is not in the architecture table"));

      const Checked c = check(dir, {entry.path().string(), "--gpu", "80GiB", "--json"});
      INFO("stderr: " << c.err);
      CHECK((c.exit_code == 0 || c.exit_code == 3));
      const json doc = c.doc();
      REQUIRE(doc.is_object());
      CHECK(doc["peak_bytes"].get<uint64_t>() > kGiB);
      CHECK(doc["family"] == r.family);
    }
    CHECK(read > 0);
  }
}
