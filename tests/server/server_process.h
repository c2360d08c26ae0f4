// A real `kvserve serve` for integration tests: started on a free loopback port (--port 0; the
// port is read from its startup line), stopped with SIGTERM, and killed if a test leaves it
// running. Plus small HTTP helpers over cpp-httplib.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server/sse_parser.h"
#include "test_support.h"

namespace kvs::test {

class ServerProcess {
 public:
  // `args` follow `kvserve serve --port 0`, after `launcher` (e.g. mpirun and its flags; its first word a path);
  // output goes to files in `dir`.
  ServerProcess(const TempDir& dir, std::vector<std::string> args, std::vector<std::string> launcher = {})
      : out_path_(dir.file("serve.out")) {
    err_path_ = dir.file("serve.err");
    std::vector<std::string> argv = std::move(launcher);
    for (const char* word : {KVS_BINARY, "serve", "--port", "0"}) argv.push_back(word);
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::freopen(out_path_.c_str(), "w", stdout);
      std::freopen(err_path_.c_str(), "w", stderr);
      std::vector<char*> c_argv;
      for (std::string& a : argv) c_argv.push_back(a.data());
      c_argv.push_back(nullptr);
      execv(c_argv[0], c_argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const std::regex listening(R"(on http://[^ ]+:(\d+))");
    while (std::chrono::steady_clock::now() < deadline && running()) {
      std::smatch m;
      const std::string out = read_file(out_path_);
      if (std::regex_search(out, m, listening)) {
        port_ = std::stoi(m[1]);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "kvserve serve did not start; stderr: " << read_file(err_path_);
  }
  ~ServerProcess() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool started() const { return port_ > 0; }
  int port() const { return port_; }
  std::string stdout_text() const { return read_file(out_path_); }
  std::string stderr_text() const { return read_file(err_path_); }

  // SIGTERM, then waits up to `limit`; returns the exit code (128 + signal if killed, -1 on timeout).
  int terminate(std::chrono::seconds limit = std::chrono::seconds(30)) {
    if (pid_ <= 0 || exit_code_ >= 0) return exit_code_;
    kill(pid_, SIGTERM);
    return wait_for_exit(limit);
  }
  int wait_for_exit(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  httplib::Client client(int read_timeout_s = 120) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(read_timeout_s, 0);
    c.set_connection_timeout(10, 0);
    return c;
  }

 private:
  bool running() {
    int status = 0;
    return waitpid(pid_, &status, WNOHANG) == 0;
  }

  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  int port_ = -1;
  int exit_code_ = -1;
};

struct HttpResult {
  int status = -1;
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

inline HttpResult post_json(httplib::Client& client, const std::string& path, const std::string& body,
                            const httplib::Headers& headers = {}) {
  auto res = client.Post(path.c_str(), headers, body, "application/json");
  if (!res) return {};
  return {res->status, res->body};
}

inline HttpResult get(httplib::Client& client, const std::string& path, const httplib::Headers& headers = {}) {
  auto res = client.Get(path.c_str(), headers);
  if (!res) return {};
  return {res->status, res->body};
}

// The data payloads of an SSE response body (up to and including "[DONE]").
inline std::vector<std::string> sse_events(const std::string& body) {
  server::SseParser parser;
  return parser.feed(body);
}

// The value of a metric line "name value" in Prometheus text; -1 when absent.
inline double metric_value(const std::string& text, const std::string& name) {
  const std::regex line("(^|\n)" + name + " ([0-9.eE+-]+)");
  std::smatch m;
  return std::regex_search(text, m, line) ? std::stod(m[2]) : -1.0;
}

// The completion text of a non-streamed /v1/completions response ("" if malformed).
inline std::string completion_text(const HttpResult& r) {
  const auto j = r.json();
  if (!j.is_object() || !j.contains("choices")) return "";
  return j["choices"][0].value("text", "");
}

}  // namespace kvs::test
