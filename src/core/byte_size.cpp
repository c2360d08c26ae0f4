#include "core/byte_size.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <iterator>
#include <string>

namespace kvs {

Expected<size_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0)
    return Status::invalid_argument(fmt::format("'{}' is not a byte size (e.g. 512MiB, 2GiB, 1000000)", text));
  double number = 0;
  try {
    number = std::stod(s.substr(0, i));
  } catch (...) {
    return Status::invalid_argument(fmt::format("'{}' is not a byte size (e.g. 512MiB, 2GiB, 1000000)", text));
  }
  std::string unit = s.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kib" || unit == "k")
    scale = 1024.0;
  else if (unit == "mib" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else
    return Status::invalid_argument(
        fmt::format("unknown unit '{}' in byte size '{}' (use KiB, MiB, GiB, KB, MB, GB)", s.substr(i), text));
  const double bytes = number * scale;
  if (!(bytes >= 0) || bytes > 1e18)
    return Status::invalid_argument(fmt::format("byte size '{}' is out of range", text));
  return static_cast<size_t>(std::llround(bytes));
}

std::string format_byte_size(uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace kvs
