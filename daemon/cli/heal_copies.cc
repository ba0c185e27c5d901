// daemon/cli/heal_copies.cc: patched copies created with O_EXCL under a free name, and the
// user's edits followed into new copies.
#include "daemon/cli/heal_copies.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "daemon/common/user_file.h"
#include "triage/heal_plan.h"

namespace oomtriage::daemon {
namespace {

namespace fs = std::filesystem;

// Names tried after the attempt's own before giving up: more copies than any run makes.
constexpr int kNamesToTry = 1000;

// One spelling per file, whatever path led to it (relative, through a link).
std::string key_of(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? fs::path(path).lexically_normal().string() : canonical.string();
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// A new file beside `original` holding `text`, "job.oomtriage-<n>.yaml" for the first n from
// `attempt` whose name is free ("job.oomtriage-2.oomtriage-3.yaml" never: a copy's copy is named
// for the first stem). O_EXCL: a name taken meanwhile, by anyone, is never written over. The copy
// is as private as the original (its permission bits, under the umask).
Result<std::string> create_copy(const fs::path& original, int attempt, std::string_view text) {
  std::string stem = original.stem().string();
  if (const size_t mark = stem.find(".oomtriage-"); mark != std::string::npos) stem.resize(mark);
  mode_t mode = 0644;
  if (struct stat st{}; ::stat(original.c_str(), &st) == 0) mode = st.st_mode & 0777;
  for (int n = attempt; n < attempt + kNamesToTry; ++n) {
    const fs::path copy = original.parent_path() /
                          fmt::format("{}.oomtriage-{}{}", stem, n, original.extension().string());
    const int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      return make_error(ErrorCode::kIo,
                        fmt::format("cannot create {}: {}", copy.string(), std::strerror(errno)));
    }
    const bool written = write_all(fd, text);
    const int saved = errno;
    if (::close(fd) != 0 || !written) {
      ::unlink(copy.c_str());  // this run's own half-written file
      return make_error(ErrorCode::kIo, fmt::format("cannot write {}: {}", copy.string(),
                                                    std::strerror(written ? errno : saved)));
    }
    return copy.string();
  }
  return make_error(ErrorCode::kIo,
                    fmt::format("no free name for a copy of {} ({}.oomtriage-{}"
                                " to -{} are taken)",
                                original.string(), stem, attempt, attempt + kNamesToTry - 1));
}

// "cheapen_previews, drop_top_bucket": each fix once, in the order applied.
std::string fix_ids(const std::vector<triage::AppliedChange>& changes) {
  std::vector<std::string> ids;
  for (const auto& change : changes) {
    if (std::find(ids.begin(), ids.end(), change.fix_id) == ids.end()) ids.push_back(change.fix_id);
  }
  return fmt::format("{}", fmt::join(ids, ", "));
}

// A change's key as the fixes say it ("sample.width", not "config.process[0].sample.width").
std::string short_key(const triage::ConfigChange& change) {
  triage::Fix one;
  one.changes.push_back(change);
  const std::string said = triage::describe_changes(one);  // "KEY FROM -> TO"
  return said.substr(0, said.find(' '));
}

}  // namespace

Result<std::string> HealCopies::write(const parsers::NativeFile& file, const std::string& patched,
                                      const std::string& fix_id,
                                      const std::vector<triage::ConfigChange>& changes,
                                      int attempt) {
  const auto from_copy = copies_.find(key_of(file.path));
  const bool users = from_copy == copies_.end();
  const std::string key = users ? key_of(file.path) : from_copy->second;
  // A copy is made beside the user's file, spelled as the user's command spelled it.
  const std::string original = users ? file.path : originals_.at(key).path;
  auto made = create_copy(original, attempt, patched);
  if (!made) return made.error();
  Original& entry = originals_[key];
  if (users) {
    // The user's own file, read now: the changes start from these bytes.
    entry.path = file.path;
    entry.kind = file.kind;
    entry.base = file.text;
    entry.changes.clear();
    entry.read_before = attempt;
  }
  for (const triage::ConfigChange& change : changes) entry.changes.push_back({fix_id, change});
  entry.copy = *made;
  copies_[key_of(*made)] = key;
  return made;
}

Result<std::vector<HealCopies::Followed>> HealCopies::follow_edits(int attempt) {
  std::vector<Followed> followed;
  for (auto& [key, entry] : originals_) {
    const std::string& path = entry.path;
    auto now = read_user_file(path);
    if (!now || *now == entry.base) continue;
    auto rebased =
        triage::rebase_changes(entry.kind, entry.base, *now, entry.changes, shown_path(path));
    if (!rebased) {
      Followed broken;
      broken.original = path;
      broken.edited = std::move(*now);
      broken.stale_copy = entry.copy;
      broken.read_before = entry.read_before;
      broken.problem = rebased.error().message;
      followed.push_back(std::move(broken));
      return followed;
    }
    auto made = create_copy(path, attempt, rebased->text);
    if (!made) return made.error();
    followed.push_back({path, *now, entry.copy, *made, rebased->text, rebased->applied,
                        rebased->yielded, entry.read_before, ""});
    copies_[key_of(*made)] = key;
    entry.base = std::move(*now);
    entry.changes = std::move(rebased->applied);
    entry.copy = *made;
    entry.read_before = attempt;
  }
  return followed;
}

std::string shown_path(const std::string& path) {
  std::error_code ec;
  const fs::path relative = fs::path(path).lexically_relative(fs::current_path(ec));
  if (ec || relative.empty() || *relative.begin() == "..") return path;
  return relative.string();
}

std::string followed_line(const HealCopies::Followed& edit, int attempt) {
  const std::string when = edit.read_before == attempt
                               ? std::string("during the back-off")
                               : fmt::format("since attempt {} began", edit.read_before);
  if (!edit.problem.empty()) {
    return fmt::format(
        "{} changed {} and no longer parses ({}): attempt {} is not started, neither from your "
        "edit nor from {}; fix the file and start the run again (the job resumes from its saves)",
        shown_path(edit.original), when, edit.problem, attempt, shown_path(edit.stale_copy));
  }
  std::string line = fmt::format("{} changed {}: attempt {} uses your edit with {} applied",
                                 shown_path(edit.original), when, attempt,
                                 edit.applied.empty() ? "no fix" : fix_ids(edit.applied));
  if (!edit.yielded.empty()) {
    std::vector<std::string> keys;
    triage::Fix left_out;
    for (const auto& change : edit.yielded) {
      if (const std::string key = short_key(change.change);
          std::find(keys.begin(), keys.end(), key) == keys.end()) {
        keys.push_back(key);
      }
      left_out.changes.push_back(change.change);
    }
    line += fmt::format(" (your {} kept; left out: {} of {})", fmt::join(keys, ", "),
                        triage::describe_changes(left_out), fix_ids(edit.yielded));
  }
  return line + " in " + shown_path(edit.copy);
}

}  // namespace oomtriage::daemon
