// triage/config_edits.cc: each neutral path the planner writes, set on the typed view.
#include "triage/config_edits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace oomtriage::triage {
namespace {

using nlohmann::json;

// "datasets[2].resolution" -> index 2, field "resolution"; false for other paths.
bool dataset_field(std::string_view path, size_t& index, std::string_view& field) {
  constexpr std::string_view kPrefix = "datasets[";
  if (path.rfind(kPrefix, 0) != 0) return false;
  const size_t close = path.find("].", kPrefix.size());
  if (close == std::string_view::npos) return false;
  index = std::strtoul(std::string(path.substr(kPrefix.size(), close - kPrefix.size())).c_str(),
                       nullptr, 10);
  field = path.substr(close + 2);
  return true;
}

template <class T>
void set(T& out, const json& value) {
  if constexpr (std::is_same_v<T, bool>) {
    if (value.is_boolean()) out = value.get<bool>();
  } else if constexpr (std::is_same_v<T, int>) {
    if (value.is_number()) out = static_cast<int>(value.get<double>());
  } else if constexpr (std::is_same_v<T, double>) {
    if (value.is_number()) out = value.get<double>();
  } else {
    if (value.is_string()) out = value.get<std::string>();
  }
}

void edit_dataset(parsers::DatasetView& d, std::string_view field, const json& value) {
  if (field == "batch_size") {
    if (value.is_number()) d.batch_size = static_cast<int>(value.get<double>());
  } else if (field == "resolution") {
    d.resolutions.clear();
    if (value.is_number()) d.resolutions.push_back(static_cast<int>(value.get<double>()));
    if (value.is_array()) {
      for (const json& r : value) {
        if (r.is_number()) d.resolutions.push_back(static_cast<int>(r.get<double>()));
      }
    }
    std::sort(d.resolutions.begin(), d.resolutions.end());
  } else if (field == "num_frames") {
    set(d.num_frames, value);
  } else if (field == "cache_latents_to_disk") {
    set(d.cache_latents_to_disk, value);
  } else if (field == "num_workers") {
    set(d.num_workers, value);
  }
}

void edit(parsers::JobConfig& c, std::string_view path, const json& value) {
  size_t index = 0;
  std::string_view field;
  if (dataset_field(path, index, field)) {
    if (index < c.datasets.size()) edit_dataset(c.datasets[index], field, value);
    return;
  }
  if (path == "train.gradient_checkpointing") return set(c.gradient_checkpointing, value);
  if (path == "train.batch_size") return set(c.batch_size, value);
  if (path == "train." + c.gradient_accumulation_key) return set(c.gradient_accumulation, value);
  if (path == "train.dtype") return set(c.dtype, value);
  if (path == "train.optimizer") return set(c.optimizer, value);
  if (path == "train.disable_sampling") return set(c.disable_sampling, value);
  if (path == "train.skip_first_sample") return set(c.skip_first_sample, value);
  if (path == "train.cache_text_embeddings") return set(c.cache_text_embeddings, value);
  if (path == "model.low_vram") return set(c.low_vram, value);
  if (path == "model.quantize") return set(c.quantize, value);
  if (path == "model.qtype") return set(c.qtype, value);
  if (path == "model.quantize_te") return set(c.quantize_te, value);
  if (path == "model.layer_offloading") return set(c.layer_offloading, value);
  if (path == "sample.width") {
    set(c.sample.width, value);
    c.sample.max_width = c.sample.width;
  } else if (path == "sample.height") {
    set(c.sample.height, value);
    c.sample.max_height = c.sample.height;
  } else if (path == "sample.sample_steps") {
    set(c.sample.steps, value);
    c.sample.max_steps = c.sample.steps;
  } else if (path == "sample.num_frames") {
    set(c.sample.num_frames, value);
    c.sample.max_frames = c.sample.num_frames;
  } else if (path == "sample.batch_size") {
    set(c.sample.batch_size, value);
  } else if (path == "sample.sample_every") {
    set(c.sample.every, value);
  }
}

}  // namespace

parsers::JobConfig with_changes(parsers::JobConfig config,
                                const std::vector<ConfigChange>& changes) {
  for (const ConfigChange& change : changes) {
    if (!change.neutral) continue;  // already in a trainer's syntax: not this vocabulary
    edit(config, change.path, change.to);
  }
  return config;
}

}  // namespace oomtriage::triage
