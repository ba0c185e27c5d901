// parsers/launcher.cc: the launchers' words. Sources for each option's meaning: accelerate's
// `accelerate launch --help`, torchrun's and deepspeed's launcher options, HF TrainingArguments'
// --deepspeed and --fsdp (docs/memory-model.md, "Per GPU").
#include "parsers/launcher.h"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace oomtriage::parsers {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string lower(std::string word) {
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

// "0,1,3" -> 3; "" or "-1" -> nullopt (no GPU named).
std::optional<int> device_count(std::string_view list) {
  if (list.empty() || list == "-1") return std::nullopt;
  return static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
}

// The launchers' switches that take no value; every other `--option` takes one.
bool is_switch(std::string_view launcher, std::string_view option) {
  static const std::vector<std::string_view> kAccelerate = {"multi_gpu",
                                                            "use_deepspeed",
                                                            "use_fsdp",
                                                            "use_megatron_lm",
                                                            "cpu",
                                                            "tpu",
                                                            "module",
                                                            "m",
                                                            "no_python",
                                                            "quiet",
                                                            "q",
                                                            "debug",
                                                            "use_xpu",
                                                            "same_network",
                                                            "fsdp_offload_params_flag",
                                                            "gradient_clipping_flag"};
  static const std::vector<std::string_view> kTorchrun = {
      "standalone", "module", "m", "no_python", "no-python", "run_path", "run-path"};
  static const std::vector<std::string_view> kDeepspeed = {"no_python",       "no_local_rank",
                                                           "module",          "force_multi",
                                                           "autotuning_flag", "bind_cores_to_rank"};
  const auto& words = launcher == "accelerate" ? kAccelerate
                      : launcher == "torchrun" ? kTorchrun
                                               : kDeepspeed;
  return std::find(words.begin(), words.end(), option) != words.end();
}

// ZeRO stage from a number word; "0" is DDP.
std::optional<std::string> zero_sharding(std::string_view stage) {
  if (stage == "0") return "ddp";
  if (stage == "1" || stage == "2" || stage == "3") return "zero" + std::string(stage);
  return std::nullopt;
}

std::optional<std::string> device_word(std::string value) {
  value = lower(std::move(value));
  if (value == "cpu" || value == "nvme") return value;
  return std::nullopt;
}

// accelerate's --fsdp_sharding_strategy: a name or its number (1 FULL_SHARD, 2 SHARD_GRAD_OP,
// 3 NO_SHARD, 4 HYBRID_SHARD, 5 HYBRID_SHARD_ZERO2).
std::optional<std::string> fsdp_strategy(std::string value) {
  value = lower(std::move(value));
  if (value == "1" || value == "full_shard") return "fsdp_full";
  if (value == "2" || value == "shard_grad_op") return "fsdp_grad_op";
  if (value == "3" || value == "no_shard") return "fsdp_no_shard";
  if (value == "4" || value == "hybrid_shard") return "fsdp_hybrid";
  if (value == "5" || value == "hybrid_shard_zero2") return "fsdp_hybrid_zero2";
  return std::nullopt;
}

// One launcher option and its value, into the setup.
void read_launcher_option(std::string_view launcher, const std::string& name,
                          const std::string& value, DistributedSetup& s, bool& deepspeed,
                          bool& fsdp) {
  const std::string key = [&] {
    std::string k = name;
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
  }();
  if (key == "num_processes" || key == "nproc_per_node" || key == "num_gpus") {
    if (auto n = whole_number(value)) s.processes = *n;
  } else if (key == "num_machines" || key == "nnodes" || key == "num_nodes") {
    if (auto n = whole_number(value.substr(value.find(':') + 1))) s.machines = *n;
  } else if (key == "include" && launcher == "deepspeed") {
    // "localhost:0,1"
    if (auto n = device_count(value.substr(value.find(':') + 1))) s.processes = *n;
  } else if (key == "gpu_ids") {
    if (value != "all") {
      if (auto n = device_count(value)) s.visible_gpus = *n;
    }
  } else if (key == "zero_stage") {
    s.sharding = zero_sharding(value);
    deepspeed = true;
  } else if (key == "deepspeed_config_file") {
    s.deepspeed_config = value;
    deepspeed = true;
  } else if (key == "offload_optimizer_device") {
    s.offload_optimizer = device_word(value);
  } else if (key == "offload_param_device") {
    s.offload_params = device_word(value);
  } else if (key == "fsdp_sharding_strategy") {
    s.sharding = fsdp_strategy(value);
    fsdp = true;
  } else if (key == "fsdp_offload_params") {
    if (lower(value) == "true") s.offload_params = "cpu";
    fsdp = true;
  } else if (key == "fsdp_reshard_after_forward") {
    // FSDP2: true is FULL_SHARD, false SHARD_GRAD_OP.
    s.sharding = lower(value) == "false" ? "fsdp_grad_op" : "fsdp_full";
    fsdp = true;
  } else if (key == "config_file") {
    s.accelerate_config = value;
  } else if (key == "mixed_precision") {
    s.mixed_precision = lower(value);
  } else if (key == "context_parallel_size" || key == "cp_size" ||
             key == "parallelism_config_cp_size") {
    if (auto n = whole_number(value)) s.context_parallel = *n;
  }
}

// The launcher's words from argv[start]: options until the script, then the trainer's argv.
size_t read_launcher_words(std::string_view launcher, const std::vector<std::string>& argv,
                           size_t at, DistributedSetup& s) {
  bool deepspeed = false, fsdp = false;
  bool module = false;
  for (; at < argv.size(); ++at) {
    const std::string& word = argv[at];
    if (!starts_with(word, "-")) break;
    std::string name = word.substr(word[1] == '-' ? 2 : 1);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    std::string key = name;
    std::replace(key.begin(), key.end(), '-', '_');
    if (key == "m" || key == "module") module = true;
    // Every visible GPU unless a count follows; DDP unless the trainer's config shards.
    if (key == "multi_gpu" && !s.processes && s.visible_gpus) s.processes = s.visible_gpus;
    if (key == "use_deepspeed") deepspeed = true;
    if (key == "use_fsdp") fsdp = true;
    if (is_switch(launcher, key)) {
      if (key == "m" || key == "module") {
        ++at;  // the module is the trainer
        break;
      }
      continue;
    }
    if (!has_value && at + 1 < argv.size()) {
      value = argv[++at];
      has_value = true;
    }
    if (has_value) read_launcher_option(launcher, name, value, s, deepspeed, fsdp);
  }
  (void)module;
  if (deepspeed && (!s.sharding || s.sharding == "ddp")) {
    if (!s.deepspeed_config) s.sharding = s.sharding.value_or("zero2");  // accelerate's default
  }
  if (fsdp && (!s.sharding || s.sharding == "ddp")) s.sharding = "fsdp_full";
  return at;
}

// The trainer's own words (HF Trainer and the CLIs built on it): --deepspeed, --fsdp.
void read_trainer_words(const std::vector<std::string>& argv, DistributedSetup& s) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string word = argv[i];
    std::string value;
    const size_t eq = word.find('=');
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
      word = word.substr(0, eq);
    } else if (i + 1 < argv.size() && !starts_with(argv[i + 1], "--")) {
      value = argv[i + 1];
    }
    if (word == "--deepspeed" && !value.empty()) {
      s.deepspeed_config = value;
    } else if (word == "--fsdp" && !value.empty()) {
      if (auto sharding = sharding_of_fsdp_words(value)) s.sharding = sharding;
      if (value.find("offload") != std::string::npos) s.offload_params = "cpu";
    } else if (word == "--fsdp_config" && !value.empty()) {
      s.fsdp_config = value;
    } else if ((word == "--context_parallel_size" || word == "--cp_size") && !value.empty()) {
      if (auto n = whole_number(value)) s.context_parallel = *n;
    }
  }
}

bool is_assignment(const std::string& word) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0 || starts_with(word, "-")) return false;
  return std::all_of(word.begin(), word.begin() + static_cast<long>(eq), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string base_name(const std::string& word) {
  const size_t slash = word.find_last_of('/');
  return slash == std::string::npos ? word : word.substr(slash + 1);
}

}  // namespace

bool DistributedSetup::any() const {
  return processes || sharding || offload_optimizer || offload_params || context_parallel ||
         deepspeed_config || accelerate_config || fsdp_config;
}

void fill_unset(DistributedSetup& to, const DistributedSetup& from) {
  auto fill = [](auto& a, const auto& b) {
    if (!a && b) a = b;
  };
  fill(to.processes, from.processes);
  fill(to.machines, from.machines);
  fill(to.sharding, from.sharding);
  fill(to.offload_optimizer, from.offload_optimizer);
  fill(to.offload_params, from.offload_params);
  fill(to.context_parallel, from.context_parallel);
  fill(to.mixed_precision, from.mixed_precision);
  fill(to.deepspeed_config, from.deepspeed_config);
  fill(to.accelerate_config, from.accelerate_config);
  fill(to.fsdp_config, from.fsdp_config);
  fill(to.visible_gpus, from.visible_gpus);
}

std::optional<std::string> sharding_of_fsdp_words(const std::string& words) {
  const std::string w = lower(words);
  if (w.find("hybrid_shard_zero2") != std::string::npos) return "fsdp_hybrid_zero2";
  if (w.find("hybrid_shard") != std::string::npos) return "fsdp_hybrid";
  if (w.find("shard_grad_op") != std::string::npos) return "fsdp_grad_op";
  if (w.find("full_shard") != std::string::npos) return "fsdp_full";
  if (w.find("no_shard") != std::string::npos) return "fsdp_no_shard";
  return std::nullopt;
}

LaunchedCommand read_launcher(const std::vector<std::string>& argv) {
  LaunchedCommand out;
  size_t at = 0;
  if (at < argv.size() && argv[at] == "env") ++at;
  for (; at < argv.size() && is_assignment(argv[at]); ++at) {
    const std::string& word = argv[at];
    const std::string name = word.substr(0, word.find('='));
    const std::string value = word.substr(word.find('=') + 1);
    if (name == "CUDA_VISIBLE_DEVICES" || name == "HIP_VISIBLE_DEVICES" ||
        name == "NVIDIA_VISIBLE_DEVICES") {
      out.setup.visible_gpus = device_count(value);
    }
  }
  const auto word = [&](size_t i) { return i < argv.size() ? base_name(argv[i]) : std::string(); };
  if (word(at) == "accelerate" && word(at + 1) == "launch") {
    out.launcher = "accelerate";
    at = read_launcher_words("accelerate", argv, at + 2, out.setup);
  } else if (word(at) == "torchrun") {
    out.launcher = "torchrun";
    at = read_launcher_words("torchrun", argv, at + 1, out.setup);
  } else if (word(at) == "deepspeed") {
    out.launcher = "deepspeed";
    at = read_launcher_words("deepspeed", argv, at + 1, out.setup);
  } else if (starts_with(word(at), "python") && word(at + 1) == "-m" &&
             (argv.size() > at + 2 && (argv[at + 2] == "torch.distributed.run" ||
                                       argv[at + 2] == "torch.distributed.launch"))) {
    out.launcher = "torchrun";
    at = read_launcher_words("torchrun", argv, at + 3, out.setup);
  }
  // torchrun's and deepspeed's counts are per machine; accelerate's --num_processes is the total.
  if ((out.launcher == "torchrun" || out.launcher == "deepspeed") && out.setup.processes &&
      out.setup.machines.value_or(1) > 1) {
    out.setup.processes = *out.setup.processes * *out.setup.machines;
  }
  out.trainer_argv.assign(argv.begin() + static_cast<long>(std::min(at, argv.size())), argv.end());
  read_trainer_words(out.trainer_argv, out.setup);
  // A launcher told to use every GPU it sees runs one process per visible GPU.
  if (!out.launcher.empty() && !out.setup.processes && out.setup.visible_gpus &&
      (out.setup.sharding || out.launcher != "accelerate")) {
    out.setup.processes = out.setup.visible_gpus;
  }
  return out;
}

}  // namespace oomtriage::parsers
