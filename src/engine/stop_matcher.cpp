#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace kvs {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  pending_.append(text);
  // Earliest complete match wins.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    Result r{pending_.substr(0, first), true};
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  Result r{pending_.substr(0, pending_.size() - hold), false};
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopMatcher::finish() { return std::exchange(pending_, {}); }

}  // namespace kvs
