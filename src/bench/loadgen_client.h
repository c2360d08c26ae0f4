// One streaming completion request, timed from the client: what the load generator measures.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bench/loadgen.h"

namespace kvs::bench {

struct StreamTiming {
  bool ok = false;   // HTTP 200 and the stream ended with [DONE]
  bool cut = false;  // stopped by the deadline while still streaming
  std::string error;
  double ttft_s = -1.0;          // to the first chunk with text; < 0 if none came
  std::vector<double> gaps_s;    // between consecutive chunks with text
  size_t completion_tokens = 0;  // from the usage chunk (else the number of text chunks)
  size_t prompt_tokens = 0;      // from the usage chunk
  size_t cached_tokens = 0;      // usage.prompt_tokens_details.cached_tokens: prompt tokens the server reused
  std::string text;              // the completion's text (choice 0's), all chunks together
};

// GET /v1/models once: fails (naming the URL and the reason) when no kvserve answers there.
Status probe_server(const LoopbackUrl& url, const std::string& api_key);

// POSTs `body` (a /v1/completions request with stream true) on a fresh connection and reads the
// event stream until [DONE], an error, or `deadline`.
StreamTiming stream_completion(const LoopbackUrl& url, const std::string& body, const std::string& api_key,
                               std::chrono::steady_clock::time_point deadline);

}  // namespace kvs::bench
