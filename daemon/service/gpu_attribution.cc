// daemon/service/gpu_attribution.cc: a GPU process's job, from its descriptors, working folder
// and command line and its ancestors'; its start time, which tells it from a later process with
// its pid.
#include "daemon/service/gpu_attribution.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <sstream>

namespace oomtriage::daemon {

namespace {

constexpr size_t kMaxLineage = 32;  // deeper than any launcher chain; a loop cannot hold us

std::string read_link(const std::string& path) {
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

// What a /proc file holds, or as much as was read before it went away. Not std::ifstream: a
// process that exits between the open and the read makes read(2) fail, and libstdc++'s filebuf
// throws on that (seen in a test: "basic_filebuf::underflow error reading the file").
std::string slurp(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The access mode of descriptor `fd` of `pid`, from fdinfo's "flags:" (octal), or -1.
int access_mode(const std::string& proc, pid_t pid, const std::string& fd) {
  std::istringstream info(slurp(proc + "/" + std::to_string(pid) + "/fdinfo/" + fd));
  std::string key;
  while (info >> key) {
    if (key == "flags:") {
      unsigned long flags = 0;
      info >> std::oct >> flags;
      return static_cast<int>(flags & O_ACCMODE);
    }
    info.ignore(4096, '\n');
  }
  return -1;
}

// `path` as one spelling: absolute against `base` (empty: only an absolute path has one), no
// `.`, `..` or doubled slashes, no trailing slash. Empty when there is none.
std::string normal_path(const std::string& path, const std::string& base = "") {
  if (path.empty() || (path[0] != '/' && base.empty())) return "";
  const std::filesystem::path full =
      path[0] == '/' ? std::filesystem::path(path) : std::filesystem::path(base) / path;
  std::string normal = full.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

// Of the jobs whose folder holds `path`, the innermost: a job kept in a sub-folder of another's
// is its own.
const JobFiles* innermost_holding(const std::string& path, const std::vector<JobFiles>& jobs) {
  const JobFiles* found = nullptr;
  for (const JobFiles& job : jobs) {
    if (is_within(path, job.folder) && (!found || job.folder.size() > found->folder.size()))
      found = &job;
  }
  return found;
}

// The words of an option's name: `--Output-Dir` and `output_dir` are {"output", "dir"}.
std::vector<std::string> option_words(std::string_view option) {
  std::vector<std::string> words(1);
  for (const char c : option.substr(std::min(option.find_first_not_of('-'), option.size()))) {
    if (c == '_' || c == '-' || c == '.') {
      if (!words.back().empty()) words.emplace_back();
    } else {
      words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// One path a command line names, with the option it is the value of (empty: a positional).
struct NamedPath {
  std::string option;
  std::string path;
};

// `--opt=value` and `--opt value` name value under opt; any other argument names itself. A flag
// followed by a positional is read as the flag's value: harmless, the option's name decides only
// whether a folder is an output, and a flag's name is not one.
std::vector<NamedPath> named_paths(const std::vector<std::string>& args) {
  std::vector<NamedPath> named;
  std::string option;  // waiting for its value
  for (const std::string& arg : args) {
    if (arg.size() > 1 && arg[0] == '-') {
      const size_t equals = arg.find('=');
      if (equals == std::string::npos) {
        option = arg;
      } else {
        named.push_back({arg.substr(0, equals), arg.substr(equals + 1)});
        option.clear();
      }
      continue;
    }
    named.push_back({option, arg});
    option.clear();
  }
  return named;
}

}  // namespace

bool names_an_output(std::string_view option) {
  static constexpr std::string_view kOutputs[] = {"output", "outputs", "out", "outdir", "logdir"};
  static constexpr std::string_view kWriters[] = {"log", "logs", "logging", "save", "workspace"};
  static constexpr std::string_view kPlaces[] = {"dir", "folder", "path", "file", "to"};
  const auto among = [](const std::string& word, const auto& list) {
    return std::find(std::begin(list), std::end(list), word) != std::end(list);
  };
  const std::vector<std::string> words = option_words(option);
  for (size_t i = 0; i < words.size(); ++i) {
    if (among(words[i], kOutputs)) return true;
    if (among(words[i], kWriters) && i + 1 < words.size() && among(words[i + 1], kPlaces))
      return true;
  }
  return false;
}

bool is_within(const std::string& path, const std::string& folder) {
  if (folder.empty() || path.size() < folder.size() || path.compare(0, folder.size(), folder) != 0)
    return false;
  return path.size() == folder.size() || folder.back() == '/' || path[folder.size()] == '/';
}

std::vector<pid_t> GpuAttribution::lineage(pid_t pid) const {
  std::vector<pid_t> chain;
  while (pid > 1 && chain.size() < kMaxLineage &&
         std::find(chain.begin(), chain.end(), pid) == chain.end()) {
    chain.push_back(pid);
    // /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses.
    const std::string stat = slurp(proc_ + "/" + std::to_string(pid) + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) break;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t parent = 0;
    if (!(rest >> state >> parent)) break;
    pid = parent;
  }
  return chain;
}

std::vector<std::string> GpuAttribution::files_written(pid_t pid) const {
  std::vector<std::string> files;
  const std::string fds = proc_ + "/" + std::to_string(pid) + "/fd";
  DIR* dir = ::opendir(fds.c_str());
  if (!dir) return files;  // gone, or not ours to read
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::string target = read_link(fds + "/" + entry->d_name);
    if (target.empty() || target[0] != '/') continue;         // pipes, sockets, anonymous inodes
    const int mode = access_mode(proc_, pid, entry->d_name);  // -1: closed meanwhile
    if (mode == O_WRONLY || mode == O_RDWR) files.push_back(std::move(target));
  }
  ::closedir(dir);
  return files;
}

std::string GpuAttribution::working_folder(pid_t pid) const {
  return read_link(proc_ + "/" + std::to_string(pid) + "/cwd");
}

std::vector<std::string> GpuAttribution::arguments(pid_t pid) const {
  const std::string cmdline = slurp(proc_ + "/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> args;
  for (size_t at = 0; at < cmdline.size();) {
    const size_t end = std::min(cmdline.find('\0', at), cmdline.size());
    if (end > at) args.push_back(cmdline.substr(at, end - at));
    at = end + 1;
  }
  return args;
}

bool GpuAttribution::runs_under(pid_t pid, const std::string& exe) const {
  if (exe.empty()) return false;
  for (pid_t member : lineage(pid)) {
    if (read_link(proc_ + "/" + std::to_string(member) + "/exe") == exe) return true;
  }
  return false;
}

std::string GpuAttribution::cgroup(pid_t pid) const {
  return slurp(proc_ + "/" + std::to_string(pid) + "/cgroup");
}

std::optional<uint64_t> GpuAttribution::start_time(pid_t pid) const {
  // "pid (comm) state ppid ...": the 22nd field is the 20th after comm's closing parenthesis.
  const std::string stat = slurp(proc_ + "/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 0; i < 19; ++i) {
    if (!(rest >> field)) return std::nullopt;
  }
  uint64_t ticks = 0;
  if (!(rest >> ticks)) return std::nullopt;
  return ticks;
}

const JobFiles* GpuAttribution::named_by_arguments(pid_t pid,
                                                   const std::vector<JobFiles>& jobs) const {
  const std::string cwd = working_folder(pid);  // for relative paths; empty when not ours
  for (const NamedPath& named : named_paths(arguments(pid))) {
    const std::string path = normal_path(named.path, cwd);
    if (path.empty()) continue;
    for (const JobFiles& job : jobs) {
      if (path == normal_path(job.config)) return &job;
      for (const std::string& log : job.logs)
        if (path == normal_path(log)) return &job;
    }
    if (names_an_output(named.option)) {
      if (const JobFiles* job = innermost_holding(path, jobs)) return job;
    }
  }
  return nullptr;
}

std::optional<std::string> GpuAttribution::job_of(pid_t pid,
                                                  const std::vector<JobFiles>& jobs) const {
  // A pod's processes share its cgroup: no ancestors to walk, and no ptrace rights needed.
  if (std::any_of(jobs.begin(), jobs.end(), [](const JobFiles& j) { return !j.pod_uid.empty(); })) {
    const std::string groups = cgroup(pid);
    for (const JobFiles& job : jobs) {
      if (job.pod_uid.empty()) continue;
      std::string systemd_uid = job.pod_uid;
      std::replace(systemd_uid.begin(), systemd_uid.end(), '-', '_');
      if (groups.find("pod" + job.pod_uid) != std::string::npos ||
          groups.find("pod" + systemd_uid + ".slice") != std::string::npos) {
        return job.job;
      }
    }
  }
  const std::vector<pid_t> chain = lineage(pid);
  for (pid_t member : chain) {
    const std::vector<std::string> written = files_written(member);
    for (const JobFiles& job : jobs) {
      for (const std::string& log : job.logs)
        if (std::find(written.begin(), written.end(), log) != written.end()) return job.job;
    }
  }
  for (pid_t member : chain) {
    const std::string folder = working_folder(member);
    if (folder.empty()) continue;
    if (const JobFiles* job = innermost_holding(folder, jobs)) return job->job;
  }
  for (pid_t member : chain) {
    if (const JobFiles* job = named_by_arguments(member, jobs)) return job->job;
  }
  return std::nullopt;
}

}  // namespace oomtriage::daemon
