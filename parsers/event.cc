// parsers/event.cc: names of the event enums as the JSON contract spells them.
#include "parsers/event.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "parsers/trainer_table.h"

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

std::string_view to_string(Trainer trainer) { return trainer_row(trainer).name; }

std::optional<Trainer> trainer_from_string(std::string_view name) {
  // As people write them: any case, '_' for '-', and the names the projects go by.
  std::string key;
  for (char c : name) {
    key += c == '_' ? '-' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  for (const TrainerRow& row : trainer_table()) {
    if (row.name == key || row.short_name == key ||
        std::find(row.aliases.begin(), row.aliases.end(), key) != row.aliases.end()) {
      return row.trainer;
    }
  }
  return std::nullopt;
}

std::vector<std::string> trainer_names() {
  // "auto" first (what --trainer says by default), "unknown" after the trainers' names.
  std::vector<std::string> names = {"auto"};
  for (const TrainerRow& row : trainer_table()) {
    if (row.trainer != Trainer::kUnknown) names.emplace_back(row.name);
  }
  names.emplace_back(to_string(Trainer::kUnknown));
  for (const TrainerRow& row : trainer_table()) {
    if (!row.short_name.empty()) names.emplace_back(row.short_name);
  }
  return names;
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
