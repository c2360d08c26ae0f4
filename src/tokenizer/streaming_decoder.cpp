#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

std::string StreamingDecoder::push(TokenId id) {
  std::string piece = tokenizer_.token_bytes(id);
  if (piece.empty()) return {};
  if (first_) {
    if (tokenizer_.strips_leading_space() && piece.front() == ' ') piece.erase(0, 1);
    first_ = false;
  }
  pending_ += piece;
  // Emit everything except an unfinished character at the end; ill-formed bytes before it can
  // never heal, so they go out now as U+FFFD.
  const size_t complete = utf8::complete_prefix_length(pending_);
  std::string out = utf8::sanitize(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvs
