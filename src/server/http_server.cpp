#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/metrics.h"

namespace kvs::server {
namespace {

// "application/json" alone would make httplib gzip the body when the client accepts it, which
// buffers the heartbeat bytes that detect a closed connection; with a charset it is sent as is.
constexpr const char* kJsonStreamType = "application/json; charset=utf-8";

void write_error(httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(error.to_json().dump(), "application/json");
}

// Compares without an early exit, so the time taken does not reveal how much of a key matched.
bool same_secret(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

bool is_public_path(const std::string& path) { return path == "/health" || path == "/metrics"; }

// cpp-httplib's limit on application/x-www-form-urlencoded bodies (CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH,
// compiled into Debian's shared library).
constexpr size_t kFormBodyLimit = 8192;

}  // namespace

// httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into the shared
// library): a burst of new connections beyond it has its SYNs dropped and retried a second later,
// which shows up as 1 s of time-to-first-token. Linux lets listen() be called again on a listening
// socket to raise the backlog; this subclass exposes the socket to do so.
//
// It also stops without httplib's is_running() guard: Server::stop() does nothing before
// listen_after_bind() has set that flag, so a stop (Ctrl-C) arriving just before it would be lost.
// Closing the socket in any state makes a later listen_after_bind() return at once.
class HttpListener : public httplib::Server {
 public:
  bool raise_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
  void close_listener() {
    const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock == INVALID_SOCKET) return;
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
};

namespace {

constexpr int kListenBacklog = 512;

}  // namespace

Status HttpServerConfig::validate() const {
  if (port < 0 || port > 65535) return Status::invalid_argument(fmt::format("port must be 0..65535, got {}", port));
  if (threads == 0) return Status::invalid_argument("HTTP threads must be at least 1, got 0");
  if (max_body_bytes == 0) return Status::invalid_argument("the body size limit must be positive, got 0");
  return Status::ok();
}

HttpServer::HttpServer(HttpServerConfig config, CompletionService& completions, EngineLoop& loop,
                       const ServedModel& model)
    : config_(std::move(config)),
      completions_(completions),
      loop_(loop),
      model_(model),
      server_(std::make_unique<HttpListener>()) {
  const size_t threads = config_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(config_.max_body_bytes);
  server_->set_keep_alive_timeout(config_.keep_alive_timeout_s);
  server_->set_tcp_nodelay(true);
  install_routes();
}

HttpServer::~HttpServer() { stop(); }

Expected<int> HttpServer::bind() {
  const int port = config_.port == 0 ? server_->bind_to_any_port(config_.host)
                                     : (server_->bind_to_port(config_.host, config_.port) ? config_.port : -1);
  if (port <= 0) {
    return Status::io_error(fmt::format("cannot listen on {}:{}: {}", config_.host, config_.port,
                                        errno ? std::strerror(errno) : "bind failed"));
  }
  if (!server_->raise_backlog(kListenBacklog)) {
    return Status::io_error(fmt::format("cannot raise the listen backlog of {}:{} to {}: {}", config_.host, port,
                                        kListenBacklog, std::strerror(errno)));
  }
  return port;
}

Status HttpServer::listen() {
  if (!server_->listen_after_bind()) return Status::io_error("the HTTP listener stopped with an error");
  return Status::ok();
}

void HttpServer::stop() {
  if (server_) server_->close_listener();
}

std::string HttpServer::allowed_origin(const httplib::Request& req) const {
  if (config_.cors_origins.empty() || !req.has_header("Origin")) return "";
  const std::string origin = req.get_header_value("Origin");
  for (const std::string& allowed : config_.cors_origins) {
    if (allowed == "*") return "*";
    if (allowed == origin) return origin;
  }
  return "";
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (config_.api_key.empty() || is_public_path(req.path)) return true;
  if (req.method == "OPTIONS" && !config_.cors_origins.empty()) return true;  // preflights carry no credentials
  return same_secret(req.get_header_value("Authorization"), "Bearer " + config_.api_key);
}

void HttpServer::install_routes() {
  httplib::Server& s = *server_;
  s.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) -> httplib::Server::HandlerResponse {
        if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
        write_error(res, ApiError::of(401, "invalid_request_error", "invalid_api_key",
                                      req.has_header("Authorization")
                                          ? "Incorrect API key provided in the Authorization header"
                                          : "Missing API key: send the header 'Authorization: Bearer <key>'"));
        return httplib::Server::HandlerResponse::Handled;
      });
  // Bodies for the errors httplib raises itself (no route, body too large, bad request line).
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
    ApiError error = ApiError::of(res.status, "invalid_request_error", "", fmt::format("HTTP {}", res.status));
    if (res.status == 404) {
      error.message = fmt::format("Unknown endpoint: {} {}", req.method, req.path);
      error.code = "unknown_url";
    } else if (res.status == 413) {
      // httplib limits url-encoded form bodies (curl's default type for -d) to 8192 bytes, others to the limit.
      const std::string type = req.get_header_value("Content-Type");
      const std::string length = req.get_header_value("Content-Length");
      if (type.starts_with("application/x-www-form-urlencoded")) {
        error.message = fmt::format(
            "the request body ({} bytes) was sent as {} (curl's default for -d), whose bodies are limited to {} "
            "bytes; send JSON with the header 'Content-Type: application/json' (limit {} bytes)",
            length.empty() ? "?" : length, type, kFormBodyLimit, config_.max_body_bytes);
      } else {
        error.message = fmt::format("the request body ({} bytes) is larger than the limit of {} bytes (--max-body)",
                                    length.empty() ? "?" : length, config_.max_body_bytes);
      }
      error.code = "request_too_large";
    }
    write_error(res, error);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    write_error(res, ApiError::of(500, "server_error", "internal_error", "internal error: " + what));
  });
  if (config_.log_requests) {
    s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "kvserve: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
  }

  if (!config_.cors_origins.empty()) {
    // Every response (errors and streams included) names the origin allowed to read it.
    s.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string origin = allowed_origin(req);
      if (origin.empty()) return;
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
    });
    s.Options(".*", [this](const httplib::Request& req, httplib::Response& res) {
      res.status = 204;
      if (allowed_origin(req).empty()) return;  // no CORS headers: the browser refuses the call
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
      res.set_header("Access-Control-Max-Age", "600");
    });
  }
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(to_prometheus(loop_.metrics()), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array({model_.to_json()})}};
    res.set_content(body.dump(), "application/json");
  });
  s.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (!model_.accepts(name) || name.empty()) {
      write_error(res,
                  ApiError::of(404, "invalid_request_error", "model_not_found",
                               fmt::format("The model '{}' does not exist; this server serves '{}'", name, model_.id),
                               "model"));
      return;
    }
    res.set_content(model_.to_json().dump(), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(Endpoint::kCompletions, req, res);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(Endpoint::kChatCompletions, req, res);
  });
  s.Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
    auto prompt = completions_.apply_template(req.body);
    if (!prompt) {
      write_error(res, prompt.error());
      return;
    }
    res.set_content(nlohmann::json{{"prompt", *prompt}}.dump(), "application/json");
  });
}

void HttpServer::handle_completion(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto started = completions_.start(endpoint, req.body);
  if (!started) {
    write_error(res, started.error());
    return;
  }
  std::shared_ptr<ResponsePump> pump = started->pump;
  res.set_header("Cache-Control", "no-cache");
  if (started->stream) res.set_header("X-Accel-Buffering", "no");
  // The provider runs on this connection's thread after the handler returns; when it returns
  // false (client gone) or the server stops, httplib drops the provider and with it the pump,
  // whose destructor cancels an unfinished request.
  res.set_chunked_content_provider(
      started->stream ? "text/event-stream" : kJsonStreamType, [pump](size_t, httplib::DataSink& sink) {
        const auto progress =
            pump->pump([&sink](std::string_view bytes) { return sink.write(bytes.data(), bytes.size()); });
        if (progress == ResponsePump::Progress::kDone) sink.done();
        return progress != ResponsePump::Progress::kClientGone;
      });
}

}  // namespace kvs::server
