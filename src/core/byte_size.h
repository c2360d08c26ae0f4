// Byte sizes as people write them on a command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kvs {

// "512MiB", "2GiB", "1.5GB", "1000000" -> bytes. Binary (KiB/MiB/GiB/TiB) and decimal (KB/MB/GB/TB) units.
Expected<size_t> parse_byte_size(std::string_view text);
// Bytes for people: "812 B", "3.4 MiB", "70.2 GiB" (binary units, one decimal above bytes).
std::string format_byte_size(uint64_t bytes);

}  // namespace kvs
