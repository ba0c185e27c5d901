// db/store_identity.cc: the store's identity file (db/store_identity.h): a few `key=value`
// lines, written through a temporary file and renamed over.
#include "db/store_identity.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace oomtriage::db {
namespace {

namespace fs = std::filesystem;

Result<Ok> write_all(int fd, std::string_view text, const std::string& path) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return make_error(ErrorCode::kIo,
                        fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return Ok{};
}

bool read_count(std::string_view text, int64_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && out >= 0;
}

}  // namespace

std::string identity_path(const std::string& store_path) { return store_path + ".identity"; }

Result<std::optional<StorePosition>> read_identity(const std::string& store_path) {
  const std::string path = identity_path(store_path);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<StorePosition>();
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("cannot read {}", path));
  StorePosition position;
  std::string line;
  int number = 0;
  bool have_id = false;
  while (std::getline(in, line) && number < 64) {
    ++number;
    const size_t eq = line.find('=');
    if (line.empty() || line.front() == '#') continue;
    const std::string_view key = std::string_view(line).substr(0, eq);
    const std::string_view value =
        eq == std::string::npos ? std::string_view() : std::string_view(line).substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (key == "store_id") {
      position.store_id = std::string(value);
      have_id = !value.empty();
    } else if (key == "events") {
      ok = ok && read_count(value, position.events);
    } else if (key == "files") {
      ok = ok && read_count(value, position.files);
    }
    if (!ok) {
      return make_error(ErrorCode::kBadInput, fmt::format("{}:{}: not `key=count`: {}", path,
                                                          number, line.substr(0, 80)));
    }
  }
  if (!have_id) return make_error(ErrorCode::kBadInput, fmt::format("{}: no store_id", path));
  return std::optional<StorePosition>(std::move(position));
}

Result<Ok> write_identity(const std::string& store_path, const StorePosition& position,
                          int folder_fd) {
  const std::string path = identity_path(store_path);
  const std::string temporary = path + ".new";
  // Everything relative to the folder: the caller's descriptor, or one opened for this write.
  const std::string folder_path = fs::path(path).parent_path().string();
  const int folder = folder_fd >= 0 ? folder_fd
                                    : ::open(folder_path.empty() ? "." : folder_path.c_str(),
                                             O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder < 0) {
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot open the folder of {}: {}", path, std::strerror(errno)));
  }
  const std::string name = fs::path(path).filename().string();
  const std::string temporary_name = name + ".new";
  const std::string text = fmt::format(
      "# oomtriage: the store beside this file and how far its commits came "
      "(docs/reliability.md)\nstore_id={}\nevents={}\nfiles={}\n",
      position.store_id, position.events, position.files);
  Result<Ok> written = Ok{};
  const int fd =
      ::openat(folder, temporary_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    written = make_error(ErrorCode::kIo,
                         fmt::format("cannot write {}: {}", temporary, std::strerror(errno)));
  } else {
    written = write_all(fd, text, temporary);
    if (written && ::fsync(fd) != 0) {
      written = make_error(ErrorCode::kIo,
                           fmt::format("cannot sync {}: {}", temporary, std::strerror(errno)));
    }
    ::close(fd);
    if (written && ::renameat(folder, temporary_name.c_str(), folder, name.c_str()) != 0) {
      written = make_error(ErrorCode::kIo,
                           fmt::format("cannot replace {}: {}", path, std::strerror(errno)));
    }
    if (!written) ::unlinkat(folder, temporary_name.c_str(), 0);
  }
  if (written) ::fsync(folder);  // the rename itself is durable only once the folder is
  if (folder != folder_fd) ::close(folder);
  return written;
}

std::string behind_reason(const std::optional<StorePosition>& kept, const StorePosition& found) {
  if (!kept || (kept->events == 0 && kept->files == 0)) return "";
  const std::string was = fmt::format("{} event(s) and {} file(s) (store {})", kept->events,
                                      kept->files, kept->store_id.substr(0, 8));
  if (found.store_id.empty() || (found.events == 0 && found.files == 0)) {
    return fmt::format("the store is empty, but its identity file says it held {}", was);
  }
  if (found.store_id != kept->store_id) {
    return fmt::format("another store (store {}) is where the one that held {} was",
                       found.store_id.substr(0, 8), was);
  }
  if (found.events < kept->events || found.files < kept->files) {
    return fmt::format(
        "the store goes up to event {} and file {}, but {} and {} were committed (a backup put "
        "back, or a WAL tail lost)",
        found.events, found.files, kept->events, kept->files);
  }
  return "";
}

}  // namespace oomtriage::db
