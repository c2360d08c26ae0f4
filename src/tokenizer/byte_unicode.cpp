#include "tokenizer/byte_unicode.h"

#include <array>

#include "core/utf8.h"

namespace kvs::byte_unicode {
namespace {

constexpr bool maps_to_itself(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint16_t, 256> make_byte_table() {
  std::array<uint16_t, 256> table{};
  uint16_t next_shifted = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    table[b] = maps_to_itself(b) ? static_cast<uint16_t>(b) : next_shifted++;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kByteToCodePoint = make_byte_table();
constexpr uint32_t kFirstShifted = 256;
constexpr uint32_t kNumShifted = 68;  // 256 - 188 bytes that map to themselves

constexpr std::array<uint8_t, kNumShifted> make_shifted_table() {
  std::array<uint8_t, kNumShifted> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    if (!maps_to_itself(b)) table[kByteToCodePoint[b] - kFirstShifted] = static_cast<uint8_t>(b);
  }
  return table;
}

constexpr std::array<uint8_t, kNumShifted> kShiftedToByte = make_shifted_table();
static_assert(kByteToCodePoint[' '] == 0x120 && kByteToCodePoint['\n'] == 0x10A);  // "Ġ", "Ċ"

}  // namespace

uint32_t code_point_of(uint8_t byte) { return kByteToCodePoint[byte]; }

std::optional<uint8_t> byte_of(uint32_t cp) {
  if (cp < 256 && maps_to_itself(cp)) return static_cast<uint8_t>(cp);
  if (cp >= kFirstShifted && cp < kFirstShifted + kNumShifted) return kShiftedToByte[cp - kFirstShifted];
  return std::nullopt;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, code_point_of(static_cast<uint8_t>(c)));
  return out;
}

std::string decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::DecodedChar c = utf8::decode(text, pos);
    const std::optional<uint8_t> byte = c.valid ? byte_of(c.code_point) : std::nullopt;
    if (byte) {
      out += static_cast<char>(*byte);
    } else {
      out.append(text.substr(pos, c.length));
    }
    pos += c.length;
  }
  return out;
}

}  // namespace kvs::byte_unicode
