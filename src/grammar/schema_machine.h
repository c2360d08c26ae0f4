// Structured outputs' recognizer: reads the output one byte at a time, as JsonMachine does for JSON mode, and refuses
// the first byte after which no instance of a compiled JSON Schema (json_schema.h) could follow. Properties come in
// the schema's order (optional ones may be skipped), strings within their lengths, arrays within their item counts,
// enums and consts as the texts of their values; untyped parts are any JSON value (JsonMachine).
//
// The state is a set of threads, one per way the output so far can be read (anyOf alternatives that agree so far:
// anyOf [{"type":"string"}, {"type":"null"}] keeps one thread once '"' or 'n' is written); each thread is a stack
// of frames, one per open value, and the lexer of the innermost value. completion_length() is the fewest bytes that
// finish some thread (each value's shortest instance, each open container's required rest), so the constraint can
// close the document within the tokens left as it does in JSON mode. The state is copied to try a token.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/json_lexers.h"
#include "grammar/json_machine.h"
#include "grammar/json_schema.h"

namespace kvs {

class SchemaMachine {
 public:
  static constexpr size_t kMaxDepth = 24;  // open values (deeper values of untyped parts are JsonMachine's)
  static constexpr size_t kMaxThreads = 16;
  static constexpr size_t kMaxWhitespaceRun = 16;
  static constexpr uint8_t kMaxNumberDigits = 64;
  static constexpr uint8_t kMaxIntegerDigits = 18;  // an integer fits an int64

  // `schema` must outlive the machine (the constraint holds it).
  explicit SchemaMachine(const JsonSchema& schema);

  // Reads one byte; false (and the state unchanged) when no instance continues with it.
  bool feed(uint8_t c);
  bool feed(std::string_view bytes);
  // An instance has been read (generation can stop).
  bool complete() const;
  // Inside a string, between characters: how many plain bytes (0x20..0x7e but '"' and '\') may follow, each a
  // character of its own that changes nothing else (the masker's fast path); SIZE_MAX: any, 0: not in a string.
  size_t plain_string_room() const;
  // The fewest bytes that complete an instance from here.
  size_t completion_length() const;

 private:
  enum class Phase : uint8_t {
    kStart,      // the value has not begun (whitespace may come)
    kIn,         // a string, number, literal or untyped value is being read (the thread's lexers)
    kOpen,       // object: after '{'
    kComma,      // object: after ','
    kKey,        // object: in a key (aux: the key trie's node)
    kColon,      // object: after the key of property aux
    kValue,      // object or array: the value is the frame above
    kAfter,      // object or array: after a value
    kArrayOpen,  // array: after '['
    kArrayNext,  // array: after ','
  };
  struct Frame {
    uint16_t node = 0;
    Phase phase = Phase::kStart;
    uint32_t count = 0;  // object: the first property that may still come; array: the values written
    uint32_t aux = 0;    // object: the key trie's node (kKey) or the property (kColon); literals: the trie's node
  };
  struct Thread {
    std::array<Frame, kMaxDepth> frames;
    uint8_t depth = 0;
    uint8_t whitespace = 0;  // the run of whitespace bytes so far
    bool done = false;       // the root value is complete
    JsonStringLexer string;
    JsonNumberLexer number;
    JsonMachine any{false};
  };

  static bool push(Thread& t, uint32_t node);  // a value is due (false past kMaxDepth)
  void step(Thread t, uint8_t c);              // appends the threads that read c to threads_
  // step's phases, `f` the top frame of `t` over `node` (inlined into step: they run for every byte of every thread)
  [[gnu::always_inline]] inline void step_in_scalar(Thread& t, Frame& f, const JsonSchema::Node& node, uint8_t c);
  [[gnu::always_inline]] inline void step_between_members(Thread& t, Frame& f, const JsonSchema::Node& node, uint8_t c);
  [[gnu::always_inline]] inline void step_array_item(Thread& t, Frame& f, const JsonSchema::Node& node, uint8_t c);
  void start(Thread t, uint8_t c, int expansions);  // the top frame (kStart) reads its first byte (forks at anyOf)
  void value_ended(Thread& t) const;
  bool whitespace(Thread& t) const;  // counts a whitespace byte; false past the run limit
  void skip_whitespace(Thread t);    // adds t having read a whitespace byte, if the run allows
  uint64_t allowed_properties(const JsonSchema::Node& object, uint32_t next) const;
  size_t property_completion(const JsonSchema::Node& object, uint64_t candidates, size_t key_bytes_read) const;
  size_t thread_completion(const Thread& t) const;
  bool can_end_at_root(const Thread& t) const;
  void add(Thread t);

  const JsonSchema* schema_;
  std::vector<Thread> threads_;
  size_t added_ = 0;  // threads added by this byte
};

}  // namespace kvs
