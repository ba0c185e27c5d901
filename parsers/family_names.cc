// parsers/family_names.cc: the family table (display names spelled as the model makers spell
// them, where one name covers the family) and the matching of a word to a row.
#include "parsers/family_names.h"

#include <cctype>

namespace oomtriage::parsers {
namespace {

// Lower case letters and digits only: "FLUX.1-dev", "flux1_dev" and "flux1-dev" are one name.
std::string normalized(std::string_view word) {
  std::string out;
  for (const char c : word) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) out += static_cast<char>(std::tolower(u));
  }
  return out;
}

bool names_row(const FamilyName& row, const std::string& key) {
  if (normalized(row.id) == key || normalized(row.display) == key) return true;
  for (const std::string_view a : row.architectures) {
    if (normalized(a) == key) return true;
  }
  for (const std::string_view a : row.aliases) {
    if (normalized(a) == key) return true;
  }
  return false;
}

std::vector<FamilyName> make_table() {
  std::vector<FamilyName> rows = {
      // The families the store tells apart, in parsers::ModelFamily's order.
      {"other", "other", "other", {}, {}},
      {"z-image", "Z-Image", "z-image", {"z-image"}, {"Z-Image-Turbo", "Z-Image-Base"}},
      {"qwen-image", "Qwen-Image", "qwen-image", {"qwen-image"}, {}},
      {"qwen-image-edit", "Qwen-Image-Edit", "qwen-image-edit", {"qwen-image-edit"}, {}},
      {"qwen-image-edit-plus",
       "Qwen-Image-Edit Plus",
       "qwen-image-edit-plus",
       {},
       {"Qwen-Image-Edit-2509", "Qwen-Image-Edit-2511", "qwen_image_edit_plus"}},
      {"flux.1",
       "FLUX.1",
       "flux.1",
       {"flux1-dev", "flux1-kontext", "flux1-schnell"},
       {"flux", "flux-dev", "flux-schnell", "flux-kontext", "FLUX.1-Kontext-dev", "kontext"}},
      {"flex.1", "Flex.1", "flex.1", {"flex1"}, {"Flex.1-alpha"}},
      {"flex.2", "Flex.2", "flex.2", {"flex2"}, {"Flex.2-preview"}},
      {"flux.2",
       "FLUX.2",
       "flux.2",
       {"flux2-klein-4b", "flux2-klein-9b", "flux2-dev"},
       {"flux2-klein", "FLUX.2-klein", "klein"}},
      {"chroma", "Chroma", "chroma", {"chroma"}, {"Chroma1-HD", "Chroma1-Base", "zeta-chroma"}},
      {"wan2.1",
       "Wan 2.1",
       "wan2.1",
       {"wan21-t2v-1.3b", "wan21-i2v-14b", "wan21-t2v-14b"},
       {"wan21-14b", "wan21-1.3b", "Wan2.1-I2V-14B-480P", "Wan2.1-I2V-14B-720P"}},
      {"wan2.2",
       "Wan 2.2",
       "wan2.2",
       {"wan22-ti2v-5b", "wan22-14b"},
       {"Wan2.2-T2V-A14B", "Wan2.2-I2V-A14B", "wan22-5b"}},
      {"ltx",
       "LTX-Video",
       "ltx",
       {"ltx2", "ltx-video-13b", "ltx-video"},
       {"ltxv", "ltx-2", "ltxv-13b", "LTX-Video-0.9"}},
      {"sdxl",
       "SDXL",
       "sdxl",
       {"sdxl"},
       {"sd-xl", "stable-diffusion-xl", "stable-diffusion-xl-base-1.0", "pony", "ponyxl",
        "illustrious"}},
      {"sd1",
       "SD 1.x/2.x",
       "sd1",
       {"sd15", "sd2"},
       {"sd 1.5", "sd14", "sd1.x", "sd21", "sd 2.1", "stable-diffusion-v1-5",
        "stable-diffusion-1.5", "stable-diffusion-2.1"}},
      // The store's family of a job whose config it never read.
      {"unknown", "unknown", "unknown", {}, {}},
      // The memory model's other families: the store files their jobs under "other".
      {"hidream", "HiDream", "other", {"hidream"}, {"HiDream-I1"}},
      {"sd3.5",
       "SD 3.5",
       "other",
       {"sd35-large", "sd35-medium"},
       {"sd3", "stable-diffusion-3.5", "stable-diffusion-3.5-large",
        "stable-diffusion-3.5-medium"}},
      {"auraflow", "AuraFlow", "other", {"auraflow"}, {}},
      {"pixart-sigma", "PixArt-Sigma", "other", {"pixart-sigma"}, {"pixart"}},
      {"sana", "Sana", "other", {"sana"}, {}},
      {"lumina2", "Lumina 2", "other", {"lumina2"}, {"Lumina-Image-2.0", "lumina"}},
      {"cosmos2", "Cosmos-Predict2", "other", {"cosmos2-image"}, {"cosmos"}},
      {"stable-cascade", "Stable Cascade", "other", {"stable-cascade"}, {"wuerstchen"}},
      {"hunyuan-image", "HunyuanImage", "other", {"hunyuan-image-2.1"}, {}},
      {"kolors", "Kolors", "other", {"kolors"}, {}},
      {"deepfloyd-if", "DeepFloyd IF", "other", {"deepfloyd-if"}, {"deepfloyd"}},
      {"hunyuan-video",
       "HunyuanVideo",
       "other",
       {"hunyuan-video", "hunyuan-video-1.5"},
       {"HunyuanVideo-1.5"}},
      {"cogvideox", "CogVideoX", "other", {"cogvideox", "cogvideox-2b"}, {"cogvideo"}},
      {"mochi", "Mochi 1", "other", {"mochi"}, {"mochi-1"}},
  };
  return rows;
}

}  // namespace

const std::vector<FamilyName>& family_table() {
  static const std::vector<FamilyName> table = make_table();
  return table;
}

const FamilyName* find_family(std::string_view word) {
  const std::string key = normalized(word);
  if (key.empty()) return nullptr;
  for (const FamilyName& row : family_table()) {
    if (names_row(row, key)) return &row;
  }
  return nullptr;
}

std::optional<ModelFamily> family_of_architecture(std::string_view architecture) {
  for (const FamilyName& row : family_table()) {
    for (const std::string_view a : row.architectures) {
      if (a != architecture) continue;
      for (int i = 0; i <= static_cast<int>(ModelFamily::kSd1); ++i) {  // kSd1: the enum's last
        const auto family = static_cast<ModelFamily>(i);
        if (to_string(family) == row.stored) return family;
      }
      return ModelFamily::kOther;
    }
  }
  return std::nullopt;
}

const FamilyName& family_of(ModelFamily family) {
  const std::string_view id = to_string(family);
  for (const FamilyName& row : family_table()) {
    if (row.id == id) return row;
  }
  return family_table().front();  // "other"; tests/parsers/family_names_test.cc: never reached
}

std::string family_display_name(std::string_view word) {
  const FamilyName* row = find_family(word);
  return std::string(row != nullptr ? row->display : word);
}

std::string family_label(std::string_view word) {
  const FamilyName* row = find_family(word);
  if (row == nullptr || row->display == row->id) return std::string(word);
  return std::string(row->display) + " (" + std::string(row->id) + ")";
}

std::string architecture_label(std::string_view architecture) {
  const FamilyName* row = find_family(architecture);
  if (row == nullptr || row->display == row->id) return std::string(architecture);
  std::string label = family_label(architecture);
  if (normalized(architecture) != normalized(row->id)) {
    label += ", architecture " + std::string(architecture);
  }
  return label;
}

std::vector<std::string> family_words() {
  std::vector<std::string> words;
  for (const FamilyName& row : family_table()) {
    words.emplace_back(row.id);
    for (const std::string_view a : row.architectures) {
      if (a != row.id) words.emplace_back(a);
    }
    for (const std::string_view a : row.aliases) words.emplace_back(a);
  }
  return words;
}

}  // namespace oomtriage::parsers
