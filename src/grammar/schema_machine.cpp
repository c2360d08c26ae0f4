#include "grammar/schema_machine.h"

#include <algorithm>
#include <bit>

namespace kvs {
namespace {

using Kind = JsonSchema::Kind;

bool is_whitespace(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t plus(size_t a, size_t b) { return std::min(a + b, JsonSchema::kUnbounded); }
size_t times(size_t a, size_t n) {
  return n == 0 ? 0 : a >= JsonSchema::kUnbounded / n ? JsonSchema::kUnbounded : a * n;
}

// Bytes of `values` more array items and the ']' (each item after a comma unless `first`).
size_t items_and_close(size_t values, size_t shortest, bool first) {
  if (values == 0) return 1;
  return plus(plus(times(shortest, values), values - (first ? 1 : 0)), 1);
}

constexpr int kMaxExpansions = 8;  // anyOf inside anyOf (a $ref cycle of anyOfs ends here)

}  // namespace

SchemaMachine::SchemaMachine(const JsonSchema& schema) : schema_(&schema) {
  Thread t;
  push(t, schema.root());
  threads_.push_back(t);
}

bool SchemaMachine::push(Thread& t, uint32_t node) {
  if (t.depth == kMaxDepth) return false;
  t.frames[t.depth++] = Frame{.node = static_cast<uint16_t>(node), .phase = Phase::kStart, .count = 0, .aux = 0};
  return true;
}

bool SchemaMachine::feed(uint8_t c) {
  const size_t before = threads_.size();
  added_ = 0;
  for (size_t i = 0; i < before; ++i) step(threads_[i], c);
  if (added_ == 0) return false;
  threads_.erase(threads_.begin(), threads_.begin() + static_cast<std::ptrdiff_t>(before));
  return true;
}

bool SchemaMachine::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

void SchemaMachine::add(Thread t) {
  if (added_ == kMaxThreads) return;  // the output stays an instance; fewer readings of it are kept
  threads_.push_back(std::move(t));
  ++added_;
}

bool SchemaMachine::whitespace(Thread& t) const {
  if (t.whitespace >= kMaxWhitespaceRun) return false;
  ++t.whitespace;
  return true;
}

void SchemaMachine::skip_whitespace(Thread t) {
  if (whitespace(t)) add(std::move(t));
}

void SchemaMachine::value_ended(Thread& t) const {
  --t.depth;
  t.whitespace = 0;
  if (t.depth == 0) {
    t.done = true;
    return;
  }
  Frame& parent = t.frames[t.depth - 1];
  if (schema_->node(parent.node).kind == Kind::kArray) ++parent.count;
  parent.phase = Phase::kAfter;
}

// The properties that may come next: from `next` up to and including the first required one.
uint64_t SchemaMachine::allowed_properties(const JsonSchema::Node& object, uint32_t next) const {
  uint64_t mask = 0;
  for (size_t p = next; p < object.properties.size(); ++p) {
    mask |= uint64_t{1} << p;
    if (object.properties[p].required) break;
  }
  return mask;
}

// The fewest bytes that finish the object through one of `candidates` whose key's first `key_bytes_read` bytes are
// written: the rest of its key, ':', its value, the required properties after it, '}'.
size_t SchemaMachine::property_completion(const JsonSchema::Node& object, uint64_t candidates,
                                          size_t key_bytes_read) const {
  size_t best = JsonSchema::kUnbounded;
  for (uint64_t bits = candidates; bits != 0; bits &= bits - 1) {
    const auto p = static_cast<size_t>(std::countr_zero(bits));
    const JsonSchema::Property& prop = object.properties[p];
    const size_t rest = plus(plus(prop.key.size() - key_bytes_read + 1, schema_->node(prop.node).shortest),
                             schema_->rest_of_object(object, p + 1, false));
    best = std::min(best, rest);
  }
  return best;
}

void SchemaMachine::step(Thread t, uint8_t c) {
  if (t.done) {
    if (is_whitespace(c)) skip_whitespace(std::move(t));
    return;
  }
  Frame& f = t.frames[t.depth - 1];
  const JsonSchema::Node& node = schema_->node(f.node);
  switch (f.phase) {
    case Phase::kStart:
      if (is_whitespace(c)) return skip_whitespace(std::move(t));
      start(std::move(t), c, 0);
      return;
    case Phase::kIn: return step_in_scalar(t, f, node, c);
    case Phase::kOpen:
    case Phase::kComma:
    case Phase::kAfter: return step_between_members(t, f, node, c);
    case Phase::kKey: {
      const int64_t child = schema_->trie(f.aux).child(c);
      if (child < 0) return;
      const JsonSchema::TrieNode& next = schema_->trie(static_cast<uint32_t>(child));
      if ((next.below & allowed_properties(node, f.count)) == 0) return;
      if (next.leaf) {
        f.phase = Phase::kColon;
        f.aux = next.property;
        f.count = next.property + 1;
      } else {
        f.aux = static_cast<uint32_t>(child);
      }
      add(std::move(t));
      return;
    }
    case Phase::kColon:
      if (is_whitespace(c)) return skip_whitespace(std::move(t));
      if (c != ':') return;
      t.whitespace = 0;
      f.phase = Phase::kValue;
      if (push(t, node.properties[f.aux].node)) add(std::move(t));
      return;
    case Phase::kArrayOpen:
    case Phase::kArrayNext: return step_array_item(t, f, node, c);
    case Phase::kValue: return;  // (the value's own frame is on top)
  }
}

// Inside a string, number, literal or value of any shape (kIn).
void SchemaMachine::step_in_scalar(Thread& t, Frame& f, const JsonSchema::Node& node, uint8_t c) {
  switch (node.kind) {
    case Kind::kString:
      switch (t.string.step(c)) {
        case JsonStringLexer::Step::kRefused: return;
        case JsonStringLexer::Step::kMore: break;
        case JsonStringLexer::Step::kClosed: value_ended(t); break;
      }
      add(std::move(t));
      return;
    case Kind::kNumber:
    case Kind::kInteger:
      switch (t.number.step(c)) {
        case JsonNumberLexer::Step::kRefused: return;
        case JsonNumberLexer::Step::kMore: add(std::move(t)); return;
        case JsonNumberLexer::Step::kEnded:  // the number ended before c
          value_ended(t);
          step(std::move(t), c);
          return;
      }
      return;
    case Kind::kLiterals: {
      const JsonSchema::TrieNode& at = schema_->trie(f.aux);
      const int64_t child = at.child(c);
      if (child >= 0) {
        f.aux = static_cast<uint32_t>(child);
        const JsonSchema::TrieNode& next = schema_->trie(f.aux);
        if (next.leaf && next.children.empty()) value_ended(t);
        add(std::move(t));
      } else if (at.leaf) {  // a literal that another one extends (1 of [1, 12]) ended before c
        value_ended(t);
        step(std::move(t), c);
      }
      return;
    }
    case Kind::kAny:
      if (t.any.feed(c)) {
        if (t.any.complete()) value_ended(t);
        add(std::move(t));
      } else if (t.any.value_can_end()) {  // a number ended before c
        value_ended(t);
        step(std::move(t), c);
      }
      return;
    default: return;
  }
}

// An object after '{' or ',' (a key may start) or after a member, or an array after a value (kAfter).
void SchemaMachine::step_between_members(Thread& t, Frame& f, const JsonSchema::Node& node, uint8_t c) {
  if (is_whitespace(c)) return skip_whitespace(std::move(t));
  if (node.kind == Kind::kObject && c == '"' && f.phase != Phase::kAfter) {  // a key's first byte
    const int64_t child = schema_->trie(node.key_trie).child(c);
    if (child < 0 || (schema_->trie(static_cast<uint32_t>(child)).below & allowed_properties(node, f.count)) == 0)
      return;
    f.phase = Phase::kKey;
    f.aux = static_cast<uint32_t>(child);
    t.whitespace = 0;
    add(std::move(t));
    return;
  }
  const bool array = node.kind == Kind::kArray;
  const bool more = array ? f.count < node.max_items : allowed_properties(node, f.count) != 0;
  const bool may_close = array ? f.count >= node.min_items : node.required_tail[f.count] == 0;
  if (c == ',' && f.phase == Phase::kAfter && more) {
    f.phase = array ? Phase::kArrayNext : Phase::kComma;
  } else if (c == (array ? ']' : '}') && f.phase != Phase::kComma && may_close) {
    value_ended(t);
  } else {
    return;
  }
  t.whitespace = 0;
  add(std::move(t));
}

// An array after '[' or ',': its first or next item, or (after '[') its end.
void SchemaMachine::step_array_item(Thread& t, Frame& f, const JsonSchema::Node& node, uint8_t c) {
  if (is_whitespace(c)) return skip_whitespace(std::move(t));
  if (f.phase == Phase::kArrayOpen && c == ']') {
    if (node.min_items > 0) return;
    t.whitespace = 0;
    value_ended(t);
    add(std::move(t));
    return;
  }
  if (node.max_items == 0) return;
  f.phase = Phase::kValue;
  if (push(t, node.items)) start(std::move(t), c, 0);
}

void SchemaMachine::start(Thread t, uint8_t c, int expansions) {
  Frame& f = t.frames[t.depth - 1];
  const JsonSchema::Node& node = schema_->node(f.node);
  t.whitespace = 0;
  switch (node.kind) {
    case Kind::kAnyOf:
      if (expansions == kMaxExpansions) return;
      for (uint32_t alternative : node.alternatives) {
        Thread copy = t;
        copy.frames[copy.depth - 1].node = static_cast<uint16_t>(alternative);
        start(std::move(copy), c, expansions + 1);
      }
      return;
    case Kind::kObject:
      if (c != '{') return;
      f.phase = Phase::kOpen;
      f.count = 0;
      break;
    case Kind::kArray:
      if (c != '[') return;
      f.phase = Phase::kArrayOpen;
      f.count = 0;
      break;
    case Kind::kString:
      if (c != '"') return;
      t.string = JsonStringLexer(node.min_length, node.max_length);
      f.phase = Phase::kIn;
      break;
    case Kind::kNumber:
    case Kind::kInteger:
      t.number = node.kind == Kind::kInteger ? JsonNumberLexer(true, kMaxIntegerDigits)
                                             : JsonNumberLexer(false, kMaxNumberDigits);
      if (!t.number.start(c)) return;
      f.phase = Phase::kIn;
      break;
    case Kind::kLiterals: {
      const int64_t child = schema_->trie(node.literal_trie).child(c);
      if (child < 0) return;
      f.phase = Phase::kIn;
      f.aux = static_cast<uint32_t>(child);
      const JsonSchema::TrieNode& at = schema_->trie(f.aux);
      if (at.leaf && at.children.empty()) value_ended(t);
      break;
    }
    case Kind::kAny:
      t.any = JsonMachine(node.object_only);
      if (!t.any.feed(c)) return;
      f.phase = Phase::kIn;
      if (t.any.complete()) value_ended(t);
      break;
  }
  add(std::move(t));
}

size_t SchemaMachine::thread_completion(const Thread& t) const {
  if (t.done) return 0;
  size_t total = 0;
  for (size_t i = t.depth; i-- > 0;) {
    const Frame& f = t.frames[i];
    const JsonSchema::Node& node = schema_->node(f.node);
    const size_t item = node.kind == Kind::kArray ? schema_->node(node.items).shortest : 0;
    const auto still_due = [&](size_t written) { return node.min_items > written ? node.min_items - written : 0; };
    size_t rest = 0;
    switch (f.phase) {
      case Phase::kStart: rest = node.shortest; break;
      case Phase::kIn:
        switch (node.kind) {
          case Kind::kString: rest = t.string.completion_length(); break;
          case Kind::kNumber:
          case Kind::kInteger: rest = t.number.completion_length(); break;
          case Kind::kLiterals: rest = schema_->trie(f.aux).to_leaf; break;
          default: rest = t.any.completion_length(); break;
        }
        break;
      case Phase::kOpen: rest = schema_->rest_of_object(node, 0, true); break;
      case Phase::kComma: rest = property_completion(node, allowed_properties(node, f.count), 0); break;
      case Phase::kKey: {
        const JsonSchema::TrieNode& at = schema_->trie(f.aux);
        rest = property_completion(node, at.below & allowed_properties(node, f.count), at.depth);
        break;
      }
      case Phase::kColon:
        rest = plus(plus(1, schema_->node(node.properties[f.aux].node).shortest),
                    schema_->rest_of_object(node, f.count, false));
        break;
      case Phase::kValue:
        rest = node.kind == Kind::kArray ? items_and_close(still_due(f.count + 1), item, false)
                                         : schema_->rest_of_object(node, f.count, false);
        break;
      case Phase::kAfter:
        rest = node.kind == Kind::kArray ? items_and_close(still_due(f.count), item, false)
                                         : schema_->rest_of_object(node, f.count, false);
        break;
      case Phase::kArrayOpen: rest = items_and_close(still_due(0), item, true); break;
      case Phase::kArrayNext: rest = items_and_close(std::max<size_t>(still_due(f.count), 1), item, true); break;
    }
    total = plus(total, rest);
  }
  return total;
}

size_t SchemaMachine::completion_length() const {
  size_t best = JsonSchema::kUnbounded;
  for (const Thread& t : threads_) best = std::min(best, thread_completion(t));
  return best;
}

bool SchemaMachine::can_end_at_root(const Thread& t) const {
  if (t.done) return true;
  if (t.depth != 1 || t.frames[0].phase != Phase::kIn) return false;
  switch (schema_->node(t.frames[0].node).kind) {
    case Kind::kNumber:
    case Kind::kInteger: return t.number.can_end();
    case Kind::kLiterals: return schema_->trie(t.frames[0].aux).leaf;
    case Kind::kAny: return t.any.value_can_end();
    default: return false;
  }
}

bool SchemaMachine::complete() const {
  return std::any_of(threads_.begin(), threads_.end(), [this](const Thread& t) { return can_end_at_root(t); });
}

size_t SchemaMachine::plain_string_room() const {
  if (threads_.size() != 1) return 0;
  const Thread& t = threads_[0];
  if (t.done || t.frames[t.depth - 1].phase != Phase::kIn) return 0;
  if (schema_->node(t.frames[t.depth - 1].node).kind != Kind::kString || !t.string.between_characters()) return 0;
  const uint32_t room = t.string.room();
  return room == JsonStringLexer::kNoLimit ? SIZE_MAX : room;
}

}  // namespace kvs
