#include "serve/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <regex>

#include <httplib.h>

#include "ditto/error.h"

namespace ditto::serve {

// cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
// library), so that dozens of clients connecting at once would see connections dropped and
// retried a second later; listening again on the same socket raises the backlog.
class HttpServer::Listener : public httplib::Server {
 public:
  void raise_backlog() { ::listen(svr_sock_, SOMAXCONN); }
};

namespace {

using httplib::Request;
using httplib::Response;

// JSON as text; invalid UTF-8 (a model file's name, say) replaced rather than refused.
std::string text(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

void reply(Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(text(body), "application/json");
}

void reply_error(Response& res, const ApiError& error) { reply(res, error.status(), error.body()); }

// The endpoint a request counts under in /metrics.
std::string endpoint_of(const Request& req) {
  static const char* const known[] = {"/health", "/metrics", "/v1/models", "/v1/chat/completions",
                                      "/v1/completions", "/tokenize", "/detokenize"};
  for (const char* path : known)
    if (req.path == path) return path;
  if (req.path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// Compares without stopping at the first difference, so that the time taken tells nothing of
// the key (but its length). `key` is not empty.
bool same_secret(std::string_view given, std::string_view key) {
  unsigned char difference = given.size() != key.size();
  for (size_t i = 0; i < given.size(); ++i) difference |= static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  return difference == 0;
}

// Sends the job's answer as server-sent events, as OpenAI streams: a chunk per delta, the usage
// if asked, then [DONE]. A client that goes away cancels the job.
void stream(Response& res, const std::shared_ptr<Job>& job, std::shared_ptr<void> active) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, active](size_t, httplib::DataSink& sink) {
        const auto send = [&](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          return sink.write(event.data(), event.size());
        };
        const std::vector<Job::Delta> deltas = job->next();
        bool ok = true;
        if (deltas.empty()) {
          if (job->options().include_usage) ok = send(text(job->usage_chunk()));
          ok = ok && send("[DONE]");
          if (ok) sink.done();
        } else {
          for (const Json& chunk : job->chunks(deltas)) ok = ok && send(text(chunk));
          for (const Job::Delta& delta : deltas)
            if (ok && delta.finish == "cancelled") {  // by the server: shutting down, or a failed pass
              ok = send(text(ApiError(503, "the request was cancelled by the server").body()));
              if (ok) sink.done();
              break;
            }
        }
        if (!ok) job->cancel();
        return ok;
      },
      [job](bool success) {
        if (!success) job->cancel();
      });
}

void generate(const std::shared_ptr<Job>& job, Response& res, std::shared_ptr<void> active) {
  if (job->options().stream) return stream(res, job, std::move(active));
  job->wait();
  if (job->cancelled()) throw ApiError(503, "the request was cancelled by the server");
  reply(res, 200, job->response());
}

}  // namespace

HttpServer::HttpServer(HttpOptions options) : options_(std::move(options)), server_(std::make_unique<Listener>()) {
  Listener& s = *server_;
  const size_t threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(options_.max_body);
  s.set_read_timeout(options_.timeout);
  s.set_write_timeout(options_.timeout);
  s.set_keep_alive_max_count(1000);
  s.set_tcp_nodelay(true);  // a streamed token goes out at once
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
    // cpp-httplib's own refusals: a body over the limit (413), no route (404, or 400 for a
    // method without one), a request it could not read whole (404 for a known route: the body
    // stopped arriving before the timeout, or was shorter than announced), a malformed request.
    std::string message;
    const bool known = !req.method.empty() && std::any_of(endpoints_.begin(), endpoints_.end(), [&](const auto& e) {
      return e.first == req.method && std::regex_match(req.path, e.second);
    });
    if (res.status == 413) {
      message = "the body is larger than the limit of " + std::to_string(options_.max_body) + " bytes";
    } else if ((res.status == 404 || res.status == 400) && known) {
      res.status = 408;
      message = "the request did not arrive whole within the timeout of " + std::to_string(options_.timeout) + " s";
    } else if ((res.status == 404 || res.status == 400) && !req.method.empty() && !req.path.empty()) {
      res.status = 404;
      message = "no such endpoint: " + req.method + " " + req.path;
    } else {
      message = res.status == 400 ? "the request is not valid HTTP"
                                  : "the HTTP request was refused (" + std::to_string(res.status) + ")";
    }
    reply_error(res, ApiError(res.status, message));
    count(req, res);
    return httplib::Server::HandlerResponse::Handled;
  }));
  routes();
}

HttpServer::~HttpServer() { stop(); }

// Counted before the answer is written, so that a client that reads /metrics after its answer
// finds it counted.
void HttpServer::count(const httplib::Request& req, const httplib::Response& res) {
  if (Service* service = service_.load()) service->metrics().count_http(endpoint_of(req), res.status == -1 ? 200 : res.status);
}

std::shared_ptr<void> HttpServer::track() {
  {
    std::lock_guard lock(mutex_);
    ++active_;
  }
  return std::shared_ptr<void>(nullptr, [this](void*) {
    {
      std::lock_guard lock(mutex_);
      --active_;
    }
    quiet_.notify_all();
  });
}

void HttpServer::routes() {
  // Every endpoint but /health: the key, then the model (503 while it loads), then the handler.
  using Handler = std::function<void(const Request&, Response&, Service&, std::shared_ptr<void>)>;
  const auto guarded = [this](bool generation, Handler handler) {
    return [this, generation, handler](const Request& req, Response& res) {
      std::shared_ptr<void> active = track();
      try {
        if (!options_.api_keys.empty()) {
          const std::string header = req.get_header_value("Authorization");
          const std::string prefix = "Bearer ";
          bool known = false;
          if (header.rfind(prefix, 0) == 0)
            for (const std::string& key : options_.api_keys)
              known |= same_secret(std::string_view(header).substr(prefix.size()), key);
          if (!known)
            throw ApiError(401, header.empty() ? "no API key given: send the header 'Authorization: Bearer KEY'"
                                               : "the API key is not valid",
                           "", "invalid_api_key");
        }
        Service* service = service_.load();
        if (!service) throw ApiError(503, "the model is loading");
        if (generation && draining_) throw ApiError(503, "the server is shutting down");
        handler(req, res, *service, std::move(active));
      } catch (const ApiError& e) {
        reply_error(res, e);
      } catch (const Error& e) {
        reply_error(res, ApiError(400, e.what()));
      } catch (const std::bad_alloc&) {
        reply_error(res, ApiError(503, "out of memory"));
      } catch (const std::exception& e) {
        reply_error(res, ApiError(500, e.what()));
      }
      count(req, res);
    };
  };
  Listener& s = *server_;
  for (const char* path : {"/health", "/metrics", "/v1/models", R"(/v1/models/(.+))"}) endpoints_.emplace_back("GET", path);
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"})
    endpoints_.emplace_back("POST", path);
  s.Get("/health", [this](const Request& req, Response& res) {
    const char* status = !service_.load() ? "loading" : draining_ ? "shutting down" : "ok";
    reply(res, std::string(status) == "ok" ? 200 : 503, {{"status", status}});
    count(req, res);
  });
  s.Get("/metrics", guarded(false, [](const Request&, Response& res, Service& service, std::shared_ptr<void>) {
          res.set_content(service.metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
        }));
  s.Get("/v1/models", guarded(false, [](const Request&, Response& res, Service& service, std::shared_ptr<void>) {
          reply(res, 200, service.models());
        }));
  s.Get(R"(/v1/models/(.+))", guarded(false, [](const Request& req, Response& res, Service& service, std::shared_ptr<void>) {
          const std::optional<Json> model = service.model(req.matches[1]);
          if (!model) throw ApiError(404, "the model '" + std::string(req.matches[1]) + "' does not exist", "model", "model_not_found");
          reply(res, 200, *model);
        }));
  s.Post("/v1/chat/completions",
         guarded(true, [](const Request& req, Response& res, Service& service, std::shared_ptr<void> active) {
           generate(service.chat(parse_chat_request(req.body)), res, std::move(active));
         }));
  s.Post("/v1/completions",
         guarded(true, [](const Request& req, Response& res, Service& service, std::shared_ptr<void> active) {
           generate(service.complete(parse_completion_request(req.body)), res, std::move(active));
         }));
  s.Post("/tokenize", guarded(false, [](const Request& req, Response& res, Service& service, std::shared_ptr<void>) {
           reply(res, 200, service.tokenize(parse_tokenize_request(req.body)));
         }));
  s.Post("/detokenize", guarded(false, [](const Request& req, Response& res, Service& service, std::shared_ptr<void>) {
           reply(res, 200, service.detokenize(parse_detokenize_request(req.body)));
         }));
}

int HttpServer::bind() {
  Listener& s = *server_;
  const int port = options_.port == 0 ? s.bind_to_any_port(options_.host) : s.bind_to_port(options_.host, options_.port) ? options_.port : -1;
  if (port < 0)
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                ": the address is not valid here or the port is taken");
  s.raise_backlog();
  return port;
}

void HttpServer::start() {
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // Until it runs, stop() would have nothing to stop.
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::ready(Service& service) { service_ = &service; }

void HttpServer::drain() { draining_ = true; }

bool HttpServer::wait_quiet(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return quiet_.wait_for(lock, timeout, [&] { return active_ == 0; });
}

void HttpServer::stop() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ditto::serve
