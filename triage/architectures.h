// triage/architectures.h
//
// What the memory model (triage/memory_model.h) needs to know of each model family: parameter
// counts of the denoiser, the text encoders and the VAE (public model cards), the transformer's
// width and depth, how many pixels (and frames) one token covers, the text tokens that join the
// image tokens in attention, and what its previews run. Family ids are those of
// docs/memory-model.md ("flux1-dev", "sdxl", "wan21-t2v-14b", ...); names such as
// "black-forest-labs/FLUX.1-dev" and ids with a size ("ltx-video-13b") are matched too. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oomtriage::triage {

enum class DenoiserKind { kTransformer, kUnet };

struct Architecture {
  std::string_view id;
  DenoiserKind kind = DenoiserKind::kTransformer;
  double denoiser_billions = 0;
  double text_encoder_billions = 0;  // all text (and image-prompt) encoders together
  double vae_billions = 0.08;
  int hidden = 3072;             // the transformer's width (UNets: an equivalent width)
  int mlp_width = 0;             // the MLP's inner width (a gated MLP's both halves); 0: 4 x hidden
  int blocks = 0;                // transformer blocks (UNets: an equivalent), as swapping counts
  int double_blocks = 0;         // of which double-stream (separate weights for image and text)
  int pixels_per_token = 16;     // VAE downscale x patch size, per side
  int frames_per_token = 0;      // the video VAE's temporal downscale; 0 for image models
  int text_tokens = 0;           // text tokens in joint attention (0: cross-attention)
  int image_streams = 1;         // 2 when a reference image's tokens join (edit models)
  bool previews_use_cfg = true;  // two denoiser passes per preview step
  int default_resolution = 1024;
  int default_frames = 1;
  // The family's activations relative to the common coefficient (docs/memory-model.md: fitted
  // where measurements exist, 1 elsewhere).
  double activation_scale = 1.0;
  // Not a row of the table nor a size its id states: a FLUX-sized stand-in, which the verdict
  // must not rest on (the estimate's model_unknown says why).
  bool guessed = false;
};

// The table's family ids, in its order (for "did you mean").
std::vector<std::string_view> architecture_ids();

// The row for a family id or model name; nullptr when nothing matches.
const Architecture* find_architecture(std::string_view family_or_name);

// The row the model uses for a family id or name: the table's row, resized when the id states
// another size than the row's ("sana-4.8b": the Sana row scaled to 4.8B parameters); for a family
// the table does not know, a transformer of the size its id states ("foo-14b"), else FLUX-sized.
// `assumption` says what was assumed, or stays empty.
Architecture architecture_for(std::string_view family_or_name, std::string* assumption);

}  // namespace oomtriage::triage
