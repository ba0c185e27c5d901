// tests/parsers/family_names_test.cc
//
// The family table (parsers/family_names.h): every family the store keeps and every architecture
// row of the memory model has one row with a display name, no name leads to two rows, and the
// names people type ("FLUX", "flux1-dev", "FLUX.1-dev", "Wan 2.2") find the row the store's id
// finds.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "parsers/family_names.h"
#include "parsers/job_config.h"
#include "parsers/native_config.h"
#include "triage/architectures.h"

using namespace oomtriage;
using parsers::ModelFamily;

namespace {

std::string normalized(std::string_view word) {
  std::string out;
  for (const char c : word) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("parsers::family_names") {
  TEST_CASE("every family the store keeps has its row, display name and id") {
    for (int i = 0; i <= static_cast<int>(ModelFamily::kSd1); ++i) {
      const auto family = static_cast<ModelFamily>(i);
      const std::string_view id = parsers::to_string(family);
      INFO(id);
      const parsers::FamilyName& row = parsers::family_of(family);
      CHECK(row.id == id);
      CHECK(row.stored == id);
      CHECK_FALSE(row.display.empty());
      REQUIRE(parsers::find_family(id) == &row);
      CHECK(parsers::find_family(row.display) == &row);
    }
    // A job whose config was never read is stored as "unknown": a filter may name it too.
    REQUIRE(parsers::find_family("unknown") != nullptr);
    CHECK(parsers::find_family("unknown")->stored == "unknown");
  }

  TEST_CASE("every architecture row of the memory model belongs to one family") {
    for (const std::string_view architecture : triage::architecture_ids()) {
      INFO(architecture);
      const parsers::FamilyName* row = parsers::find_family(architecture);
      REQUIRE(row != nullptr);
      int owners = 0;
      for (const parsers::FamilyName& r : parsers::family_table()) {
        for (const std::string_view a : r.architectures) owners += a == architecture ? 1 : 0;
      }
      CHECK(owners == 1);
      // A job whose trainer names this architecture is filed under the row's stored family.
      REQUIRE(parsers::family_of_architecture(architecture));
      CHECK(parsers::to_string(*parsers::family_of_architecture(architecture)) == row->stored);
    }
  }

  TEST_CASE("no name leads to two families, and every row's names lead back to it") {
    std::map<std::string, std::string_view> owner;
    for (const parsers::FamilyName& row : parsers::family_table()) {
      std::vector<std::string_view> names = {row.id, row.display};
      names.insert(names.end(), row.architectures.begin(), row.architectures.end());
      names.insert(names.end(), row.aliases.begin(), row.aliases.end());
      for (const std::string_view name : names) {
        INFO(row.id << ": " << name);
        const auto [at, added] = owner.emplace(normalized(name), row.id);
        CHECK((added || at->second == row.id));
        CHECK(parsers::find_family(name) == &row);
      }
      CHECK(row.stored == (parsers::find_family(row.stored) == &row ? row.id : "other"));
    }
  }

  TEST_CASE("the names people type, in any case and spelling, find the store's family") {
    for (const char* word : {"flux.1", "FLUX.1", "flux1-dev", "flux1_dev", "FLUX.1-dev",
                             "flux1-schnell", "flux", "Flux", "flux-dev", "FLUX.1-Kontext-dev"}) {
      INFO(word);
      REQUIRE(parsers::find_family(word) != nullptr);
      CHECK(parsers::find_family(word)->stored == "flux.1");
      CHECK(parsers::find_family(word)->display == "FLUX.1");
    }
    const auto stored = [](const char* word) {
      const parsers::FamilyName* row = parsers::find_family(word);
      return row == nullptr ? std::string("(none)") : std::string(row->stored);
    };
    CHECK(stored("wan2.2") == "wan2.2");
    CHECK(stored("Wan 2.2") == "wan2.2");
    CHECK(stored("wan22-14b") == "wan2.2");
    CHECK(stored("Wan2.2-T2V-A14B") == "wan2.2");
    CHECK(stored("wan21-t2v-1.3b") == "wan2.1");
    CHECK(stored("SDXL") == "sdxl");
    CHECK(stored("sd15") == "sd1");
    CHECK(stored("sd2") == "sd1");
    CHECK(stored("flux2-klein-9b") == "flux.2");
    CHECK(stored("Qwen-Image-Edit-2509") == "qwen-image-edit-plus");
    CHECK(stored("ltx-video-13b") == "ltx");
    CHECK(stored("hidream") == "other");
    CHECK(stored("sd35-large") == "other");
    // Typos are not guessed at: the caller says "did you mean".
    CHECK(parsers::find_family("fluxx") == nullptr);
    CHECK(parsers::find_family("") == nullptr);
    CHECK(parsers::find_family("wan") == nullptr);  // 2.1 or 2.2: not ours to pick
  }

  TEST_CASE("a family is shown by its display name with its id beside") {
    CHECK(parsers::family_label("flux.1") == "FLUX.1 (flux.1)");
    CHECK(parsers::family_label("flux1-dev") == "FLUX.1 (flux.1)");
    CHECK(parsers::family_label("wan2.2") == "Wan 2.2 (wan2.2)");
    CHECK(parsers::family_label("other") == "other");
    CHECK(parsers::family_label("something-new") == "something-new");
    CHECK(parsers::family_display_name("sdxl") == "SDXL");
    CHECK(parsers::family_display_name("something-new") == "something-new");
  }

  TEST_CASE("a trainer that names the architecture files the job by the table, not its letters") {
    // SimpleTuner's model_family/model_flavour say FLUX.2 of a model path that says nothing:
    // "flux2-dev" read as a name would be FLUX.1.
    const auto read = [](const std::string& family, const std::string& flavour) {
      const std::string text = R"({"--model_family": ")" + family + R"(", "--model_flavour": ")" +
                               flavour + R"(", "--pretrained_model_name_or_path": "/models/base"})";
      auto config = parsers::read_native_config(
          parsers::Trainer::kSimpleTuner,
          {parsers::NativeFile{parsers::TargetKind::kJson, "config.json", text}});
      REQUIRE(config);
      return std::string(parsers::to_string(config->family));
    };
    CHECK(read("flux2", "dev") == "flux.2");
    CHECK(read("flux2", "klein-9b") == "flux.2");
    CHECK(read("flux", "schnell") == "flux.1");
    CHECK(read("sd2x", "") == "sd1");
    CHECK(read("wan", "2.2-t2v-a14b") == "wan2.2");
    CHECK(read("hidream", "") == "other");
  }
}
