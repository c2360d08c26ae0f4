// Client side of server-sent events: bytes as they arrive -> the `data:` payload of each complete
// event. Comment lines (": keep-alive") and other fields are skipped; multi-line data is joined
// with '\n' as the SSE specification says. Used by the load generator and the tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvs::server {

class SseParser {
 public:
  // Payloads of the events completed by `bytes` (an event ends with a blank line).
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string buffer_;
};

}  // namespace kvs::server
