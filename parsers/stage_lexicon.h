// parsers/stage_lexicon.h
//
// One vocabulary of training stages, shared by every source of phase evidence: marker lines of
// any trainer ("Caching latents", "Running validation..."), progress-bar descriptions ("Generating
// Images", "validation steps"), traceback frames (function, module path, source line), UI node
// types ("CheckpointLoaderSimple", "KSampler", "VAEDecode", "FluxTrainLoop") and the failure lines
// printed after an error ("stage 'latents' failed"). Text is tokenised first (lower case, camelCase
// and snake_case split, punctuation dropped), so the rules read as words and hold for trainers
// nobody wrote rules for. The rules, with the texts each must classify, are in stage_lexicon.cc and
// tests/parsers/stage_lexicon_test.cc.
#pragma once

#include <string>
#include <string_view>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

// "CheckpointLoaderSimple" -> "checkpoint loader simple", "cache_text_encoder_outputs" -> "cache
// text encoder outputs", "Epoch 1/10 Steps:" -> "epoch 1 10 steps". "DataLoader" stays one word
// ("dataloader"): a data loader is no model load.
std::string stage_tokens(std::string_view text);

// The stage a text names, by the lexicon's ordered rules (the first that matches wins; the more
// specific rules come first: "latent_dist.sample" is latent caching, not sampling). `lone_words`
// false leaves out the last rules, single words that only a short stage name can be read by
// ("latents"), for texts full of incidental words (module paths).
Phase stage_of(std::string_view text, bool lone_words = true);

// Whether every rule of the lexicon compiled; names the first bad one in `error`.
Result<Ok> stage_lexicon_ok();

}  // namespace oomtriage::parsers
