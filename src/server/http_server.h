// The HTTP transport (cpp-httplib): routing, API-key auth, body size limit, OpenAI-style error
// bodies, and streaming a ResponsePump through a chunked response. Routes:
//   POST /v1/completions, POST /v1/chat/completions   (auth when an API key is set)
//   GET  /v1/models, GET /v1/models/{id}              (auth when an API key is set)
//   GET  /health, GET /metrics (Prometheus text)      (never auth: for probes and scrapers)
//   OPTIONS *                                         (CORS preflight, with --cors-origin: never auth, as browsers
//                                                      send no credentials in a preflight)
// CORS (browsers): with allowed origins configured, a request whose Origin is one of them (or any, with "*") gets
// Access-Control-Allow-Origin on every response (streams too) and its preflight the methods and headers it may use;
// without, no CORS header is sent and browsers on other origins are refused, as before.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine_loop.h"
#include "server/completion_service.h"
#include "server/served_model.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace kvs::server {

class HttpListener;  // httplib::Server with a larger listen backlog (http_server.cpp)

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (bind() says which)
  std::string api_key;  // empty: no authentication
  size_t max_body_bytes = size_t{1} << 20;
  size_t threads = 64;  // connections served at once (each streaming response holds one)
  time_t keep_alive_timeout_s = 5;
  bool log_requests = false;  // one line per request on stderr
  // --cors-origin: origins whose pages may call the API ("http://localhost:3000", or "*" for any); empty: none.
  std::vector<std::string> cors_origins;

  Status validate() const;
};

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, CompletionService& completions, EngineLoop& loop, const ServedModel& model);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (useful with port 0).
  Expected<int> bind();
  // Serves until stop(); returns once every connection thread has finished.
  Status listen();
  void stop();  // thread-safe; in-flight responses end and cancel their requests

 private:
  void install_routes();
  bool authorized(const httplib::Request& req) const;
  // The Access-Control-Allow-Origin value for this request's Origin, or "" when it gets none.
  std::string allowed_origin(const httplib::Request& req) const;
  void handle_completion(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);

  HttpServerConfig config_;
  CompletionService& completions_;
  EngineLoop& loop_;
  const ServedModel& model_;
  std::unique_ptr<HttpListener> server_;
};

}  // namespace kvs::server
