// `ditto serve`: the OpenAI-compatible HTTP server (src/serve/). It listens before the model is
// loaded (/health answers 503 until then) and stops on SIGTERM or SIGINT: it refuses new
// requests, finishes those in flight, and exits; a second signal cancels them instead.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/stages.h"
#include "ditto/error.h"
#include "ditto/load.h"
#include "runtime/token_ids.h"
#include "serve/http_server.h"
#include "serve/service.h"

namespace ditto::cli {

namespace {

struct ServeOptions {
  std::string model;
  std::string alias;
  serve::HttpOptions http;
  std::string api_key_file;
  int threads = default_threads();
  size_t context = 0;
  // f16 keys and values: half the memory of f32 (twice the sequences in a budget, half the reads
  // of a decode step at depth) for logits within a few hundredths of f32's (README, KV precision).
  CacheOptions cache{"f16"};
  std::string numerics;
  size_t parallel = 16;
  size_t batch_tokens = 512;
  std::string chat_template;
  std::vector<std::string> vars;
  StageOptions stages;
};

std::vector<std::string> read_keys(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw Error("cannot read the API key file '" + path + "'");
  std::vector<std::string> keys;
  for (std::string line; std::getline(file, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) keys.push_back(line);
  }
  if (keys.empty()) throw Error("the API key file '" + path + "' holds no key");
  return keys;
}

// Room for --parallel sequences of the whole context, at most half of the machine's memory.
size_t default_kv_blocks(const ModelConfig& config, DType cache, size_t block_size, size_t parallel, size_t context) {
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  return std::min(kv_blocks_for_sequences(parallel, context, block_size),
                  kv_blocks_for_budget(config, cache, block_size, size_t(memory / 2)));
}

// With stages a server stops at once, on a signal or on a failed pass: a pipeline cannot finish
// its requests once a stage is gone, and mpirun sends every stage SIGTERM when one of them ends.
// What runs gets 503, new requests get 503, and the server ends with an error.
void stop_with_stages(serve::HttpServer& http, serve::Service& service, Pipeline& pipeline, const sigset_t& signals) {
  const timespec tick{0, 100'000'000};
  int signal = 0;
  while (!pipeline.failed() && signal <= 0) signal = sigtimedwait(&signals, nullptr, &tick);
  http.drain();
  pipeline.stop();
  service.scheduler().cancel_all();
  http.wait_quiet(std::chrono::milliseconds(1000));
  http.stop();
  throw Error(signal > 0 ? std::string("ditto serve: ") + strsignal(signal) +
                               ": stopped at once (with --stages, mpirun stops every stage when one of them ends)"
                         : "ditto serve: stopped: " + pipeline.failure());
}

void run_serve(ServeOptions o) {
  const std::string path = model_path(o.model);
  LoadOptions load;
  load.numerics = numerics_choice(o.numerics);
  const std::unique_ptr<Pipeline> pipeline = start_stages(o.stages, load, /*own_signals=*/true);
  if (pipeline && !pipeline->head()) return run_stage(*pipeline, path, load);
  if (!o.api_key_file.empty())
    for (std::string& key : read_keys(o.api_key_file)) o.http.api_keys.push_back(std::move(key));
  for (const std::string& key : o.http.api_keys)
    if (key.empty()) throw Error("an API key may not be empty");

  // Signals are taken by sigwait below, not by whichever thread they would interrupt; a client
  // that goes away must not kill the server with SIGPIPE.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  serve::HttpServer http(o.http);
  const int port = http.bind();
  std::printf("ditto serve: listening on http://%s:%d\n", o.http.host.c_str(), port);
  std::fflush(stdout);
  http.start();

  LoadedModel loaded = load_model(path, load);
  require_tokenizer(loaded, path);
  serve::ServiceOptions options;
  options.name = o.alias.empty() ? loaded.name : o.alias;
  options.context = o.context;
  const size_t context = o.context ? std::min(o.context, loaded.config.max_positions) : loaded.config.max_positions;
  options.batch.threads = o.threads;
  options.batch.pipeline = pipeline.get();
  options.batch.cache_dtype = o.cache.dtype();
  options.batch.kv_blocks =
      o.cache.budget ? kv_blocks_for_budget(loaded.config, options.batch.cache_dtype, options.batch.block_size, o.cache.budget)
                     : default_kv_blocks(loaded.config, options.batch.cache_dtype, options.batch.block_size, o.parallel, context);
  options.scheduler = {o.parallel, 0, o.batch_tokens};
  options.chat_template = o.chat_template.empty() ? "" : read_text(o.chat_template);
  options.template_variables = template_variables(o.vars);
  const size_t kv_blocks = options.batch.kv_blocks, block_size = options.batch.block_size;
  serve::Service service(std::move(loaded), std::move(options));
  http.ready(service);
  std::printf("ditto serve: ready: %s, context %zu, up to %zu sequences, KV memory for %zu blocks of %zu positions\n",
              service.name().c_str(), context, o.parallel, kv_blocks, block_size);
  std::fflush(stdout);

  if (pipeline) return stop_with_stages(http, service, *pipeline, signals);
  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "ditto serve: %s: finishing the requests in flight (send it again to cancel them)\n",
               strsignal(signal));
  http.drain();
  const timespec now{0, 0};
  while (!http.wait_quiet(std::chrono::milliseconds(100)))
    if (sigtimedwait(&signals, nullptr, &now) > 0) service.scheduler().cancel_all();
  http.stop();
  std::fprintf(stderr, "ditto serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  cmd->footer(
      "Endpoints: POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize; GET /v1/models,\n"
      "/health, /metrics. A request's tokens and logprobs are the same bits whatever else the server runs.\n"
      "SIGTERM or SIGINT: refuse new requests, finish those in flight and exit; a second one cancels them.\n"
      "With --stages (under mpirun) a signal or a stage that fails stops it at once: requests in flight get 503.");
  add_model_option(cmd, o->model);
  cmd->add_option("--alias", o->alias, "The model's id in the API (default: the file or directory name)");
  cmd->add_option("--host", o->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port to listen on; 0 = any free port (printed)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  add_threads_option(cmd, o->threads);
  cmd->add_option("-c,--ctx-size", o->context, "Positions a sequence may fill; 0 = the model's context")
      ->capture_default_str();
  add_cache_options(cmd, o->cache);
  add_numerics_option(cmd, o->numerics);
  cmd->add_option("--parallel", o->parallel, "Sequences in flight at most (each choice of a request is one)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--batch-tokens", o->batch_tokens,
                  "Positions per forward pass at most: decode rows first, then prompt chunks; 0 = no limit")
      ->capture_default_str();
  add_chat_template_options(cmd, o->chat_template, o->vars);
  cmd->add_option("--api-key", o->http.api_keys, "Require this key as 'Authorization: Bearer KEY' (repeatable)");
  cmd->add_option("--api-key-file", o->api_key_file, "Require one of the keys in this file, one per line");
  cmd->add_option("--max-body", o->http.max_body, "Largest request body, in bytes (e.g. 8M)")
      ->capture_default_str()->transform(CLI::AsSizeValue(false));
  cmd->add_option("--timeout", o->http.timeout, "Seconds a read from or write to a client may wait")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd->add_option("--http-threads", o->http.threads,
                  "Connections served at once; a streaming request holds one while it runs")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  add_stage_options(cmd, o->stages);
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace ditto::cli
