// `ditto generate`: greedy continuation of a prompt, as text (-p) or as token ids (--tokens).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "ditto/error.h"
#include "ditto/session.h"
#include "ditto/tokenizer.h"
#include "tensor/hash.h"

namespace ditto::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;     // text, encoded with the tokenizer
  std::string tokenizer;  // tokenizer.json; default: the one in the model directory
  std::string tokens;
  int predict = 32;
  size_t chunk = 0;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  size_t context = 0;
  std::string cache_type = "f32";
  bool hash = false;
  bool ignore_eos = false;
};

std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0 || id > INT32_MAX) throw Error("'" + word + "' is not a token id");
    ids.push_back(int32_t(id));
  }
  if (ids.empty()) throw Error("the prompt is empty: give text with -p or token ids with --tokens");
  return ids;
}

int32_t argmax(const std::vector<float>& logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run_generate(const GenerateOptions& o) {
  // A text prompt gets a text answer, streamed; token ids get token ids.
  std::optional<Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  if (o.prompt.empty()) {
    prompt = parse_token_ids(o.tokens);
  } else {
    tokenizer.emplace(Tokenizer::from_file(find_tokenizer(o.model, o.tokenizer)));
    prompt = tokenizer->encode(o.prompt);
  }
  std::optional<StreamDecoder> text_out;
  if (tokenizer) text_out.emplace(*tokenizer, /*skip_special=*/true);
  const auto model = Model::load(o.model);
  const ModelConfig& config = model->config();
  SessionOptions session_options;
  session_options.capacity = o.context ? o.context : std::min(config.max_positions, prompt.size() + size_t(o.predict));
  session_options.cache_dtype = parse_dtype(o.cache_type);
  session_options.threads = o.threads;
  Session session(model, session_options);

  LogitsHash hash;
  const Logits which = o.hash ? Logits::All : Logits::Last;
  const size_t chunk = o.chunk ? o.chunk : prompt.size();
  const auto prefill_start = std::chrono::steady_clock::now();
  std::vector<float> logits;
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    const size_t count = std::min(chunk, prompt.size() - at);
    logits = session.prefill(std::span<const int32_t>(prompt).subspan(at, count), which);
    hash.update(logits.data(), logits.size());
  }
  const double prefill_seconds = seconds_since(prefill_start);

  // With --hash, `logits` holds every row of the last chunk; the next token comes from the last.
  std::vector<float> last(logits.end() - ptrdiff_t(config.vocab_size), logits.end());
  const auto decode_start = std::chrono::steady_clock::now();
  int generated = 0;
  while (true) {
    const int32_t token = argmax(last);
    if (text_out) {
      std::fputs(text_out->push(token).c_str(), stdout);
    } else {
      std::printf("%s%d", generated ? " " : "", token);
    }
    std::fflush(stdout);
    ++generated;
    if (generated == o.predict || (!o.ignore_eos && token == config.eos_token_id)) break;
    if (session.position() == session.capacity()) {
      std::fprintf(stderr, "\nstopped: the context of %zu positions is full\n", session.capacity());
      break;
    }
    last = session.decode(token);
    hash.update(last.data(), last.size());
  }
  if (text_out) std::fputs(text_out->finish().c_str(), stdout);
  std::printf("\n");
  if (o.hash) std::printf("logits-hash: %s\n", hash.hex().c_str());
  std::fflush(stdout);
  const double decode_seconds = seconds_since(decode_start);
  std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f t/s), chunk %zu; decode: %d tokens in %.3f s\n",
               prompt.size(), prefill_seconds, double(prompt.size()) / prefill_seconds, chunk, generated,
               decode_seconds);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt greedily: text in, text out (or token ids in and out)");
  cmd->add_option("-m,--model", options->model, "Checkpoint directory (config.json + safetensors)")->required();
  CLI::Option* text = cmd->add_option("-p,--prompt", options->prompt, "Prompt as text; the continuation is printed as text");
  cmd->add_option("--tokens", options->tokens, "Prompt as space-separated token ids")->excludes(text);
  cmd->add_option("--tokenizer", options->tokenizer, "tokenizer.json for -p (default: the model directory's)");
  cmd->add_option("-n,--predict", options->predict, "Tokens to generate")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--chunk", options->chunk, "Prefill chunk size in tokens; 0 = the whole prompt at once (results are identical)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", options->threads, "Threads (results are identical for any count)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("-c,--ctx-size", options->context, "KV cache capacity in positions; 0 = prompt + predict")
      ->capture_default_str();
  cmd->add_option("--cache-type", options->cache_type, "KV cache precision: f32, f16 or bf16")
      ->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_flag("--hash", options->hash, "Print an FNV-1a hash of the logits of every position, to compare runs");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating after the end-of-sequence token");
  cmd->callback([options] { run_generate(*options); });
}

}  // namespace ditto::cli
