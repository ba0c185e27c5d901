// triage/architectures.cc: the architecture table (parameter counts and shapes from the models'
// public model cards and configs; docs/memory-model.md lists them) and the name matching.
#include "triage/architectures.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace oomtriage::triage {
namespace {

constexpr DenoiserKind kUnet = DenoiserKind::kUnet;
constexpr DenoiserKind kDit = DenoiserKind::kTransformer;

const std::array kArchitectures = {
    //            id, kind, denoiser B, text encoders B, VAE B, hidden, MLP width (0: 4 x hidden),
    //            blocks, double blocks,
    //            px/token, frames/token, joint text tokens, image streams, CFG previews,
    //            default resolution, default frames, activation scale
    Architecture{"flux1-dev", kDit, 11.9, 4.9, 0.08, 3072, 0, 57, 19, 16, 0, 512, 1, false},
    Architecture{"flux1-kontext", kDit, 11.9, 4.9, 0.08, 3072, 0, 57, 19, 16, 0, 512, 2, false},
    Architecture{"flux1-schnell", kDit, 11.9, 4.9, 0.08, 3072, 0, 57, 19, 16, 0, 256, 1, false},
    Architecture{"flex1", kDit, 8.2, 4.9, 0.08, 3072, 0, 46, 8, 16, 0, 512, 1, false},
    Architecture{"flex2", kDit, 8.2, 4.9, 0.08, 3072, 0, 46, 8, 16, 0, 512, 2, false},
    Architecture{"chroma", kDit, 8.9, 4.8, 0.08, 3072, 0, 57, 19, 16, 0, 512, 1, true, 1024, 1,
                 0.3},
    Architecture{"flux2-klein-4b", kDit, 4.0, 4.0, 0.08, 3072, 0, 25, 5, 16, 0, 512, 1, false},
    Architecture{"flux2-klein-9b", kDit, 9.0, 8.2, 0.08, 4096, 0, 32, 8, 16, 0, 512, 1, false},
    Architecture{"flux2-dev", kDit, 32.0, 24.0, 0.08, 6144, 0, 56, 8, 16, 0, 512, 1, false},
    Architecture{"qwen-image-edit", kDit, 20.4, 8.3, 0.13, 3072, 0, 60, 60, 16, 0, 256, 2, true,
                 1024, 1, 1.45},
    Architecture{"qwen-image", kDit, 20.4, 8.3, 0.13, 3072, 0, 60, 60, 16, 0, 256, 1, true, 1024, 1,
                 1.45},
    Architecture{"z-image", kDit, 6.15, 4.0, 0.08, 3840, 10240, 34, 0, 16, 0, 256, 1, false, 1024,
                 1, 0.5},
    Architecture{"hidream", kDit, 17.0, 13.5, 0.08, 2560, 0, 48, 16, 16, 0, 256, 1, true},
    Architecture{"sd35-large", kDit, 8.1, 5.5, 0.08, 2432, 0, 38, 38, 16, 0, 333, 1, true},
    Architecture{"sd35-medium", kDit, 2.5, 5.5, 0.08, 1536, 0, 24, 24, 16, 0, 333, 1, true},
    Architecture{"auraflow", kDit, 6.8, 1.2, 0.08, 3072, 0, 36, 4, 16, 0, 256, 1, true},
    Architecture{"pixart-sigma", kDit, 0.6, 4.7, 0.08, 1152, 0, 28, 0, 16, 0, 0, 1, true},
    Architecture{"sana", kDit, 1.6, 2.6, 0.3, 2240, 11200, 20, 0, 32, 0, 0, 1, true, 1024, 1, 2.5},
    Architecture{"lumina2", kDit, 2.6, 2.6, 0.08, 2304, 0, 28, 0, 16, 0, 256, 1, true},
    Architecture{"cosmos2-image", kDit, 2.0, 4.7, 0.13, 2048, 0, 28, 0, 16, 0, 0, 1, true, 1024, 1,
                 1.8},
    Architecture{"stable-cascade", kDit, 3.6, 0.7, 0.1, 2048, 0, 24, 0, 42, 0, 0, 1, true},
    Architecture{"hunyuan-image-2.1", kDit, 17.0, 8.5, 0.4, 3584, 0, 60, 20, 32, 0, 256, 1, true,
                 2048},
    Architecture{"kolors", kUnet, 2.6, 6.2, 0.08, 640, 0, 70, 0, 8, 0, 0, 1, true, 1024, 1, 0.3},
    Architecture{"sdxl", kUnet, 2.57, 0.82, 0.08, 640, 0, 70, 0, 8, 0, 0, 1, true, 1024, 1, 0.3},
    Architecture{"sd2", kUnet, 0.87, 0.35, 0.08, 320, 0, 16, 0, 8, 0, 0, 1, true, 768, 1, 3},
    Architecture{"sd15", kUnet, 0.86, 0.12, 0.08, 320, 0, 16, 0, 8, 0, 0, 1, true, 512, 1, 3},
    Architecture{"deepfloyd-if", kUnet, 4.3, 4.7, 0.0, 1280, 0, 40, 0, 1, 0, 0, 1, true, 64},
    Architecture{"wan21-t2v-1.3b", kDit, 1.3, 5.7, 0.13, 1536, 8960, 30, 0, 16, 4, 0, 1, true, 832,
                 81},
    Architecture{"wan21-i2v-14b", kDit, 14.0, 6.3, 0.13, 5120, 13824, 40, 0, 16, 4, 0, 1, true, 832,
                 81},
    Architecture{"wan21-t2v-14b", kDit, 14.0, 5.7, 0.13, 5120, 13824, 40, 0, 16, 4, 0, 1, true, 832,
                 81},
    Architecture{"wan22-ti2v-5b", kDit, 5.0, 5.7, 0.7, 3072, 14336, 30, 0, 32, 4, 0, 1, true, 1280,
                 121},
    Architecture{"wan22-14b", kDit, 14.0, 5.7, 0.13, 5120, 13824, 40, 0, 16, 4, 0, 1, true, 832,
                 81},
    Architecture{"ltx2", kDit, 19.0, 12.0, 0.5, 4096, 0, 48, 0, 32, 8, 0, 1, true, 1280, 121, 0.85},
    Architecture{"ltx-video-13b", kDit, 13.0, 4.7, 0.4, 4096, 0, 48, 0, 32, 8, 0, 1, true, 768, 121,
                 0.85},
    Architecture{"ltx-video", kDit, 1.9, 4.7, 0.4, 2048, 0, 28, 0, 32, 8, 0, 1, true, 768, 121,
                 0.85},
    Architecture{"hunyuan-video-1.5", kDit, 8.3, 8.5, 0.5, 2048, 0, 54, 0, 16, 4, 256, 1, true, 848,
                 121},
    Architecture{"hunyuan-video", kDit, 13.0, 8.1, 0.25, 3072, 0, 60, 20, 16, 4, 256, 1, false, 848,
                 129},
    Architecture{"cogvideox-2b", kDit, 1.7, 4.7, 0.2, 1920, 0, 30, 0, 16, 4, 226, 1, true, 720, 49,
                 1.05},
    Architecture{"cogvideox", kDit, 5.6, 4.7, 0.2, 3072, 0, 42, 0, 16, 4, 226, 1, true, 720, 49,
                 1.05},
    Architecture{"mochi", kDit, 10.0, 4.7, 0.4, 3072, 0, 48, 48, 16, 6, 256, 1, true, 848, 163},
};

// Names as people and trainers write them, normalized (lowercase letters and digits only), the
// more specific first: the first pattern found in the normalized name wins.
struct NamePattern {
  std::string_view pattern;
  std::string_view id;
};
const std::array kNamePatterns = {
    NamePattern{"kontext", "flux1-kontext"},
    NamePattern{"schnell", "flux1-schnell"},
    NamePattern{"flex2", "flex2"},
    NamePattern{"flex1", "flex1"},
    NamePattern{"chroma", "chroma"},
    NamePattern{"klein9b", "flux2-klein-9b"},
    NamePattern{"klein4b", "flux2-klein-4b"},
    // A family named without its size: the larger of its sizes (the costlier reading).
    NamePattern{"klein", "flux2-klein-9b"},
    NamePattern{"flux2", "flux2-dev"},
    NamePattern{"flux", "flux1-dev"},
    NamePattern{"qwenimageedit", "qwen-image-edit"},
    NamePattern{"qwenimage", "qwen-image"},
    NamePattern{"zimage", "z-image"},
    NamePattern{"hidream", "hidream"},
    NamePattern{"sd35large", "sd35-large"},
    NamePattern{"stablediffusion35large", "sd35-large"},
    NamePattern{"sd35", "sd35-medium"},
    NamePattern{"stablediffusion35", "sd35-medium"},
    NamePattern{"stablediffusion3", "sd35-medium"},
    NamePattern{"sd3", "sd35-medium"},
    NamePattern{"auraflow", "auraflow"},
    NamePattern{"pixart", "pixart-sigma"},
    NamePattern{"sana", "sana"},
    NamePattern{"lumina", "lumina2"},
    NamePattern{"cosmos", "cosmos2-image"},
    NamePattern{"cascade", "stable-cascade"},
    NamePattern{"wuerstchen", "stable-cascade"},
    NamePattern{"hunyuanimage", "hunyuan-image-2.1"},
    NamePattern{"kolors", "kolors"},
    NamePattern{"sdxl", "sdxl"},
    NamePattern{"ponyxl", "sdxl"},
    NamePattern{"illustrious", "sdxl"},
    NamePattern{"sd2", "sd2"},
    NamePattern{"stablediffusion2", "sd2"},
    NamePattern{"sd15", "sd15"},
    NamePattern{"sd14", "sd15"},
    NamePattern{"sd1", "sd15"},
    NamePattern{"stablediffusionv1", "sd15"},
    NamePattern{"deepfloyd", "deepfloyd-if"},
    NamePattern{"ifixl", "deepfloyd-if"},
    NamePattern{"ifil", "deepfloyd-if"},
    NamePattern{"ifim", "deepfloyd-if"},
    NamePattern{"wan21t2v13b", "wan21-t2v-1.3b"},
    NamePattern{"wan2113b", "wan21-t2v-1.3b"},
    NamePattern{"wan211b", "wan21-t2v-1.3b"},
    NamePattern{"wan13b", "wan21-t2v-1.3b"},
    NamePattern{"wan21i2v", "wan21-i2v-14b"},
    NamePattern{"wan21", "wan21-t2v-14b"},
    NamePattern{"ti2v5b", "wan22-ti2v-5b"},
    NamePattern{"wan225b", "wan22-ti2v-5b"},
    NamePattern{"wan22", "wan22-14b"},
    NamePattern{"wan", "wan21-t2v-14b"},
    NamePattern{"ltx2", "ltx2"},
    NamePattern{"ltxv13b", "ltx-video-13b"},
    NamePattern{"ltxvideo13b", "ltx-video-13b"},
    NamePattern{"ltx", "ltx-video"},
    NamePattern{"hunyuanvideo15", "hunyuan-video-1.5"},
    NamePattern{"hunyuanvideo", "hunyuan-video"},
    NamePattern{"hunyuan", "hunyuan-video"},
    NamePattern{"cogvideox2b", "cogvideox-2b"},
    NamePattern{"cogvideo", "cogvideox"},
    NamePattern{"mochi", "mochi"},
    NamePattern{"xl", "sdxl"},
};

std::string normalized(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// "14b" -> 14, "1.3b" -> 1.3, in an id or name; 0 when none is stated.
double stated_billions(std::string_view name) {
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != 'b' && name[i] != 'B') continue;
    if (i + 1 < name.size() && std::isalnum(static_cast<unsigned char>(name[i + 1]))) continue;
    size_t start = i;
    while (start > 0 &&
           (std::isdigit(static_cast<unsigned char>(name[start - 1])) || name[start - 1] == '.')) {
      --start;
    }
    if (start == i) continue;
    const double value = std::strtod(std::string(name.substr(start, i - start)).c_str(), nullptr);
    if (value > 0 && value < 1000) return value;
  }
  return 0;
}

}  // namespace

std::vector<std::string_view> architecture_ids() {
  std::vector<std::string_view> ids;
  for (const Architecture& a : kArchitectures) ids.push_back(a.id);
  return ids;
}

const Architecture* find_architecture(std::string_view family_or_name) {
  for (const Architecture& a : kArchitectures) {
    if (a.id == family_or_name) return &a;
  }
  const std::string name = normalized(family_or_name);
  if (name.empty()) return nullptr;
  for (const Architecture& a : kArchitectures) {
    if (normalized(a.id) == name) return &a;
  }
  for (const NamePattern& p : kNamePatterns) {
    if (name.find(p.pattern) == std::string::npos) continue;
    for (const Architecture& a : kArchitectures) {
      if (a.id == p.id) return &a;
    }
  }
  return nullptr;
}

Architecture architecture_for(std::string_view family_or_name, std::string* assumption) {
  const double billions = stated_billions(family_or_name);
  if (const Architecture* row = find_architecture(family_or_name)) {
    Architecture a = *row;
    const double ratio = billions / a.denoiser_billions;
    if (billions > 0 && (ratio > 1.3 || ratio < 1 / 1.3)) {
      // Wider at the same depth: parameters grow with the square of the width.
      a.denoiser_billions = billions;
      a.hidden = static_cast<int>(a.hidden * std::sqrt(ratio));
      if (a.mlp_width > 0) a.mlp_width = static_cast<int>(a.mlp_width * std::sqrt(ratio));
      if (assumption != nullptr) {
        *assumption = fmt::format("'{}' read as the {} architecture at {:g}B parameters",
                                  family_or_name, a.id, billions);
      }
    }
    return a;
  }
  Architecture guess = *find_architecture("flux1-dev");
  guess.id = "unknown";
  guess.guessed = billions <= 0;
  if (billions > 0) {
    // A transformer of that size, blocks of 12 x hidden^2 parameters, 40 of them.
    guess.denoiser_billions = billions;
    guess.blocks = 40;
    guess.double_blocks = 0;
    guess.hidden = static_cast<int>(std::sqrt(billions * 1e9 / (12.0 * 40)));
    guess.text_tokens = 256;
    if (assumption != nullptr) {
      *assumption = fmt::format(
          "model family '{}' is not in the architecture table: read as a {:g}B transformer",
          family_or_name, billions);
    }
  } else if (assumption != nullptr) {
    *assumption = fmt::format(
        "model family '{}' is not in the architecture table: read as a FLUX.1-sized (12B) "
        "transformer",
        family_or_name);
  }
  return guess;
}

}  // namespace oomtriage::triage
