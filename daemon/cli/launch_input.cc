// daemon/cli/launch_input.cc: files found as the trainer finds them — as written (relative to
// where the command runs), else beside the config that names them.
#include "daemon/cli/launch_input.h"

#include <fmt/format.h>

#include <filesystem>

#include "daemon/common/user_file.h"
#include "parsers/bounded_document.h"
#include "parsers/distributed_config.h"
#include "parsers/llm_config.h"
#include "triage/llm_families.h"
#include "triage/spec_from_llm.h"

namespace oomtriage::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<std::string> existing(const std::string& path, const std::string& relative_to) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  if (!relative_to.empty()) {
    const fs::path dir = fs::path(relative_to).parent_path();
    for (const fs::path& candidate : {dir / path, dir / fs::path(path).filename()}) {
      if (fs::is_regular_file(candidate, ec)) return candidate.string();
    }
  }
  return std::nullopt;
}

bool is_yaml(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".yaml" || ext == ".yml";
}

// A YAML or JSON document as JSON.
Result<json> read_document(const std::string& path) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const std::string text, read_user_file(path));
  if (is_yaml(path)) {
    OOMTRIAGE_ASSIGN_OR_RETURN(const nlohmann::ordered_json doc, parsers::yaml_to_json(text, path));
    return json::parse(doc.dump());
  }
  return parsers::parse_json(text, path);
}

bool is_llm_job(const parsers::LlmJobConfig& job) {
  if (job.reader != "transformers" && job.reader != "trl") return true;
  const std::string model = job.model.value_or("");
  return triage::find_llm_family(model) != nullptr || triage::looks_like_llm(model) ||
         model.empty();
}

CheckInput llm_input(const parsers::LlmJobConfig& job, parsers::DistributedSetup setup,
                     const std::string& config_path) {
  CheckInput input;
  fill_unset(setup, job.distributed);
  setup = with_distributed_files(std::move(setup), config_path, input.assumptions);
  parsers::LlmJobConfig read = job;
  read.distributed = setup;
  input.spec = triage::spec_from_llm(read);
  if (!job.model)
    input.assumptions.push_back(fmt::format("{}: the model is not named", job.reader));
  input.assumptions.insert(input.assumptions.end(), job.problems.begin(), job.problems.end());
  input.assumptions.insert(input.assumptions.end(), job.defaults.begin(), job.defaults.end());
  return input;
}

}  // namespace

parsers::DistributedSetup with_distributed_files(parsers::DistributedSetup setup,
                                                 const std::string& relative_to,
                                                 std::vector<std::string>& said) {
  const auto read = [&](const std::optional<std::string>& named, auto reader) {
    if (!named) return;
    const auto path = existing(*named, relative_to);
    if (!path) {
      said.push_back(fmt::format("{} not found: what it shards and offloads is not known", *named));
      return;
    }
    auto text = read_user_file(*path);
    if (!text) {
      said.push_back(text.error().message);
      return;
    }
    auto from_file = reader(*text, *path);
    if (!from_file) {
      said.push_back(from_file.error().message);
      return;
    }
    fill_unset(setup, *from_file);
  };
  read(setup.accelerate_config, parsers::read_accelerate_config);
  read(setup.deepspeed_config, parsers::read_deepspeed_config);
  if (setup.fsdp_config) {
    if (const auto path = existing(*setup.fsdp_config, relative_to)) {
      if (auto doc = read_document(*path)) {
        fill_unset(setup, parsers::fsdp_setup(nullptr, &*doc));
      }
    }
  }
  // A launcher told to use every GPU it sees runs one process per visible GPU.
  if (!setup.processes && setup.visible_gpus && setup.sharding && setup.sharding != "none") {
    setup.processes = setup.visible_gpus;
  }
  return setup;
}

Result<std::optional<CheckInput>> read_llm_config_input(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (!is_yaml(path) && ext != ".json") return std::optional<CheckInput>();
  auto doc = read_document(path);
  if (!doc) return std::optional<CheckInput>();  // the registry's reader says why
  const auto job = parsers::read_llm_config(*doc);
  if (!job || !is_llm_job(*job)) return std::optional<CheckInput>();
  return std::optional<CheckInput>(llm_input(*job, {}, path));
}

std::optional<CheckInput> read_llm_command_input(const parsers::LaunchedCommand& launched) {
  std::string config_path;
  const auto load = [&](const std::string& path) -> std::optional<json> {
    const auto found = existing(path, "");
    if (!found) return std::nullopt;
    auto doc = read_document(*found);
    if (!doc) return std::nullopt;
    config_path = *found;
    return *doc;
  };
  const auto job = parsers::read_llm_command(launched.trainer_argv, load);
  if (!job || !is_llm_job(*job)) return std::nullopt;
  return llm_input(*job, launched.setup, config_path);
}

void apply_launch(CheckInput& input, const parsers::DistributedSetup& setup) {
  const bool spreads = setup.processes.value_or(1) > 1 || setup.machines.value_or(1) > 1 ||
                       (setup.sharding && *setup.sharding != "ddp" && *setup.sharding != "none") ||
                       setup.offload_optimizer || setup.offload_params ||
                       setup.context_parallel.value_or(1) > 1;
  if (spreads && input.config) input.launch = setup;
}

}  // namespace oomtriage::daemon
