#include "server/sse_parser.h"

namespace kvs::server {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<std::string> events;
  size_t start = 0;
  while (true) {
    // Events end with a blank line; accept "\n\n" and "\r\n\r\n".
    size_t end = buffer_.find("\n\n", start);
    size_t crlf = buffer_.find("\r\n\r\n", start);
    size_t sep = 2;
    if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
      end = crlf;
      sep = 4;
    }
    if (end == std::string::npos) break;
    std::string_view event(buffer_.data() + start, end - start);
    std::string data;
    bool has_data = false;
    while (!event.empty()) {
      const size_t nl = event.find('\n');
      std::string_view line = event.substr(0, nl);
      event = nl == std::string_view::npos ? std::string_view() : event.substr(nl + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.rfind("data:", 0) != 0) continue;  // comments and other fields
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (has_data) data += '\n';
      data.append(line);
      has_data = true;
    }
    if (has_data) events.push_back(std::move(data));
    start = end + sep;
  }
  buffer_.erase(0, start);
  return events;
}

}  // namespace kvs::server
