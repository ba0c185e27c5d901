// triage/llm_families.h
//
// The decoder LLMs the memory model knows (issue 44, "decoder LLM fine-tunes"): each family's
// shape as its config.json states it — layers, hidden width, MLP width, attention heads and
// key/value heads, head width, vocabulary, tied embeddings, experts — from which
// triage/llm_memory.h counts parameters. docs/memory-model.md ("Decoder LLMs") cites each row's
// config. Names are matched from Hugging Face ids as people write them
// ("meta-llama/Meta-Llama-3-8B", "Qwen/Qwen2.5-7B-Instruct", "unsloth/llama-3-8b-bnb-4bit").
// Pure.
#pragma once

#include <string>
#include <string_view>

namespace oomtriage::triage {

struct LlmFamily {
  std::string_view id;  // "llama-3-8b"
  int layers = 0;
  int hidden = 0;
  int intermediate = 0;  // the MLP's inner width (one expert's, for a mixture of experts)
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  // 0: hidden / heads
  int vocab = 0;
  bool tied_embeddings = false;
  int experts = 0;             // 0: a dense model
  int active_experts = 0;      // experts each token goes through
  int dense_intermediate = 0;  // a shared dense MLP beside the experts (0: none)
  // Neither a row nor a size its name states: a stand-in no verdict may rest on.
  bool guessed = false;

  int head_width() const { return head_dim > 0 ? head_dim : hidden / heads; }
};

// The row for a family id or a model name; nullptr when no row matches.
const LlmFamily* find_llm_family(std::string_view id_or_name);

// Whether a name reads as a decoder LLM's even when the table has no row for it (a size with
// "llama", "qwen", "mistral", ... in it), so a job on it is priced as an LLM and not as an image
// model.
bool looks_like_llm(std::string_view name);

// The row the model uses: the table's, else a Llama-shaped model of the size the name states
// ("acme-13b"), else a Llama-2-7B-shaped one; `assumption` says which, or stays empty.
LlmFamily llm_family_for(std::string_view id_or_name, std::string* assumption);

// Parameters the row counts (embeddings, attention, MLP or experts, norms).
double llm_parameters(const LlmFamily& family);

}  // namespace oomtriage::triage
