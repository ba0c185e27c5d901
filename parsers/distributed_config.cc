// parsers/distributed_config.cc: DeepSpeed's and accelerate's config files as a distributed
// setup. The keys are DeepSpeed's `zero_optimization` section and accelerate's `accelerate
// config` YAML (docs/memory-model.md, "Per GPU").
#include "parsers/distributed_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "parsers/bounded_document.h"

namespace oomtriage::parsers {
namespace {

using nlohmann::json;

// A number or a number written as a string; "auto" and the rest are unset.
std::optional<int> number_in(const json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_number()) return static_cast<int>(v.get<double>());
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && std::all_of(s.begin(), s.end(), ::isdigit) && s.size() < 9) {
      return std::stoi(s);
    }
  }
  return std::nullopt;
}

const json* member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::string lower(std::string word) {
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

std::optional<std::string> device_in(const json* offload) {
  if (offload == nullptr) return std::nullopt;
  const json* device = offload->is_object() ? member(*offload, "device") : offload;
  if (device == nullptr || !device->is_string()) return std::nullopt;
  const std::string d = lower(device->get<std::string>());
  if (d == "cpu" || d == "nvme") return d;
  return std::nullopt;
}

}  // namespace

DistributedSetup deepspeed_setup(const json& config) {
  DistributedSetup s;
  const json* zero = member(config, "zero_optimization");
  if (zero == nullptr) {
    s.sharding = "ddp";  // DeepSpeed without ZeRO: every GPU holds the whole job
    return s;
  }
  if (const json* stage = member(*zero, "stage")) {
    if (const auto n = number_in(*stage); n && *n >= 0 && *n <= 3) {
      s.sharding = *n == 0 ? std::string("ddp") : fmt::format("zero{}", *n);
    }
  }
  s.offload_optimizer = device_in(member(*zero, "offload_optimizer"));
  s.offload_params = device_in(member(*zero, "offload_param"));
  if (const json* sp = member(config, "sequence_parallel_size"))
    s.context_parallel = number_in(*sp);
  return s;
}

DistributedSetup fsdp_setup(const json* fsdp, const json* fsdp_config) {
  DistributedSetup s;
  if (fsdp != nullptr) {
    std::string words;
    if (fsdp->is_array()) {
      for (const json& w : *fsdp) words += " " + text_of(w);
    } else {
      words = text_of(*fsdp);
    }
    s.sharding = sharding_of_fsdp_words(words);
    if (lower(words).find("offload") != std::string::npos) s.offload_params = "cpu";
  }
  if (fsdp_config != nullptr && fsdp_config->is_object()) {
    for (const auto& [key, value] : fsdp_config->items()) {
      std::string k = key.rfind("fsdp_", 0) == 0 ? key.substr(5) : key;
      const std::string v = lower(text_of(value));
      if (k == "offload_params" && v == "true") s.offload_params = "cpu";
      if (k == "sharding_strategy") {
        if (auto sharding = sharding_of_fsdp_words(v)) {
          s.sharding = sharding;
        } else if (v == "1" || v == "2" || v == "3" || v == "4" || v == "5") {
          static const char* kByNumber[] = {"fsdp_full", "fsdp_grad_op", "fsdp_no_shard",
                                            "fsdp_hybrid", "fsdp_hybrid_zero2"};
          s.sharding = kByNumber[v[0] - '1'];
        }
      }
      if (k == "reshard_after_forward") s.sharding = v == "false" ? "fsdp_grad_op" : "fsdp_full";
      if ((k == "version" || k == "fsdp_version") && !s.sharding) s.sharding = "fsdp_full";
    }
    if (!s.sharding) s.sharding = "fsdp_full";  // FSDP's default strategy
  }
  return s;
}

Result<DistributedSetup> read_deepspeed_config(std::string_view text, std::string_view source) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const json config, parse_json(text, source));
  if (!config.is_object()) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{}: a DeepSpeed config is a JSON object", source));
  }
  return deepspeed_setup(config);
}

Result<DistributedSetup> read_accelerate_config(std::string_view text, std::string_view source) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const nlohmann::ordered_json doc, yaml_to_json(text, source));
  const json config = json::parse(doc.dump());
  if (!config.is_object()) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{}: an accelerate config is a mapping", source));
  }
  DistributedSetup s;
  if (const json* n = member(config, "num_processes")) s.processes = number_in(*n);
  if (const json* n = member(config, "num_machines")) s.machines = number_in(*n);
  if (const json* mp = member(config, "mixed_precision")) s.mixed_precision = lower(text_of(*mp));
  const std::string type =
      member(config, "distributed_type") ? lower(text_of(config["distributed_type"])) : "";
  if (type == "deepspeed") {
    const json* ds = member(config, "deepspeed_config");
    if (ds != nullptr && ds->is_object()) {
      if (const json* file = member(*ds, "deepspeed_config_file")) {
        s.deepspeed_config = text_of(*file);
      }
      if (const json* stage = member(*ds, "zero_stage")) {
        if (const auto n = number_in(*stage); n && *n >= 0 && *n <= 3) {
          s.sharding = *n == 0 ? std::string("ddp") : fmt::format("zero{}", *n);
        }
      }
      const auto device = [&](const char* key) -> std::optional<std::string> {
        const json* d = member(*ds, key);
        if (d == nullptr) return std::nullopt;
        const std::string v = lower(text_of(*d));
        if (v == "cpu" || v == "nvme") return v;
        return std::nullopt;
      };
      s.offload_optimizer = device("offload_optimizer_device");
      s.offload_params = device("offload_param_device");
    }
    if (!s.sharding && !s.deepspeed_config) s.sharding = "zero2";
  } else if (type == "fsdp") {
    const DistributedSetup f = fsdp_setup(nullptr, member(config, "fsdp_config"));
    s.sharding = f.sharding.value_or("fsdp_full");
    s.offload_params = f.offload_params;
  } else if (type == "multi_gpu") {
    s.sharding = "ddp";
  } else if (type == "no" || type == "none") {
    if (!s.processes) s.processes = 1;
  }
  if (const json* pc = member(config, "parallelism_config")) {
    if (const json* cp = member(*pc, "parallelism_config_cp_size")) {
      s.context_parallel = number_in(*cp);
    }
  }
  return s;
}

}  // namespace oomtriage::parsers
