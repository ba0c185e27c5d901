// tests/daemon/check_command_line_test.cc
//
// `oomtriage check -- COMMAND` (issue 45): a trainer's command line gets the same verdict and
// the same fixes as the same settings in its config file, launched or not; a launch over GPUs is
// judged and its fixes priced per GPU; the launcher's --mixed_precision is read where the script
// takes it; the fixes are edits of that command, and the command with the top fix applied reads
// back without that fix. The real binary on made-up kohya, musubi-tuner and diffusers jobs, and
// the edits themselves (daemon/cli/command_fixes.h) on made-up fixes.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <tuple>

#include "daemon/cli/command_fixes.h"
#include "tests/support/check_run.h"
#include "tests/support/e2e.h"

using namespace oomtriage::testing;
using nlohmann::json;

namespace {

// An SDXL LoRA at 1024 px, batch 8, checkpointing left out (kohya's default: off): far over a
// 24 GB card, and every lever of the ranking has something to say.
const std::vector<std::string> kKohyaArguments = {"--pretrained_model_name_or_path",
                                                  "sd_xl_base_1.0.safetensors",
                                                  "--train_batch_size",
                                                  "8",
                                                  "--resolution",
                                                  "1024,1024",
                                                  "--network_module",
                                                  "networks.lora",
                                                  "--mixed_precision",
                                                  "bf16",
                                                  "--optimizer_type",
                                                  "AdamW"};

// The same settings as a kohya --config_file.
const char* kKohyaToml = R"(pretrained_model_name_or_path = "sd_xl_base_1.0.safetensors"
train_batch_size = 8
resolution = "1024,1024"
network_module = "networks.lora"
mixed_precision = "bf16"
optimizer_type = "AdamW"
)";

std::vector<std::string> command(const std::vector<std::string>& launcher,
                                 const std::string& script,
                                 const std::vector<std::string>& arguments) {
  std::vector<std::string> out = launcher;
  out.push_back(script);
  out.insert(out.end(), arguments.begin(), arguments.end());
  return out;
}

CheckRun check_json(const TempDir& dir, const std::string& gpu,
                    const std::vector<std::string>& argv) {
  std::vector<std::string> args = {"--gpu", gpu, "--json", "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  return run_check_in(dir.path, args);
}

std::vector<std::string> fix_ids(const json& doc) {
  std::vector<std::string> ids;
  for (const json& fix : doc["fixes"]) ids.push_back(fix["id"].get<std::string>());
  return ids;
}

const json* fix_named(const json& doc, const std::string& id) {
  for (const json& fix : doc["fixes"]) {
    if (fix["id"] == id) return &fix;
  }
  return nullptr;
}

double gib(const json& bytes) { return bytes.get<double>() / double(1ull << 30); }

}  // namespace

TEST_SUITE("daemon::check_command_line") {
  TEST_CASE("the kohya command line gets the verdict and the fixes of its TOML, launched or not") {
    TempDir dir;
    write_file(dir.path / "x.toml", kKohyaToml);
    const CheckRun toml = check_json(
        dir, "24", command({"python"}, "sdxl_train_network.py", {"--config_file", "x.toml"}));
    INFO("stderr: " << toml.err);
    REQUIRE(toml.exit_code == 3);
    const json from_file = toml.doc();
    REQUIRE(from_file["fixes"].size() >= 2);

    for (const std::vector<std::string>& launcher :
         {std::vector<std::string>{"python"}, std::vector<std::string>{"accelerate", "launch"}}) {
      CAPTURE(launcher.back());
      const CheckRun line =
          check_json(dir, "24", command(launcher, "sdxl_train_network.py", kKohyaArguments));
      INFO("stderr: " << line.err);
      CHECK(line.exit_code == 3);
      const json doc = line.doc();
      REQUIRE(doc.is_object());
      CHECK(doc["verdict"] == from_file["verdict"]);
      CHECK(doc["first_failing_phase"] == from_file["first_failing_phase"]);
      CHECK(doc["peak_bytes"] == from_file["peak_bytes"]);
      CHECK(fix_ids(doc) == fix_ids(from_file));
      for (size_t i = 0; i < doc["fixes"].size() && i < from_file["fixes"].size(); ++i) {
        CHECK(doc["fixes"][i]["predicted_peak_bytes"] ==
              from_file["fixes"][i]["predicted_peak_bytes"]);
        CHECK(doc["fixes"][i]["fits"] == from_file["fixes"][i]["fits"]);
        // Flags of the command line, and the whole command with the fix applied.
        for (const json& change : doc["fixes"][i]["changes"]) {
          CHECK(change["path"].get<std::string>().rfind("--", 0) == 0);
        }
        REQUIRE(doc["fixes"][i].contains("command"));
        const auto fixed = doc["fixes"][i]["command"].get<std::vector<std::string>>();
        CHECK(std::equal(launcher.begin(), launcher.end(), fixed.begin()));
      }
      // A command naming its TOML edits the file: no command to copy.
      CHECK_FALSE(from_file["fixes"][0].contains("command"));
    }
  }

  TEST_CASE("a single-process accelerate launch gives exactly what the bare script gives") {
    TempDir dir;
    const auto strip_commands = [](json doc) {
      for (json& fix : doc["fixes"]) fix.erase("command");
      return doc;
    };
    const json bare =
        check_json(dir, "24", command({"python"}, "sdxl_train_network.py", kKohyaArguments)).doc();
    REQUIRE(bare.is_object());
    for (const std::vector<std::string>& launcher :
         {std::vector<std::string>{"accelerate", "launch"},
          std::vector<std::string>{"accelerate", "launch", "--num_processes", "1"},
          std::vector<std::string>{"accelerate", "launch", "--num_cpu_threads_per_process", "1"}}) {
      CAPTURE(launcher.back());
      const json launched =
          check_json(dir, "24", command(launcher, "sdxl_train_network.py", kKohyaArguments)).doc();
      CHECK(strip_commands(launched) == strip_commands(bare));
    }
  }

  TEST_CASE("a launch over GPUs is judged per GPU, with the config's fixes priced per GPU") {
    TempDir dir;
    // DDP: every GPU holds the whole job and the reducer's buckets: the same fixes, each a
    // little above its one-GPU peak.
    const json one =
        check_json(dir, "24", command({"python"}, "sdxl_train_network.py", kKohyaArguments)).doc();
    const json ddp =
        check_json(dir, "24",
                   command({"accelerate", "launch", "--multi_gpu", "--num_processes", "2"},
                           "sdxl_train_network.py", kKohyaArguments))
            .doc();
    REQUIRE(ddp.is_object());
    CHECK(ddp["processes"] == 2);
    CHECK(ddp["peak_bytes"].get<uint64_t>() > one["peak_bytes"].get<uint64_t>());
    CHECK(fix_ids(ddp) == fix_ids(one));
    for (size_t i = 0; i < ddp["fixes"].size() && i < one["fixes"].size(); ++i) {
      CHECK(ddp["fixes"][i]["predicted_peak_bytes"].get<uint64_t>() >=
            one["fixes"][i]["predicted_peak_bytes"].get<uint64_t>());
    }

    // ZeRO-3 over 4 GPUs shards the optimizer states: an 8-bit optimizer saves a quarter of what
    // it saves on one GPU, while a smaller resolution (activations, never sharded) saves the same.
    const std::vector<std::string> full = {"--pretrained_model_name_or_path",
                                           "sd_xl_base_1.0.safetensors",
                                           "--train_batch_size",
                                           "4",
                                           "--resolution",
                                           "1024,1024",
                                           "--mixed_precision",
                                           "bf16",
                                           "--gradient_checkpointing"};
    const json alone = check_json(dir, "24", command({"python"}, "sdxl_train.py", full)).doc();
    const json sharded = check_json(dir, "16",
                                    command({"accelerate", "launch", "--num_processes", "4",
                                             "--use_deepspeed", "--zero_stage", "3"},
                                            "sdxl_train.py", full))
                             .doc();
    REQUIRE(sharded.is_object());
    CHECK(sharded["processes"] == 4);
    CHECK(sharded["verdict"] == "will_not_fit");
    const json* optimizer_alone = fix_named(alone, "use_8bit_optimizer");
    const json* optimizer_sharded = fix_named(sharded, "use_8bit_optimizer");
    REQUIRE(optimizer_alone != nullptr);
    REQUIRE(optimizer_sharded != nullptr);
    const double saved_alone =
        gib(alone["peak_bytes"]) - gib((*optimizer_alone)["predicted_peak_bytes"]);
    const double saved_sharded =
        gib(sharded["peak_bytes"]) - gib((*optimizer_sharded)["predicted_peak_bytes"]);
    CHECK(saved_sharded > 0);
    CHECK(saved_sharded == doctest::Approx(saved_alone / 4).epsilon(0.15));
  }

  TEST_CASE("the launcher's --mixed_precision is the job's where the script takes accelerate's") {
    TempDir dir;
    const auto read = [&](const std::vector<std::string>& argv) {
      std::vector<std::string> args = {"--explain", "--json", "--"};
      args.insert(args.end(), argv.begin(), argv.end());
      const CheckRun run = run_check_in(dir.path, args);
      INFO("stderr: " << run.err);
      REQUIRE(run.exit_code == 0);
      return run.doc();
    };
    // musubi-tuner and diffusers' examples default --mixed_precision to None: accelerate's word.
    json doc = read({"accelerate", "launch", "--mixed_precision", "bf16",
                     "qwen_image_train_network.py", "--dit", "qwen_image_bf16.safetensors",
                     "--network_module", "networks.lora_qwen_image"});
    CHECK(doc["spec"]["dtype"] == "bf16");
    doc = read({"accelerate", "launch", "--mixed_precision=fp16", "--num_processes=2",
                "train_dreambooth_lora_sdxl.py", "--pretrained_model_name_or_path",
                "stabilityai/stable-diffusion-xl-base-1.0", "--resolution", "1024"});
    CHECK(doc["spec"]["dtype"] == "fp16");
    CHECK(doc["spec"]["processes"] == 2);
    // The script's own word wins.
    doc = read({"accelerate", "launch", "--mixed_precision", "fp16",
                "train_dreambooth_lora_sdxl.py", "--pretrained_model_name_or_path",
                "stabilityai/stable-diffusion-xl-base-1.0", "--mixed_precision", "bf16"});
    CHECK(doc["spec"]["dtype"] == "bf16");
    // sd-scripts passes its own default ("no") to accelerate: fp32, and the user is told why.
    std::vector<std::string> kohya = {"accelerate", "launch", "--mixed_precision", "bf16",
                                      "sdxl_train_network.py"};
    for (const std::string& word : kKohyaArguments) {
      if (word != "--mixed_precision" && word != "bf16") kohya.push_back(word);
    }
    doc = read(kohya);
    CHECK(doc["spec"]["dtype"] == "fp32");
    const auto said = doc["assumptions"].get<std::vector<std::string>>();
    CHECK(std::any_of(said.begin(), said.end(), [](const std::string& line) {
      return line.find("put --mixed_precision bf16 after the script") != std::string::npos;
    }));
  }

  TEST_CASE("the command with the top fix applied reads back without that fix") {
    TempDir dir;
    std::vector<std::string> argv =
        command({"accelerate", "launch"}, "sdxl_train_network.py", kKohyaArguments);
    argv.insert(argv.end(), {"--output_name", "my lora"});
    std::vector<std::string> text_args = {"--gpu", "24", "--"};
    text_args.insert(text_args.end(), argv.begin(), argv.end());
    const CheckRun text = run_check_in(dir.path, text_args);
    INFO("stdout: " << text.out);
    CHECK(text.out.find("--train_batch_size 8 -> 4") != std::string::npos);
    CHECK(text.out.find("+ --gradient_checkpointing") != std::string::npos);
    CHECK(text.out.find("+ --gradient_accumulation_steps 2") != std::string::npos);
    const size_t shown = text.out.find("the command with fix 1 applied:\n    ");
    REQUIRE(shown != std::string::npos);
    const size_t start = text.out.find("    ", shown) + 4;
    const std::string line = text.out.substr(start, text.out.find('\n', start) - start);
    CHECK(line.rfind("accelerate launch sdxl_train_network.py ", 0) == 0);
    CHECK(line.find("--output_name 'my lora'") != std::string::npos);

    const json doc = check_json(dir, "24", argv).doc();
    REQUIRE(doc["fixes"].size() >= 1);
    const std::string top = doc["fixes"][0]["id"];
    const auto fixed = doc["fixes"][0]["command"].get<std::vector<std::string>>();
    std::string quoted;
    for (const std::string& word : fixed) {
      quoted += (quoted.empty() ? "" : " ") +
                (word.find(' ') == std::string::npos ? word : "'" + word + "'");
    }
    CHECK(line == quoted);

    const CheckRun again = check_json(dir, "24", fixed);
    INFO("stderr: " << again.err);
    REQUIRE(again.doc().is_object());
    CHECK(again.doc()["peak_bytes"].get<uint64_t>() < doc["peak_bytes"].get<uint64_t>());
    CHECK(fix_named(again.doc(), top) == nullptr);
  }

  TEST_CASE("run's pre-flight judges a launched command per GPU, as check does") {
    TempDir dir;
    // A stand-in for accelerate: run starts it, and it does nothing.
    write_file(dir.path / "accelerate", "#!/bin/sh\nexit 0\n");
    fs::permissions(dir.path / "accelerate", fs::perms::owner_all);
    const auto run_with = [&](const std::vector<std::string>& launcher) {
      std::string command = "cd '" + dir.path.string() + "' && '" OOMTRIAGE_BINARY +
                            std::string("' --state-dir '") + (dir.path / "state").string() +
                            "' run --gpu 24GiB --job sdxl -- ./accelerate launch";
      for (const std::string& word : launcher) command += " " + word;
      command +=
          " sdxl_train.py --pretrained_model_name_or_path sd_xl_base_1.0.safetensors "
          "--train_batch_size 4 --resolution 1024,1024 --mixed_precision bf16 "
          "--gradient_checkpointing 2>'" +
          (dir.path / "err.txt").string() + "'";
      const int status = std::system(command.c_str());
      return std::make_pair(status, slurp(dir.path / "err.txt"));
    };
    // A full SDXL fine-tune is far over 24 GiB on one GPU; ZeRO-3 over 4 shares it out.
    int status = 0;
    std::string err;
    std::tie(status, err) = run_with({});
    INFO(err);
    CHECK(status == 0);
    CHECK(err.find("predicted OOM") != std::string::npos);
    std::tie(status, err) =
        run_with({"--num_processes", "4", "--use_deepspeed", "--zero_stage", "3"});
    CHECK(status == 0);
    CHECK(err.find("predicted OOM") == std::string::npos);
    CHECK(err.find("no pre-flight") == std::string::npos);
  }

  TEST_CASE("a fix's flags are edits of the trainer's arguments, never of the launcher's words") {
    using oomtriage::parsers::TargetKind;
    using oomtriage::triage::ConfigChange;
    using oomtriage::triage::Fix;
    const std::vector<std::string> argv = {"accelerate", "launch",      "--mixed_precision",
                                           "bf16",       "train.py",    "--train_batch_size",
                                           "8",          "--full_bf16", "--resolution=1024"};
    const auto change = [](const std::string& path, json from, json to) {
      ConfigChange c;
      c.path = path;
      c.from = std::move(from);
      c.to = std::move(to);
      c.kind = TargetKind::kArgs;
      return c;
    };
    Fix fix;
    fix.changes = {change("--train_batch_size", 8, 4), change("--full_bf16", true, nullptr),
                   change("--resolution", "1024", "768"), change("--mixed_precision", "no", "fp16"),
                   change("--gradient_checkpointing", false, true)};
    const auto fixed = oomtriage::daemon::with_fix(argv, fix);
    REQUIRE(fixed.has_value());
    CHECK(*fixed == std::vector<std::string>{"accelerate", "launch", "--mixed_precision", "bf16",
                                             "train.py", "--train_batch_size", "4",
                                             "--resolution=768", "--mixed_precision", "fp16",
                                             "--gradient_checkpointing"});
    std::vector<Fix> fixes = {fix};
    oomtriage::daemon::as_edits_of(argv, fixes);
    const auto& edited = fixes[0].changes;
    CHECK(edited[0].from == 8);       // on the command: a change
    CHECK(edited[3].from.is_null());  // the launcher's word is not the script's
    CHECK(edited[4].from.is_null());  // added
    Fix file_fix;
    ConfigChange in_file = change("train_batch_size", 8, 4);
    in_file.kind = TargetKind::kToml;
    file_fix.changes = {in_file};
    CHECK_FALSE(oomtriage::daemon::with_fix(argv, file_fix).has_value());
  }
}
