// parsers/stage_lexicon.cc: the tokenizer and the ordered stage rules. Each rule is a regex over
// the token string (lower-case words separated by one space), so "\bload" never matches inside
// "dataloader" or "unloading".
#include "parsers/stage_lexicon.h"

#include <re2/re2.h>

#include <memory>
#include <vector>

namespace oomtriage::parsers {
namespace {

bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_lower(c) || is_upper(c) || is_digit(c); }

struct StageRule {
  Phase phase;
  const char* regex;
  bool lone_word = false;
};

// Ordered: the first rule that matches a text names its stage. Compound phrases come before
// the single words they contain ("encode prompt" before "prompt", "latent dist" before "sample",
// "predict noise" is a training step although "prediction" is evaluation).
constexpr StageRule kRules[] = {
    {Phase::kQuantize,
     R"(\bquantiz\w*|\bquanto\b|\bcalibrat\w*|\bgptq\w*|\bawq\b|\bqtype\b|\bllmcompressor\b)"
     R"(|\bsmoothquant\b|\bhqq\b|\boneshot\b)"},
    {Phase::kCacheTextEmbeddings,
     R"(\b(?:text|prompt|prompts|te|caption|captions)\s(?:embed\w*|encoder outputs?|encodings?|conds?|features|hidden states)\b)"
     R"(|\bencod\w*\s(?:\w+\s){0,2}(?:prompts?|text|captions?|tokens?)\b|\bclip text encode\b)"
     R"(|\b(?:text|prompts?|captions?)\s(?:encode|encoding)\b)"
     R"(|\bcach\w*\s(?:\w+\s){0,2}(?:outputs?|embeds?|embeddings?|conds?)\b)"
     R"(|\bcach\w*\s(?:the\s)?(?:text|te|prompts?|captions?)\b)"
     R"(|\b(?:t5|clip|umt5|llm|qwen|gemma|llama)\s(?:encod\w*|embed\w*)\b)"},
    {Phase::kCacheLatents,
     R"(\blatents?\s(?:\w+\s){0,2}cach\w*|\bcach\w*\s(?:\w+\s){0,2}(?:latents?|images?|vae|videos?)\b)"
     R"(|\bvae encod\w*|\bencod\w*\s(?:the\s)?(?:images?|latents?|videos?|frames?)\b|\blatent dist\b)"
     R"(|\bprecomput\w*\s(?:the\s)?latents?\b|\bencod\w* vae\b|\b(?:vae|autoencoders?)\b.*\bencod\w*)"},
    {Phase::kSaving,
     R"(\bsav(?:e|es|ing)\s(?:the\s)?(?:\w+\s){0,2}(?:checkpoints?|models?|state|states|weights|loras?|pipeline|safetensors|ckpt|file|pretrained|network|at step|step)\b)"
     R"(|^save$|\bsav(?:e|ing)$|\bserializ\w*|\bwrit\w*\s(?:the\s)?(?:checkpoint|model|weights|safetensors|lora)\b)"
     R"(|\bexport\w*\s(?:the\s)?(?:model|lora|checkpoint|weights)\b)"},
    {Phase::kModelLoad,
     R"(\bload(?:s|ing|ed)?\s(?:the\s)?(?:\w+\s){0,3}(?:model|models|state dict|checkpoint|checkpoints|ckpt|weights|lora|pipeline|pipe|transformer|transformers|unet|vae|text encoders?|t5|clip|safetensors|pretrained|shards|dit|encoder|tokenizer|diffusion|base|file)\b)"
     R"(|\bloaders?\b|\bfrom pretrained\b|\bcheckpoint shards\b|\bfetching\b|\bdownload\w*)"
     R"(|\bmaterializ\w*|\binit empty weights\b|\bmov\w*\s(?:the\s)?(?:\w+\s){0,2}to\s(?:gpu|cuda|device)\b)"
     R"(|\binit\w*\s(?:\w+\s){0,3}training\b|\bload model\b|\bset module tensor to device\b)"
     R"(|\benable (?:model|sequential) cpu offload\b|\baccelerator prepare\b|\bprepare model\b)"
     R"(|\bdispatch model\b)"},
    // Batches that are encoded, cached or saved are no training batches: musubi-tuner's latent
    // and text-encoder caching scripts both call encode_and_save_batch(). Says nothing.
    {Phase::kUnknown, R"(\b(?:encod|cach|sav|precomput)\w*\s(?:\w+\s){0,2}batch(?:es)?\b)"},
    {Phase::kSampling,
     R"(\bsampl(?:e|es|ing|er|ers)\b|\bk\s?sampler\w*|\bgenerat\w*\s(?:\w+\s){0,2}(?:images?|samples?|previews?|videos?)\b)"
     R"(|\bpreviews?\b|\bvalidat\w*|\bvalid\b|\bpredicting\b|\beval\w*|\binference\b|\binfer\b|\bdenois\w*|\bdecod\w*)"
     R"(|\bprediction\w*|\bpredict step\b|\bpipelines\b|\bsanity check\w*|\bestimate loss\b)"
     // An LLM's generate() (evaluation, or a GRPO/PPO rollout inside a training step).
     R"(|\bgenerate\b|\brollouts?\b)"
     R"(|\brender\w*\s(?:\w+\s){0,2}(?:prompts?|previews?|samples?|grids?|images?)\b)"},
    {Phase::kTrainStep,
     R"(\bbackward\b|\boptimi[sz]er\s(?:\w+\s)?step\b|\btrain(?:ing)?\s(?:step|steps|loop|batch|epoch)\b)"
     R"(|\btraining\b|\baccumulat\w*|\bcompute loss\b|\bhook train loop\b|\bpredict noise\b)"
     R"(|\bsteps?\b|\bepochs?\b|\biter(?:ation)?s?\b|\btrain\b|\bloss\b|\bgrad(?:ient)?s?\b|\bbatch(?:es)?\b)"},
    // A word alone, when nothing above spoke: "stage 'latents' failed".
    {Phase::kCacheLatents, R"(\blatents?\b)", true},
};

struct CompiledRule {
  Phase phase;
  std::unique_ptr<RE2> regex;
  bool lone_word;
};

const std::vector<CompiledRule>& compiled_rules() {
  static const std::vector<CompiledRule> kCompiled = [] {
    RE2::Options options;
    options.set_log_errors(false);
    std::vector<CompiledRule> compiled;
    for (const StageRule& rule : kRules) {
      compiled.push_back({rule.phase, std::make_unique<RE2>(rule.regex, options), rule.lone_word});
    }
    return compiled;
  }();
  return kCompiled;
}

}  // namespace

std::string stage_tokens(std::string_view text) {
  constexpr size_t kMaxBytes = 512;
  if (text.size() > kMaxBytes) text = text.substr(0, kMaxBytes);
  std::string out;
  out.reserve(text.size() + 8);
  auto space = [&out] {
    if (!out.empty() && out.back() != ' ') out.push_back(' ');
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!is_alnum(c)) {
      space();
      continue;
    }
    if (i > 0 && is_upper(c)) {
      const char prev = text[i - 1];
      const bool next_lower = i + 1 < text.size() && is_lower(text[i + 1]);
      // "trainLoop" | "VAEDecode": a capital starts a word after a lower-case letter, or
      // after a run of capitals when a lower-case letter follows it.
      if (is_lower(prev) || (is_upper(prev) && next_lower)) space();
    }
    out.push_back(is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  for (size_t at = out.find("data loader"); at != std::string::npos;
       at = out.find("data loader", at)) {
    out.erase(at + 4, 1);
  }
  return out;
}

Phase stage_of(std::string_view text, bool lone_words) {
  const std::string tokens = stage_tokens(text);
  if (tokens.empty()) return Phase::kUnknown;
  for (const CompiledRule& rule : compiled_rules()) {
    if (rule.lone_word && !lone_words) continue;
    if (RE2::PartialMatch(tokens, *rule.regex)) return rule.phase;
  }
  return Phase::kUnknown;
}

Result<Ok> stage_lexicon_ok() {
  for (const CompiledRule& rule : compiled_rules()) {
    if (!rule.regex->ok()) {
      return make_error(ErrorCode::kBadInput, "stage lexicon rule /" + rule.regex->pattern() +
                                                  "/: " + rule.regex->error());
    }
  }
  return Ok{};
}

}  // namespace oomtriage::parsers
