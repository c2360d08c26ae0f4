// Reading the shared tokenizer fixtures: llama.cpp's test-tokenizer-0 pairs (.inp strings separated
// by "\n__ggml_vocab_test__\n", with one after the last string too; .out one line of ids per string).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/ids.h"
#include "gguf/gguf_test_util.h"  // shared_path

namespace kvs::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::vector<std::string> read_test_strings(const std::string& path) {
  const std::string text = read_file(path);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> strings;
  size_t start = 0;
  for (size_t hit = text.find(separator); hit != std::string::npos; hit = text.find(separator, start)) {
    strings.push_back(text.substr(start, hit - start));
    start = hit + separator.size();
  }
  if (start < text.size()) strings.push_back(text.substr(start));  // no trailing separator
  return strings;
}

inline std::vector<std::vector<TokenId>> read_expected_ids(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<TokenId>> lines;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::vector<TokenId> ids;
    for (TokenId id; fields >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

}  // namespace kvs::testing
