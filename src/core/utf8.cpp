#include "core/utf8.h"

#include "core/status.h"

namespace kvs::utf8 {
namespace {

// Number of bytes announced by a lead byte; 0 for bytes that cannot start a character.
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte, overlong lead C0/C1, or F5..FF
}

// Valid range of the second byte for a lead byte (Unicode table 3-7); later bytes are 80..BF.
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;  // no overlong 3-byte forms
    case 0xED: return b >= 0x80 && b <= 0x9F;  // no surrogates
    case 0xF0: return b >= 0x90 && b <= 0xBF;  // no overlong 4-byte forms
    case 0xF4: return b >= 0x80 && b <= 0x8F;  // nothing above U+10FFFF
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool continuation_ok(uint8_t lead, size_t index, uint8_t b) {
  return index == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
}

}  // namespace

DecodedChar decode(std::string_view text, size_t pos) {
  KVS_ASSERT(pos < text.size(), "utf8::decode at {} of a {}-byte string", pos, text.size());
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t n = sequence_length(lead);
  if (n == 0) return {kReplacementChar, 1, false};
  if (n == 1) return {lead, 1, true};
  uint32_t cp = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if (pos + i >= text.size() || !continuation_ok(lead, i, static_cast<uint8_t>(text[pos + i]))) {
      return {kReplacementChar, i, false};  // the maximal ill-formed subpart: one U+FFFD
    }
    cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  }
  return {cp, n, true};
}

void append(std::string& out, uint32_t cp) {
  KVS_ASSERT(cp <= 0x10FFFF, "code point {:#x} is above U+10FFFF", cp);
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t complete_prefix_length(std::string_view text) {
  // Only the last 3 bytes can belong to an unfinished character.
  const size_t tail_start = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t start = tail_start; start < text.size(); ++start) {
    const auto lead = static_cast<uint8_t>(text[start]);
    const size_t n = sequence_length(lead);
    if (n <= 1 || start + n <= text.size()) continue;  // complete, ASCII or invalid lead
    bool prefix_ok = true;
    for (size_t i = 1; start + i < text.size(); ++i) {
      prefix_ok = prefix_ok && continuation_ok(lead, i, static_cast<uint8_t>(text[start + i]));
    }
    if (prefix_ok) return start;  // text[start..] may still become a character
  }
  return text.size();
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const DecodedChar c = decode(text, pos);
    if (c.valid) {
      out.append(text.substr(pos, c.length));
    } else {
      append(out, kReplacementChar);
    }
    pos += c.length;
  }
  return out;
}

}  // namespace kvs::utf8
