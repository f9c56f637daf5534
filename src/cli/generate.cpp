// `ditto generate`: greedy continuation of a prompt, as text (-p) or as token ids (--tokens, or
// --tokens-file for several). With --json it is also the child process of `ditto verify` (see
// register_generate for the protocol).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ditto/error.h"
#include "ditto/session.h"
#include "ditto/tokenizer.h"
#include "model/chat.h"
#include "runtime/generation.h"
#include "runtime/token_ids.h"
#include "runtime/trace.h"
#include "tensor/hash.h"

namespace ditto::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;     // text, encoded with the tokenizer
  std::string tokenizer;  // tokenizer.json; default: the one in the model directory
  std::string tokens;
  std::string tokens_file;
  int predict = 32;
  size_t chunk = 0;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  size_t context = 0;
  std::string cache_type = "f32";
  bool hash = false;
  bool ignore_eos = false;
  bool json = false;
  bool trace = false;
  bool raw = false;  // -p text as it is, without the model's chat template
};

std::vector<std::string> hex(const std::vector<uint64_t>& hashes) {
  std::vector<std::string> text;
  for (const uint64_t hash : hashes) text.push_back(hash_hex(hash));
  return text;
}

nlohmann::json trace_json(const TraceRecorder& trace) {
  nlohmann::json steps = nlohmann::json::array();
  for (const TraceRecorder::Step& step : trace.steps())
    steps.push_back({{"layer", step.layer}, {"op", step.operation}, {"hashes", hex(step.hashes)}});
  return steps;
}

void run_generate(const GenerateOptions& o) {
  const std::string model_file = model_path(o.model);
  // A text prompt gets a text answer, streamed; token ids get token ids.
  std::optional<Tokenizer> tokenizer;
  std::vector<std::vector<int32_t>> prompts;
  if (!o.prompt.empty()) {
    ModelTokenizer loaded = load_tokenizer(model_file, o.tokenizer);
    tokenizer.emplace(std::move(loaded.tokenizer));
    prompts.push_back(tokenizer->encode(o.raw ? o.prompt : chat_prompt(loaded.chat_template, o.prompt)));
  } else if (!o.tokens_file.empty()) {
    prompts = read_token_id_rows(o.tokens_file, "prompt");
  } else {
    prompts.push_back(parse_token_ids(o.tokens));
  }
  if (prompts[0].empty()) throw Error("the prompt is empty: give text with -p or token ids with --tokens");
  const auto model = Model::load(model_file);
  const ModelConfig& config = model->config();
  TraceRecorder trace;
  GenerationOptions generation;
  generation.chunk = o.chunk;
  generation.max_tokens = size_t(o.predict);
  generation.stop_at_eos = !o.ignore_eos;
  generation.all_prompt_logits = o.hash;

  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int32_t>& prompt = prompts[p];
    SessionOptions session_options;
    session_options.capacity = o.context ? o.context : std::min(config.max_positions, prompt.size() + size_t(o.predict));
    session_options.cache_dtype = parse_dtype(o.cache_type);
    session_options.threads = o.threads;
    session_options.observer = o.trace ? &trace : nullptr;
    Session session(model, session_options);
    trace.clear();

    std::optional<StreamDecoder> text_out;
    if (tokenizer) text_out.emplace(*tokenizer, /*skip_special=*/true);
    const auto print_token = [&, first = true](int32_t token) mutable {
      if (text_out) {
        std::fputs(text_out->push(token).c_str(), stdout);
      } else {
        std::printf("%s%d", first ? "" : " ", token);
      }
      std::fflush(stdout);
      first = false;
    };
    const Generation result = generate_greedy(session, prompt, generation, o.json ? std::function<void(int32_t)>() : print_token);
    if (o.json) {
      nlohmann::json line = {{"prompt", p}, {"ids", result.ids}, {"step_hashes", hex(result.step_hashes)}};
      if (o.hash) line["logits_hash"] = hash_hex(result.logits_hash);
      if (o.trace) line["trace"] = trace_json(trace);
      std::printf("%s\n", line.dump().c_str());
    } else {
      if (text_out) std::fputs(text_out->finish().c_str(), stdout);
      std::printf("\n");
      if (o.hash) std::printf("logits-hash: %s\n", hash_hex(result.logits_hash).c_str());
    }
    std::fflush(stdout);
    if (result.context_full) std::fprintf(stderr, "stopped: the context of %zu positions is full\n", session.capacity());
    std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f t/s), chunk %zu; decode: %zu tokens in %.3f s\n",
                 prompt.size(), result.prefill_seconds, double(prompt.size()) / result.prefill_seconds,
                 o.chunk ? o.chunk : prompt.size(), result.ids.size(), result.decode_seconds);
  }
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt greedily: text in, text out (or token ids in and out)");
  cmd->footer(
      "--json prints one line per prompt: {\"prompt\": i, \"ids\": [...], \"step_hashes\": [...]}, where\n"
      "step_hashes[j] is the FNV-1a hash (16 hex digits) of the logits that chose ids[j]; with --hash also\n"
      "\"logits_hash\", and with --trace also \"trace\": [{\"layer\": l, \"op\": name, \"hashes\": [...]}], the\n"
      "hash of every intermediate of every layer at every position, in the order the decoder computes them.\n"
      "`ditto verify` runs `ditto generate --tokens-file FILE --json` as its child process.");
  cmd->add_option("-m,--model", options->model,
                  "GGUF file or checkpoint directory (default: " + default_model_description() + ")");
  CLI::Option* text = cmd->add_option("-p,--prompt", options->prompt, "Prompt as text; the continuation is printed as text");
  CLI::Option* tokens = cmd->add_option("--tokens", options->tokens, "Prompt as space-separated token ids")->excludes(text);
  cmd->add_option("--tokens-file", options->tokens_file,
                  "Prompts as token ids, one prompt per line, each continued in a fresh session")
      ->excludes(text)->excludes(tokens);
  cmd->add_option("--tokenizer", options->tokenizer, "tokenizer.json for -p (default: the model's)");
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
  cmd->add_flag("--raw", options->raw,
                "Encode the -p text as it is; by default a model with a ChatML chat template (such as the default "
                "model) gets it as one user message");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating after the end-of-sequence token");
  cmd->add_flag("--json", options->json, "Print one JSON object per prompt (below), for programs");
  cmd->add_flag("--trace", options->trace, "With --json: add the hashes of every intermediate (below)")->needs("--json");
  cmd->callback([options] { run_generate(*options); });
}

}  // namespace ditto::cli
