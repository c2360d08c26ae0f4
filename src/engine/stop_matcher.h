// Finds stop strings in streamed text. Text that could still be the start of a stop string is
// held back, so a client never sees part of a stop string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvs {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Result {
    std::string emit;      // text now safe to send
    bool stopped = false;  // a stop string was found; `emit` ends right before it
  };
  Result push(std::string_view text);
  std::string finish();  // what was held back, when generation ends without a stop

 private:
  std::vector<std::string> stops_;
  std::string pending_;
};

}  // namespace kvs
