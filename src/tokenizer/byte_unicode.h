// GPT-2's reversible map between bytes and printable code points: byte-level BPE vocabularies
// store every byte as a visible character ("Ġ" is the space byte 0x20, "Ċ" is '\n').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvs::byte_unicode {

// Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves; the other 68 bytes, in order,
// to U+0100..U+0143.
uint32_t code_point_of(uint8_t byte);
std::optional<uint8_t> byte_of(uint32_t code_point);  // nullopt for code points outside the map

// Each byte of `bytes` as the UTF-8 of its code point.
std::string encode(std::string_view bytes);
// The inverse of encode. Characters outside the map (never in a well-formed vocabulary) are
// kept as their own UTF-8 bytes.
std::string decode(std::string_view text);

}  // namespace kvs::byte_unicode
