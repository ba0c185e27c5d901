// daemon/render/job_names.cc: names that tell jobs of the same name apart.
#include "daemon/render/job_names.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace oomtriage::daemon {
namespace {

// The folders of a home, innermost last, without the last when it is the job's own name (AI
// Toolkit's <training_folder>/<name>): that part is the same for every job of the name.
std::vector<std::string> folders_of(const db::JobSummary& job, bool drop_own_name) {
  std::vector<std::string> parts;
  for (const auto& part : std::filesystem::path(job.home.empty() ? job.log_dir : job.home)) {
    const std::string text = part.string();
    if (!text.empty() && text != "/") parts.push_back(text);
  }
  if (drop_own_name && parts.size() > 1 && parts.back() == job.name) parts.pop_back();
  return parts;
}

std::string last_parts(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = parts.size() - std::min(count, parts.size()); i < parts.size(); ++i) {
    out += (out.empty() ? "" : "/") + parts[i];
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::vector<std::string> display_names(const std::vector<db::JobSummary>& jobs) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_name;  // (host, name)
  for (size_t i = 0; i < jobs.size(); ++i) by_name[{jobs[i].host, jobs[i].name}].push_back(i);
  std::vector<std::string> out;
  for (const auto& job : jobs) out.push_back(job.name);
  for (const auto& [key, members] : by_name) {
    if (members.size() < 2) continue;
    std::vector<std::vector<std::string>> parts;
    size_t count = 0;
    // Without the folder named like the job first; with it when that is what tells them apart
    // ("/runs/my_lora" for {parent} of /runs/my_lora/log.txt, "/runs" for {stem} of
    // /runs/my_lora.log).
    for (const bool drop_own_name : {true, false}) {
      parts.clear();
      size_t longest = 0;
      for (const size_t i : members) {
        parts.push_back(folders_of(jobs[i], drop_own_name));
        longest = std::max(longest, parts.back().size());
      }
      // Two folders at least (one alone, "a", says little), more until they differ.
      bool apart = false;
      for (count = std::min<size_t>(2, longest);; ++count) {
        std::set<std::string> seen;
        for (const auto& p : parts) seen.insert(last_parts(p, count));
        apart = seen.size() == members.size();
        if (apart || count >= longest) break;
      }
      if (apart) break;
    }
    for (size_t m = 0; m < members.size(); ++m) {
      out[members[m]] = key.second + " (" + last_parts(parts[m], count) + ")";
    }
  }
  return out;
}

void keep_newest(std::vector<db::JobSummary>& jobs) {
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  std::erase_if(jobs, [&](const db::JobSummary& job) {
    return !seen.insert({job.host, job.name, job.home}).second;
  });
}

JobMatch find_job(const std::string& ref, const std::vector<db::JobSummary>& jobs,
                  const std::vector<std::string>& names) {
  JobMatch match;
  const auto pick = [&](const std::function<bool(size_t)>& matches) {
    std::vector<size_t> found;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (matches(i)) found.push_back(i);
    }
    if (found.size() == 1) match.job = &jobs[found.front()];
    if (found.size() > 1) {
      for (const size_t i : found) {
        match.candidates.push_back(names[i] +
                                   (jobs[i].host.empty() ? "" : " on host " + jobs[i].host));
      }
    }
    return !found.empty();
  };
  if (pick([&](size_t i) { return names[i] == ref; })) return match;
  if (pick([&](size_t i) { return jobs[i].name == ref; })) return match;
  // A folder, as the shell completes it.
  std::error_code ec;
  const std::string folder = std::filesystem::absolute(ref, ec).lexically_normal().string();
  const std::string bare =
      folder.size() > 1 && folder.back() == '/' ? folder.substr(0, folder.size() - 1) : folder;
  pick([&](size_t i) {
    return !ec && ((!jobs[i].home.empty() && jobs[i].home == bare) || jobs[i].log_dir == bare);
  });
  return match;
}

}  // namespace oomtriage::daemon
