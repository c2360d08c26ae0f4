// One KV block on disk: a header naming what the bytes are, then the bytes.
//
//   offset  size  field
//   0       8     magic "KVSBLK01"
//   8       4     header bytes (everything before the payload), little-endian like every field
//   12      4     number of tokens
//   16      8     format fingerprint (kv/tiers/kv_tier.h)
//   24      16    chained block hash (low, high)
//   40      8     payload bytes
//   48      8     payload checksum: XXH3-64
//   56      4     format description bytes
//   60      ...   format description (UTF-8), then the tokens (int32 each)
//   ...     8     header checksum: XXH3-64 of every header byte before it
//   ...           payload
// A file is believed only when the magic, both checksums, the sizes and the format all agree.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/tiers/kv_tier.h"

namespace kvs {

inline constexpr size_t kBlockFileFixedHeader = 60;  // the header up to the description

struct BlockFileHeader {
  TierBlockKey key;
  std::string description;
  std::vector<TokenId> tokens;
  size_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  size_t header_bytes = 0;  // as read; encode_block_file computes it
};

// Bytes of the file of one block of `payload_bytes` with `num_tokens` tokens and a description of
// `description_bytes` (what encode_block_file writes; what the disk tier's budget counts).
inline size_t block_file_bytes(size_t description_bytes, size_t num_tokens, size_t payload_bytes) {
  return kBlockFileFixedHeader + description_bytes + num_tokens * sizeof(TokenId) + 8 + payload_bytes;
}

// The whole file of one block.
std::vector<std::byte> encode_block_file(const TierBlockKey& key, std::string_view description,
                                         std::span<const TokenId> tokens, std::span<const std::byte> payload);
// The header's total size from its fixed part (kBlockFileFixedHeader bytes), or why those bytes are not one.
Expected<size_t> block_file_header_size(std::span<const std::byte> fixed);
// Parses and checks a whole header (block_file_header_size bytes).
Expected<BlockFileHeader> decode_block_file_header(std::span<const std::byte> header);
uint64_t block_payload_checksum(std::span<const std::byte> payload);

}  // namespace kvs
