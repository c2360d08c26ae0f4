#include "kv/tiers/block_file.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

namespace kvs {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'S', 'B', 'L', 'K', '0', '1'};
constexpr size_t kMaxTokens = 1 << 16;
constexpr size_t kMaxDescription = 1 << 12;

template <typename T>
void put(std::vector<std::byte>& out, T value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);  // x86-64 and every target here: little-endian
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T get(std::span<const std::byte> in, size_t offset) {
  T value;
  std::memcpy(&value, in.data() + offset, sizeof(T));
  return value;
}

}  // namespace

uint64_t block_payload_checksum(std::span<const std::byte> payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

std::vector<std::byte> encode_block_file(const TierBlockKey& key, std::string_view description,
                                         std::span<const TokenId> tokens, std::span<const std::byte> payload) {
  const size_t header_bytes = block_file_bytes(description.size(), tokens.size(), 0);
  std::vector<std::byte> out;
  out.reserve(header_bytes + payload.size());
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  put<uint32_t>(out, static_cast<uint32_t>(header_bytes));
  put<uint32_t>(out, static_cast<uint32_t>(tokens.size()));
  put<uint64_t>(out, key.format);
  put<uint64_t>(out, key.hash.low);
  put<uint64_t>(out, key.hash.high);
  put<uint64_t>(out, payload.size());
  put<uint64_t>(out, block_payload_checksum(payload));
  put<uint32_t>(out, static_cast<uint32_t>(description.size()));
  for (char c : description) out.push_back(static_cast<std::byte>(c));
  for (TokenId t : tokens) put<int32_t>(out, t);
  put<uint64_t>(out, XXH3_64bits(out.data(), out.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Expected<size_t> block_file_header_size(std::span<const std::byte> fixed) {
  if (fixed.size() < kBlockFileFixedHeader)
    return Status::corrupt(fmt::format("{} bytes are too few for a block file header", fixed.size()));
  if (std::memcmp(fixed.data(), kMagic, sizeof(kMagic)) != 0) return Status::corrupt("not a kvserve KV block file");
  const size_t header = get<uint32_t>(fixed, 8), tokens = get<uint32_t>(fixed, 12);
  const size_t description = get<uint32_t>(fixed, 56);
  if (tokens > kMaxTokens || description > kMaxDescription ||
      header != kBlockFileFixedHeader + description + tokens * sizeof(TokenId) + 8) {
    return Status::corrupt(fmt::format("a block file header of {} bytes for {} tokens and a {}-byte description",
                                       header, tokens, description));
  }
  return header;
}

Expected<BlockFileHeader> decode_block_file_header(std::span<const std::byte> header) {
  auto size = block_file_header_size(header);
  if (!size) return size.status();
  if (header.size() != *size)
    return Status::corrupt(fmt::format("a block file header of {} bytes read as {}", *size, header.size()));
  const uint64_t checksum = get<uint64_t>(header, *size - 8);
  if (XXH3_64bits(header.data(), *size - 8) != checksum)
    return Status::corrupt("the block file header's checksum fails");
  BlockFileHeader h;
  h.header_bytes = *size;
  h.key.format = get<uint64_t>(header, 16);
  h.key.hash = {.low = get<uint64_t>(header, 24), .high = get<uint64_t>(header, 32)};
  h.payload_bytes = get<uint64_t>(header, 40);
  h.payload_checksum = get<uint64_t>(header, 48);
  const size_t description = get<uint32_t>(header, 56), tokens = get<uint32_t>(header, 12);
  h.description.assign(reinterpret_cast<const char*>(header.data()) + kBlockFileFixedHeader, description);
  h.tokens.resize(tokens);
  std::memcpy(h.tokens.data(), header.data() + kBlockFileFixedHeader + description, tokens * sizeof(TokenId));
  return h;
}

}  // namespace kvs
