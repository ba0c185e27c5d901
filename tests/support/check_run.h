// tests/support/check_run.h
//
// Runs the real `oomtriage check ARGS` in a folder (relative paths in a command line are the
// job's own there) and keeps its exit code, standard output and standard error; the output is
// caught in `scratch` (the folder itself when not given), so a folder of test data stays as it is.
#pragma once

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/e2e.h"

namespace oomtriage::testing {

struct CheckRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  nlohmann::json doc() const { return nlohmann::json::parse(out, nullptr, false); }
};

inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline CheckRun run_check_in(const fs::path& dir, const std::vector<std::string>& args,
                             const fs::path& scratch = {}) {
  std::string command = "cd " + shell_quoted(dir.string()) + " && " + OOMTRIAGE_BINARY + " check";
  for (const std::string& arg : args) command += " " + shell_quoted(arg);
  const fs::path into = scratch.empty() ? dir : scratch;
  const fs::path out = into / ".check-stdout";
  const fs::path err = into / ".check-stderr";
  const int status = std::system(
      (command + " >" + shell_quoted(out.string()) + " 2>" + shell_quoted(err.string())).c_str());
  CheckRun run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  return run;
}

inline void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

}  // namespace oomtriage::testing
