#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "serve/service.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace ditto::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port
  std::vector<std::string> api_keys;  // none: no key needed
  size_t max_body = size_t{8} << 20;  // bytes of a request body at most
  int timeout = 60;                  // seconds a read or a write of a connection may wait
  size_t threads = 64;               // connections served at once (a streaming request holds one)
};

// The OpenAI-compatible HTTP API (cpp-httplib) over a Service. It listens before the model is
// loaded, answering 503 until ready(); drain() refuses new generation requests, so that those
// in flight can finish before stop().
class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address and returns the port; throws ditto::Error if it cannot.
  int bind();
  // Serves on a thread of its own.
  void start();
  // The model is loaded: requests go to `service`, which must outlive stop().
  void ready(Service& service);
  // New generation requests get 503 from now on; /health too.
  void drain();
  // Waits until no request is being answered, at most `timeout`; true if none is.
  bool wait_quiet(std::chrono::milliseconds timeout);
  // Stops listening and closes every connection; returns when the server thread has ended.
  void stop();

  // Counts a request in flight as long as the returned token lives.
  std::shared_ptr<void> track();

 private:
  class Listener;
  void routes();
  void count(const httplib::Request& req, const httplib::Response& res);

  HttpOptions options_;
  std::unique_ptr<Listener> server_;
  std::vector<std::pair<std::string, std::regex>> endpoints_;  // method and path of every route
  std::atomic<Service*> service_ = nullptr;
  std::atomic<bool> draining_ = false;
  std::mutex mutex_;
  std::condition_variable quiet_;
  size_t active_ = 0;
  std::thread thread_;
};

}  // namespace ditto::serve
