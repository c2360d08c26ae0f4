#include <fmt/format.h>

#include <fstream>

#include "cli/commands.h"

namespace kvs::cli {

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw CommandError(fmt::format("cannot write {}", path));
}

}  // namespace kvs::cli
