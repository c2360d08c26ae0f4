// Runs the kvserve binary with arguments and captures its exit code, stdout and stderr.
// (The same helper as in cli_test.cpp, shared so new CLI tests need not copy it.)
#pragma once

#include <sys/wait.h>

#include <cstdlib>
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

// stdout and stderr go to files in `dir`; stdin is /dev/null.
inline KvserveResult run_kvserve(const std::vector<std::string>& args, const TempDir& dir) {
  std::string cmd = shell_quote(KVS_BINARY);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const int status = std::system((cmd + " > " + shell_quote(out) + " 2> " + shell_quote(err) + " < /dev/null").c_str());
  KvserveResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace kvs::test
