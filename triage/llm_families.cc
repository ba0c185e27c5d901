// triage/llm_families.cc: the rows (each model's config.json: docs/memory-model.md, "Decoder
// LLMs") and the name matching.
#include "triage/llm_families.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

namespace oomtriage::triage {
namespace {

// id, layers, hidden, intermediate, heads, kv_heads, head_dim, vocab, tied, experts, active
constexpr std::array kFamilies = {
    LlmFamily{"llama-2-7b", 32, 4096, 11008, 32, 32, 0, 32000},
    LlmFamily{"llama-2-13b", 40, 5120, 13824, 40, 40, 0, 32000},
    LlmFamily{"llama-2-70b", 80, 8192, 28672, 64, 8, 0, 32000},
    LlmFamily{"llama-3-8b", 32, 4096, 14336, 32, 8, 0, 128256},
    LlmFamily{"llama-3-70b", 80, 8192, 28672, 64, 8, 0, 128256},
    LlmFamily{"llama-3.2-1b", 16, 2048, 8192, 32, 8, 64, 128256, true},
    LlmFamily{"llama-3.2-3b", 28, 3072, 8192, 24, 8, 128, 128256, true},
    LlmFamily{"mistral-7b", 32, 4096, 14336, 32, 8, 0, 32768},
    LlmFamily{"mixtral-8x7b", 32, 4096, 14336, 32, 8, 0, 32000, false, 8, 2},
    LlmFamily{"qwen2.5-0.5b", 24, 896, 4864, 14, 2, 0, 151936, true},
    LlmFamily{"qwen2.5-1.5b", 28, 1536, 8960, 12, 2, 0, 151936, true},
    LlmFamily{"qwen2.5-3b", 36, 2048, 11008, 16, 2, 0, 151936, true},
    LlmFamily{"qwen2.5-7b", 28, 3584, 18944, 28, 4, 0, 152064},
    LlmFamily{"qwen2.5-14b", 48, 5120, 13824, 40, 8, 0, 152064},
    LlmFamily{"qwen2.5-32b", 64, 5120, 27648, 40, 8, 0, 152064},
    LlmFamily{"qwen2.5-72b", 80, 8192, 29568, 64, 8, 0, 152064},
    LlmFamily{"qwen3-0.6b", 28, 1024, 3072, 16, 8, 128, 151936, true},
    LlmFamily{"qwen3-1.7b", 28, 2048, 6144, 16, 8, 128, 151936, true},
    LlmFamily{"qwen3-4b", 36, 2560, 9728, 32, 8, 128, 151936, true},
    LlmFamily{"qwen3-8b", 36, 4096, 12288, 32, 8, 128, 151936},
    LlmFamily{"qwen3-14b", 40, 5120, 17408, 40, 8, 128, 151936},
    LlmFamily{"qwen3-32b", 64, 5120, 25600, 64, 8, 128, 151936},
    LlmFamily{"qwen3-30b-a3b", 48, 2048, 768, 32, 4, 128, 151936, false, 128, 8},
    LlmFamily{"gemma-2-2b", 26, 2304, 9216, 8, 4, 256, 256000, true},
    LlmFamily{"gemma-2-9b", 42, 3584, 14336, 16, 8, 256, 256000, true},
    LlmFamily{"gemma-2-27b", 46, 4608, 36864, 32, 16, 128, 256000, true},
    LlmFamily{"gemma-3-1b", 26, 1152, 6912, 4, 1, 256, 262144, true},
    LlmFamily{"gemma-3-4b", 34, 2560, 10240, 8, 4, 256, 262208, true},
    LlmFamily{"gemma-3-12b", 48, 3840, 15360, 16, 8, 256, 262208, true},
    LlmFamily{"gemma-3-27b", 62, 5376, 21504, 32, 16, 128, 262208, true},
    LlmFamily{"phi-3-mini", 32, 3072, 8192, 32, 32, 0, 32064},
    LlmFamily{"phi-3-medium", 40, 5120, 17920, 40, 10, 0, 32064},
    LlmFamily{"phi-4", 40, 5120, 17920, 40, 10, 0, 100352},
};

// A name in one spelling: lower case, the organisation dropped, '_' and ' ' as '-'.
std::string normalized(std::string_view name) {
  std::string s(name);
  if (const size_t slash = s.find_last_of('/'); slash != std::string::npos) s = s.substr(slash + 1);
  for (char& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '_' || c == ' ') c = '-';
  }
  return s;
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// The sizes a name states, in billions, in order: "qwen3-30b-a3b" -> 30, 3; "llama-3-8b-bnb-4bit"
// -> 8 ("4bit" is not a size).
std::vector<double> stated_sizes(const std::string& s) {
  std::vector<double> sizes;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) continue;
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '.')) {
      if (s[i - 1] != 'a') continue;  // "a3b": the active parameters of an MoE
    }
    size_t j = i;
    while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
    if (j < s.size() && s[j] == 'b' &&
        (j + 1 == s.size() || !std::isalnum(static_cast<unsigned char>(s[j + 1])))) {
      sizes.push_back(std::atof(s.substr(i, j - i).c_str()));
    }
    i = j;
  }
  return sizes;
}

std::optional<std::string> series_of(const std::string& s) {
  if (has(s, "mixtral")) return "mixtral";
  if (has(s, "mistral")) return "mistral";
  if (has(s, "llama-3.2") || has(s, "llama3.2") || has(s, "llama-3-2")) return "llama-3.2";
  if (has(s, "llama-3") || has(s, "llama3")) return "llama-3";
  if (has(s, "llama-2") || has(s, "llama2")) return "llama-2";
  if (has(s, "qwen3")) return "qwen3";
  if (has(s, "qwen2") || has(s, "qwen1.5")) return "qwen2.5";
  if (has(s, "gemma-3") || has(s, "gemma3")) return "gemma-3";
  if (has(s, "gemma-2") || has(s, "gemma2")) return "gemma-2";
  if (has(s, "phi-4") || has(s, "phi4")) return "phi-4";
  if (has(s, "phi-3") || has(s, "phi3")) return "phi-3";
  return std::nullopt;
}

const LlmFamily* by_id(std::string_view id) {
  for (const LlmFamily& f : kFamilies) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::string size_word(double billions) {
  return std::fabs(billions - std::round(billions)) < 1e-6 ? fmt::format("{:.0f}b", billions)
                                                           : fmt::format("{:g}b", billions);
}

}  // namespace

const LlmFamily* find_llm_family(std::string_view id_or_name) {
  const std::string s = normalized(id_or_name);
  if (const LlmFamily* exact = by_id(s)) return exact;
  const auto series = series_of(s);
  if (!series) return nullptr;
  const std::vector<double> sizes = stated_sizes(s);
  if (*series == "mixtral") return has(s, "8x7b") ? by_id("mixtral-8x7b") : nullptr;
  if (*series == "phi-4") return by_id("phi-4");
  if (*series == "phi-3") {
    if (has(s, "mini")) return by_id("phi-3-mini");
    if (has(s, "medium")) return by_id("phi-3-medium");
    return nullptr;
  }
  if (*series == "mistral") {
    return sizes.empty() || sizes.front() == 7 ? by_id("mistral-7b") : nullptr;
  }
  if (sizes.empty()) return nullptr;
  if (*series == "qwen3" && sizes.front() == 30) return by_id("qwen3-30b-a3b");
  // Llama 3.1 and 3.3 share Llama 3's shapes; Qwen2's sizes are Qwen2.5's.
  return by_id(fmt::format("{}-{}", *series, size_word(sizes.front())));
}

bool looks_like_llm(std::string_view name) {
  const std::string s = normalized(name);
  return series_of(s).has_value() || has(s, "llama") || has(s, "falcon") || has(s, "deepseek") ||
         has(s, "gpt-oss") || has(s, "olmo") || has(s, "smollm");
}

double llm_parameters(const LlmFamily& f) {
  const double h = f.hidden, hd = f.head_width();
  const double attention = h * f.heads * hd * 2 + h * f.kv_heads * hd * 2;
  const double experts = f.experts > 0 ? f.experts : 1;
  const double mlp = 3 * h * f.intermediate * experts + (f.experts > 0 ? h * f.experts : 0) +
                     3 * h * f.dense_intermediate;
  const double embeddings = double(f.vocab) * h * (f.tied_embeddings ? 1 : 2);
  return embeddings + f.layers * (attention + mlp + 2 * h);
}

LlmFamily llm_family_for(std::string_view id_or_name, std::string* assumption) {
  if (const LlmFamily* row = find_llm_family(id_or_name)) return *row;
  const std::string s = normalized(id_or_name);
  const std::vector<double> sizes = stated_sizes(s);
  LlmFamily shape = *by_id("llama-2-7b");
  if (!sizes.empty() && sizes.front() > 0) {
    // The Llama row nearest in size, its width scaled so the parameters match.
    const LlmFamily* nearest = by_id("llama-3-8b");
    for (const char* id :
         {"llama-3.2-1b", "llama-3.2-3b", "llama-3-8b", "llama-2-13b", "llama-3-70b"}) {
      if (std::fabs(llm_parameters(*by_id(id)) / 1e9 - sizes.front()) <
          std::fabs(llm_parameters(*nearest) / 1e9 - sizes.front())) {
        nearest = by_id(id);
      }
    }
    shape = *nearest;
    const double scale = std::sqrt(sizes.front() * 1e9 / llm_parameters(shape));
    shape.hidden = std::max(256, static_cast<int>(shape.hidden * scale / 128) * 128);
    shape.intermediate = static_cast<int>(shape.intermediate * scale);
    if (assumption != nullptr) {
      *assumption = fmt::format(
          "model '{}' not in the LLM table: a Llama-shaped {} model assumed from its name",
          id_or_name, size_word(sizes.front()));
    }
  } else {
    shape.guessed = true;
  }
  if (shape.guessed && assumption != nullptr) {
    *assumption = fmt::format(
        "model '{}' not in the LLM table and its name states no size: a 7B Llama-2-shaped model "
        "assumed; name the model (--spec model_family) for a real estimate",
        id_or_name);
  }
  shape.id = "llm-unknown";
  return shape;
}

}  // namespace oomtriage::triage
