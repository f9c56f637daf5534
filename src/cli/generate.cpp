// `ditto generate`: greedy continuation of a prompt, as text (-p) or as token ids (--tokens, or
// --tokens-file for several). With --json it is also the child process of `ditto verify` (see
// register_generate for the protocol).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/stages.h"
#include "ditto/batch.h"
#include "ditto/error.h"
#include "ditto/load.h"
#include "ditto/tokenizer.h"
#include "chat/chat_format.h"
#include "chat/stop_strings.h"
#include "runtime/scheduler.h"
#include "runtime/token_ids.h"
#include "runtime/trace.h"
#include "tensor/limits.h"
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
  int threads = default_threads();
  size_t context = 0;
  CacheOptions cache;
  std::string numerics;
  size_t parallel = 1;
  bool prefix_cache = true;
  SamplingParams sampling;
  std::vector<std::string> stops;
  std::string chat_template;  // a file
  std::vector<std::string> vars;
  bool hash = false;
  bool ignore_eos = false;
  bool json = false;
  bool trace = false;
  bool raw = false;  // -p text as it is (after the tokenizer's BOS), without the model's chat template
  StageOptions stages;
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

// The prompts: -p text (with the model's chat template unless --raw), --tokens or --tokens-file.
std::vector<std::vector<int32_t>> read_prompts(const GenerateOptions& o, const LoadedModel& loaded,
                                               const std::string& path) {
  std::vector<std::vector<int32_t>> prompts;
  if (!o.prompt.empty()) {
    const Tokenizer& tokenizer = require_tokenizer(loaded, path);
    // As one user message in the model's chat format, if it has one (or one is given).
    const bool chat = !o.raw && !(loaded.chat_template.empty() && o.chat_template.empty());
    const std::string text =
        chat ? ChatFormat(loaded, o.chat_template.empty() ? "" : read_text(o.chat_template))
                   .render(nlohmann::ordered_json::array({{{"role", "user"}, {"content", o.prompt}}}), nullptr, true,
                           template_variables(o.vars))
             : o.prompt;
    // A text as it is gets the tokenizer's special tokens (Gemma's <bos>), as transformers'
    // tokenizer(text) and llama.cpp give them; a chat template writes its own.
    prompts.push_back(tokenizer.encode(text, /*allow_special=*/true, /*add_special_tokens=*/!chat));
  } else if (!o.tokens_file.empty()) {
    prompts = read_token_id_rows(o.tokens_file, "prompt");
  } else {
    prompts.push_back(parse_token_ids(o.tokens));
  }
  if (prompts[0].empty()) throw Error("the prompt is empty: give text with -p or token ids with --tokens");
  return prompts;
}

void generate(const GenerateOptions& o, const std::string& path, const LoadOptions& load, Pipeline* pipeline) {
  const LoadedModel loaded = load_model(path, load);
  const auto prompts = read_prompts(o, loaded, path);
  if (!o.stops.empty()) require_tokenizer(loaded, path);
  const ModelConfig& config = loaded.config;
  if (o.context > config.max_positions)
    throw Error("-c " + std::to_string(o.context) + " is past the model's context of " +
                std::to_string(config.max_positions) + " positions");
  if (o.trace && o.parallel > 1) throw Error("--trace follows one prompt at a time: use it with --parallel 1");

  TraceRecorder trace;
  BatchOptions batch;
  batch.threads = o.threads;
  batch.cache_dtype = o.cache.dtype();
  batch.prefix_cache = o.prefix_cache;
  batch.observer = o.trace ? &trace : nullptr;
  batch.pipeline = pipeline;
  size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  const size_t limit = o.context ? o.context : config.max_positions;
  batch.kv_blocks = o.cache.budget ? kv_blocks_for_budget(config, batch.cache_dtype, batch.block_size, o.cache.budget)
                                   : kv_blocks_for_sequences(std::min(o.parallel, prompts.size()),
                                                             std::min(longest + size_t(o.predict), limit), batch.block_size);
  BatchEngine engine(loaded.model, batch);

  // A single prompt streams its tokens as they come; several are printed whole, in prompt order.
  // A text prompt gets text; token ids get token ids.
  const bool stream = prompts.size() == 1 && !o.json;
  const bool text_output = !o.prompt.empty();
  // Each prompt's tokens as text, to find the stop strings in (and show, for a text prompt).
  struct Text {
    StreamDecoder decoder;
    StopStrings stops;
  };
  std::vector<std::optional<Text>> texts(prompts.size());
  if (loaded.tokenizer)
    for (auto& text : texts) text.emplace(Text{StreamDecoder(*loaded.tokenizer, /*skip_special=*/true), StopStrings(o.stops)});
  const auto print_ids = [](const std::vector<int32_t>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
  };
  const auto on_token = [&, first = true](size_t p, const SampledToken& sampled) mutable {
    const int32_t token = sampled.token;
    std::string shown;
    if (texts[p]) shown = texts[p]->stops.push(texts[p]->decoder.push(token));
    if (stream) {
      if (text_output) std::fputs(shown.c_str(), stdout);
      else std::printf("%s%d", first ? "" : " ", token);
      std::fflush(stdout);
      first = false;
    }
    return !(texts[p] && texts[p]->stops.stopped());
  };
  const auto print = [&](size_t p, const Generation& result) {
    if (o.json) {
      nlohmann::json line = {{"prompt", p}, {"ids", result.ids}, {"step_hashes", hex(result.step_hashes)}};
      if (!o.sampling.greedy()) line["seed"] = result.seed;
      if (o.sampling.logprobs) {
        nlohmann::json logprobs = nlohmann::json::array();
        for (const SampledToken& token : result.sampled) {
          nlohmann::json top = nlohmann::json::array();
          for (const TokenLogprob& alternative : token.top) top.push_back({alternative.token, alternative.logprob});
          logprobs.push_back({{"logprob", token.logprob}, {"top", top}});
        }
        line["logprobs"] = logprobs;
      }
      if (o.hash) line["logits_hash"] = hash_hex(result.logits_hash);
      if (o.trace) line["trace"] = trace_json(trace);
      std::printf("%s\n", line.dump().c_str());
    } else {
      if (!stream) print_ids(result.ids);
      if (stream && text_output) {
        Text& text = *texts[p];
        std::fputs((text.stops.push(text.decoder.finish()) + text.stops.finish()).c_str(), stdout);
      }
      std::printf("\n");
      if (o.hash) std::printf("logits-hash: %s\n", hash_hex(result.logits_hash).c_str());
    }
    std::fflush(stdout);
    if (!o.sampling.greedy() && !o.sampling.seed) std::fprintf(stderr, "prompt %zu: seed %llu\n", p, (unsigned long long)result.seed);
    if (result.stop == StopReason::ContextFull)
      std::fprintf(stderr, "prompt %zu stopped: the context of %zu positions is full\n", p, limit);
    if (o.parallel == 1)
      std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f t/s, %zu from the prefix cache), chunk %zu; decode: %zu tokens in %.3f s\n",
                   prompts[p].size(), result.prefill_seconds,
                   double(prompts[p].size() - result.cached_positions) / result.prefill_seconds, result.cached_positions,
                   o.chunk ? o.chunk : prompts[p].size(), result.ids.size(), result.decode_seconds);
    trace.clear();  // --trace runs one prompt at a time
  };
  std::map<size_t, Generation> done;  // finished, waiting for earlier prompts to be printed
  size_t next_to_print = 0, generated = 0;
  const auto on_finish = [&](size_t p, Generation result) {
    generated += result.ids.size();
    done.emplace(p, std::move(result));
    for (auto found = done.find(next_to_print); found != done.end(); found = done.find(next_to_print)) {
      print(next_to_print++, found->second);
      done.erase(found);
    }
  };

  Scheduler scheduler(engine, {o.parallel, o.chunk, 0}, on_token, on_finish);
  size_t prompt_tokens = 0;
  for (const auto& prompt : prompts) {
    GenerationRequest request;
    request.prompt = prompt;
    request.max_tokens = size_t(o.predict);
    if (!o.ignore_eos) request.stop_tokens = loaded.stop_tokens;
    request.max_length = limit;
    request.hash_logits = o.hash || o.json;
    request.all_prompt_logits = o.hash;
    request.sampling = o.sampling;
    scheduler.submit(std::move(request));
    prompt_tokens += prompt.size();
  }
  const auto start = std::chrono::steady_clock::now();
  scheduler.run();
  if (pipeline) {
    const Pipeline::Traffic traffic = pipeline->traffic();
    std::fprintf(stderr,
                 "stages: %zu bytes to stage 1 (the hidden state and the rows' orders), %zu bytes back from the last "
                 "stage for %zu generated tokens\n",
                 traffic.sent, traffic.received, generated);
  }
  if (o.parallel > 1) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%zu prompts (%zu tokens, %zu from the prefix cache) and %zu generated tokens in %.3f s, up to %zu in flight: %.1f generated t/s\n",
                 prompts.size(), prompt_tokens, engine.kv_stats().prefix_hit_positions, generated, seconds, o.parallel,
                 double(generated) / seconds);
  }
}

void run_generate(const GenerateOptions& o) {
  LoadOptions load;
  load.tokenizer = !o.prompt.empty() || !o.stops.empty();
  load.tokenizer_file = o.tokenizer;
  load.numerics = numerics_choice(o.numerics);
  const std::string path = model_path(o.model);
  const std::unique_ptr<Pipeline> pipeline = start_stages(o.stages, load);
  if (pipeline && !pipeline->head()) return run_stage(*pipeline, path, load);
  generate(o, path, load, pipeline.get());
  if (pipeline) pipeline->finish();
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt, greedily or sampled: text in, text out (or token ids in and out)");
  cmd->footer(
      "--json prints one line per prompt: {\"prompt\": i, \"ids\": [...], \"step_hashes\": [...]}, where\n"
      "step_hashes[j] is the FNV-1a hash (16 hex digits) of the logits that chose ids[j]; with --hash also\n"
      "\"logits_hash\"; when sampling, \"seed\"; with --logprobs N, \"logprobs\": [{\"logprob\": x, \"top\":\n"
      "[[id, x], ...]}, ...], the model's raw log-probabilities (before temperature and penalties) of each\n"
      "token and of the N most likely; with --trace, \"trace\": [{\"layer\": l, \"op\": name, \"hashes\": [...]}],\n"
      "the hash of every intermediate of every layer at every position, in the order the decoder computes them.\n"
      "`ditto verify` runs `ditto generate --tokens-file FILE --json` as its child process.");
  add_model_option(cmd, options->model);
  CLI::Option* text = cmd->add_option("-p,--prompt", options->prompt, "Prompt as text; the continuation is printed as text");
  CLI::Option* tokens = cmd->add_option("--tokens", options->tokens, "Prompt as space-separated token ids")->excludes(text);
  CLI::Option* tokens_file =
      cmd->add_option("--tokens-file", options->tokens_file,
                      "Prompts as token ids, one prompt per line, each continued as its own sequence")
          ->excludes(text)->excludes(tokens);
  add_tokenizer_option(cmd, options->tokenizer);
  cmd->add_option("-n,--predict", options->predict, "Tokens to generate")
      ->capture_default_str()->check(CLI::Range(int64_t(1), limits::kPositions.max));
  cmd->add_option("--chunk", options->chunk, "Prefill chunk size in tokens; 0 = the whole prompt at once (results are identical)")
      ->capture_default_str()->check(CLI::Range(int64_t(0), limits::kPositions.max));
  add_threads_option(cmd, options->threads);
  cmd->add_option("-c,--ctx-size", options->context, "Positions a sequence may fill; 0 = the model's context")
      ->capture_default_str()->check(CLI::Range(int64_t(0), limits::kPositions.max));
  add_cache_options(cmd, options->cache);
  add_numerics_option(cmd, options->numerics);
  add_sampling_options(cmd, options->sampling);
  cmd->add_option("--logprobs", options->sampling.top_logprobs,
                  "With --json: the log-probability of each token and of the N most likely ones (0 to 20)")
      ->check(CLI::Range(0, SamplingParams::kMaxTopLogprobs))
      ->each([options](const std::string&) { options->sampling.logprobs = true; });
  cmd->add_option("--parallel", options->parallel,
                  "With --tokens-file: prompts in flight at once, in one batch (results are identical for any N)")
      ->capture_default_str()->check(CLI::Range(limits::kParallel.min, limits::kParallel.max))->needs(tokens_file);
  cmd->add_flag("!--no-prefix-cache", options->prefix_cache,
                "Compute every prompt position, instead of reusing those an earlier prompt computed (the results "
                "are identical)");
  cmd->add_flag("--hash", options->hash, "Print an FNV-1a hash of the logits of every position, to compare runs");
  cmd->add_flag("--raw", options->raw,
                "Encode the -p text as it is (after the tokenizer's BOS, if it adds one); by default a model with a "
                "chat template (such as the default model) gets it as one user message in its chat format");
  add_chat_template_options(cmd, options->chat_template, options->vars);
  cmd->add_option("--stop", options->stops,
                  "Stop when the text contains this string (repeatable); it is not printed, nor anything after it");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating after the end-of-sequence token");
  cmd->add_flag("--json", options->json, "Print one JSON object per prompt (below), for programs");
  cmd->add_flag("--trace", options->trace, "With --json: add the hashes of every intermediate (below)")
      ->needs("--json");
  add_stage_options(cmd, options->stages);
  cmd->callback([options] { run_generate(*options); });
}

}  // namespace ditto::cli
