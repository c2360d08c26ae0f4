// Paths and small helpers shared by the tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace kvs::test {

inline std::string shared_path(const std::string& relative) { return std::string(KVS_SHARED_DIR) + "/" + relative; }
inline std::string default_model_path() { return KVS_DEFAULT_MODEL_PATH; }
inline std::string other_tool_model_path() { return shared_path("models/stories260K/stories260K.gguf"); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// A fresh directory under the build tree for files a test writes; removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : path_(std::filesystem::path(KVS_BUILD_DIR) / "test-tmp" / name) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace kvs::test
