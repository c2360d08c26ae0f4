// Byte sizes as people write them on a command line.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace kvs {

// "512MiB", "2GiB", "1.5GB", "1000000" -> bytes. Binary (KiB/MiB/GiB/TiB) and decimal (KB/MB/GB/TB) units.
Expected<size_t> parse_byte_size(std::string_view text);

}  // namespace kvs
