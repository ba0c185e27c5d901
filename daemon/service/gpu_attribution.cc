// daemon/service/gpu_attribution.cc: a GPU process's job, from its descriptors, working folder
// and command line and its ancestors'.
#include "daemon/service/gpu_attribution.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

namespace oomtriage::daemon {

namespace {

constexpr size_t kMaxLineage = 32;  // deeper than any launcher chain; a loop cannot hold us

std::string read_link(const std::string& path) {
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
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

}  // namespace

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
    for (const JobFiles& job : jobs)
      if (!folder.empty() && is_within(folder, job.folder)) return job.job;
  }
  for (pid_t member : chain) {
    for (const std::string& arg : arguments(member)) {
      // "--config=/out/job/config.yaml" names the path after the '='.
      const size_t equals = arg.find('=');
      const std::string path =
          equals != std::string::npos && arg[0] == '-' ? arg.substr(equals + 1) : arg;
      for (const JobFiles& job : jobs)
        if (is_within(path, job.folder)) return job.job;
    }
  }
  return std::nullopt;
}

}  // namespace oomtriage::daemon
