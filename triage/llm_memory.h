// triage/llm_memory.h
//
// The memory model of a decoder LLM's fine-tune (issue 44): from a spec whose family is an LLM
// (triage/llm_families.h), the peak of loading, a training step and saving, as named terms —
// the base weights by precision (bf16, 8-bit, 4-bit NF4), LoRA adapters (rank x target modules),
// gradients, optimizer states and fp32 master weights, activations from sequence length x micro
// batch with and without gradient checkpointing (offloaded checkpoints too), the logits over the
// vocabulary, and what one GPU holds under DDP, ZeRO and FSDP (triage/parallel_memory.h). No VAE,
// no text encoder, no previews. docs/memory-model.md, "Decoder LLMs", gives the formulas and
// the measurements they were checked on. Pure.
#pragma once

#include "triage/memory_model.h"
#include "triage/memory_spec.h"

namespace oomtriage::triage {

// Whether the spec is priced as a decoder LLM: its family is in the LLM table or reads as an
// LLM's name, or it states a sequence length and no image family.
bool is_llm_spec(const MemorySpec& spec);

MemoryEstimate estimate_llm_memory(const MemorySpec& spec);

}  // namespace oomtriage::triage
