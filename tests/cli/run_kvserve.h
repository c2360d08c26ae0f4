// Runs the kvserve binary with arguments and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace kvs::test {

struct KvserveResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs argv[0] with the rest as arguments; stdout and stderr go to files in `dir`; stdin is /dev/null.
inline KvserveResult run_command(const std::vector<std::string>& argv, const TempDir& dir) {
  std::string cmd;
  for (const auto& a : argv) cmd.append(cmd.empty() ? "" : " ").append(shell_quote(a));
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on the chain of operator+.
  cmd.append(" > ").append(shell_quote(out)).append(" 2> ").append(shell_quote(err)).append(" < /dev/null");
  const int status = std::system(cmd.c_str());
  KvserveResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

inline KvserveResult run_kvserve(const std::vector<std::string>& args, const TempDir& dir) {
  std::vector<std::string> argv = {KVS_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, dir);
}

// The Vulkan devices `kvserve devices` lists (lavapipe is one): 0 where there are none or no loader.
inline size_t vulkan_devices(const TempDir& dir) {
  const auto listing = run_kvserve({"devices", "--json"}, dir);
  if (listing.exit_code != 0) return 0;
  const nlohmann::json d = nlohmann::json::parse(listing.out);
  return d.contains("vulkan_error") ? 0 : d["vulkan"].size();
}

}  // namespace kvs::test
