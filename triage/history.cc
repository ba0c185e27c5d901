// triage/history.cc: a fix is carried when patching the config with it is a no-op.
#include "triage/history.h"

#include <filesystem>

#include "triage/config_patch.h"

namespace oomtriage::triage {
namespace {

using parsers::TargetKind;

bool in_file(const ConfigChange& change) {
  return change.kind == TargetKind::kYaml || change.kind == TargetKind::kJson ||
         change.kind == TargetKind::kToml;
}

const parsers::NativeFile* file_for(const ConfigChange& change,
                                    const std::vector<parsers::NativeFile>& files) {
  for (const auto& file : files) {
    if (file.path == change.file) return &file;
  }
  const std::string name = std::filesystem::path(change.file).filename().string();
  for (const auto& file : files) {
    if (!name.empty() && std::filesystem::path(file.path).filename() == name) return &file;
  }
  return files.size() == 1 ? &files.front() : nullptr;
}

}  // namespace

std::vector<std::string> carried_fixes(const std::vector<Fix>& proposed,
                                       const std::vector<parsers::NativeFile>& files) {
  std::vector<std::string> carried;
  for (const Fix& fix : proposed) {
    bool any = false, all = true;
    for (const ConfigChange& change : fix.changes) {
      if (!in_file(change)) continue;
      any = true;
      const parsers::NativeFile* file = file_for(change, files);
      if (file == nullptr) {
        all = false;
        break;
      }
      const auto patched = patch_file(file->kind, file->text, {change});
      if (!patched || *patched != file->text) {
        all = false;
        break;
      }
    }
    if (any && all) carried.push_back(fix.id);
  }
  return carried;
}

}  // namespace oomtriage::triage
