// parsers/event.cc: names of the event enums as the JSON contract spells them.
#include "parsers/event.h"

#include <string>
#include <utility>
#include <vector>

namespace oomtriage::parsers {

std::string_view to_string(OomKind kind) {
  switch (kind) {
    case OomKind::kCuda: return "cuda";
    case OomKind::kHip: return "hip";
    case OomKind::kMps: return "mps";
    case OomKind::kXpu: return "xpu";
    case OomKind::kCublas: return "cublas";
    case OomKind::kCudnn: return "cudnn";
    case OomKind::kNccl: return "nccl";
    case OomKind::kHostKilled: return "host_killed";
    case OomKind::kHostMemoryError: return "host_memoryerror";
    case OomKind::kShm: return "shm";
  }
  return "cuda";
}

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::kUnknown: return "unknown";
    case Phase::kModelLoad: return "model_load";
    case Phase::kQuantize: return "quantize";
    case Phase::kCacheLatents: return "cache_latents";
    case Phase::kCacheTextEmbeddings: return "cache_text_embeddings";
    case Phase::kTrainStep: return "train_step";
    case Phase::kSampling: return "sampling";
    case Phase::kSaving: return "saving";
  }
  return "unknown";
}

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kUnknown: return "unknown";
    case Outcome::kRunning: return "running";
    case Outcome::kCompleted: return "completed";
    case Outcome::kStopped: return "stopped";
    case Outcome::kCrashedOom: return "crashed_oom";
    case Outcome::kCrashedOther: return "crashed_other";
  }
  return "unknown";
}

std::string_view to_string(Trainer trainer) {
  switch (trainer) {
    case Trainer::kUnknown: return "unknown";
    case Trainer::kAiToolkit: return "ai-toolkit";
    case Trainer::kSdScripts: return "sd-scripts";
    case Trainer::kDiffusers: return "diffusers";
    case Trainer::kSimpleTuner: return "simpletuner";
    case Trainer::kOneTrainer: return "onetrainer";
    case Trainer::kTransformers: return "transformers";
    case Trainer::kComfyUi: return "comfyui";
  }
  return "unknown";
}

std::optional<Trainer> trainer_from_string(std::string_view name) {
  // As people write them: any case, '_' for '-', and the names the projects go by.
  std::string key;
  for (char c : name) {
    key += c == '_' ? '-' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  static constexpr std::pair<std::string_view, Trainer> kAliases[] = {
      {"auto", Trainer::kUnknown},
      {"kohya", Trainer::kSdScripts},
      {"kohya-ss", Trainer::kSdScripts},
      {"sdscripts", Trainer::kSdScripts},
      {"aitk", Trainer::kAiToolkit},
      {"aitoolkit", Trainer::kAiToolkit},
      {"ostris", Trainer::kAiToolkit},
      {"simple-tuner", Trainer::kSimpleTuner},
      {"one-trainer", Trainer::kOneTrainer},
      {"hf", Trainer::kTransformers},
      {"huggingface", Trainer::kTransformers},
      {"hf-trainer", Trainer::kTransformers},
      {"comfy", Trainer::kComfyUi}};
  for (Trainer t :
       {Trainer::kUnknown, Trainer::kAiToolkit, Trainer::kSdScripts, Trainer::kDiffusers,
        Trainer::kSimpleTuner, Trainer::kOneTrainer, Trainer::kTransformers, Trainer::kComfyUi}) {
    if (to_string(t) == key) return t;
  }
  for (const auto& [alias, trainer] : kAliases) {
    if (alias == key) return trainer;
  }
  return std::nullopt;
}

std::vector<std::string> trainer_names() {
  return {"auto",         "ai-toolkit", "sd-scripts", "diffusers", "simpletuner", "onetrainer",
          "transformers", "comfyui",    "unknown",    "kohya",     "aitk",        "hf"};
}

std::string_view to_string(EvidenceSource source) {
  switch (source) {
    case EvidenceSource::kBar: return "bar";
    case EvidenceSource::kCounter: return "counter";
    case EvidenceSource::kMarker: return "marker";
    case EvidenceSource::kFrame: return "frame";
    case EvidenceSource::kNode: return "node";
    case EvidenceSource::kEpilogue: return "epilogue";
    case EvidenceSource::kSaveName: return "save_name";
  }
  return "marker";
}

std::optional<EvidenceSource> evidence_source_from_string(std::string_view name) {
  for (EvidenceSource s : {EvidenceSource::kBar, EvidenceSource::kCounter, EvidenceSource::kMarker,
                           EvidenceSource::kFrame, EvidenceSource::kNode, EvidenceSource::kEpilogue,
                           EvidenceSource::kSaveName}) {
    if (to_string(s) == name) return s;
  }
  return std::nullopt;
}

bool MemoryFigures::has_any() const {
  return gpu_index || tried_to_allocate_bytes || total_capacity_bytes || free_bytes ||
         allocated_by_pytorch_bytes || reserved_unallocated_bytes || reserved_total_bytes ||
         this_process_in_use_bytes || !other_processes.empty();
}

void MemoryFigures::fill_from(const MemoryFigures& other) {
  auto fill = [](auto& mine, const auto& theirs) {
    if (!mine && theirs) {
      mine = theirs;
    }
  };
  fill(gpu_index, other.gpu_index);
  fill(tried_to_allocate_bytes, other.tried_to_allocate_bytes);
  fill(total_capacity_bytes, other.total_capacity_bytes);
  fill(free_bytes, other.free_bytes);
  fill(allocated_by_pytorch_bytes, other.allocated_by_pytorch_bytes);
  fill(reserved_unallocated_bytes, other.reserved_unallocated_bytes);
  fill(reserved_total_bytes, other.reserved_total_bytes);
  fill(this_process_in_use_bytes, other.this_process_in_use_bytes);
  if (other_processes.empty()) {
    other_processes = other.other_processes;
  }
}

}  // namespace oomtriage::parsers
