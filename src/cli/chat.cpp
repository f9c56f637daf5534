// `ditto chat`: a conversation in the terminal, in the model's own chat format. Each turn renders
// the whole conversation and reuses the KV blocks of the turns before it (the prefix cache), so
// only the new message is prefilled.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "chat/stop_strings.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/stages.h"
#include "ditto/batch.h"
#include "ditto/error.h"
#include "ditto/load.h"
#include "runtime/scheduler.h"
#include "runtime/token_ids.h"
#include "tensor/limits.h"

namespace ditto::cli {

namespace {

struct ChatOptions {
  std::string model;
  std::string system;
  int predict = 1024;
  int threads = default_threads();
  CacheOptions cache;
  std::string numerics;
  SamplingParams sampling;
  std::vector<std::string> stops;
  std::string chat_template;
  std::vector<std::string> vars;
  StageOptions stages;
};

using Json = nlohmann::ordered_json;

class Conversation {
 public:
  Conversation(const ChatOptions& o, const LoadedModel& loaded, Pipeline* pipeline)
      : o_(o),
        loaded_(loaded),
        tokenizer_(*loaded.tokenizer),
        format_(loaded, o.chat_template.empty() ? "" : read_text(o.chat_template)),
        vars_(template_variables(o.vars)),
        engine_(loaded.model, engine_options(o, loaded.config, pipeline)) {
    reset();
  }

  void reset() {
    messages_ = Json::array();
    if (!o_.system.empty()) messages_.push_back({{"role", "system"}, {"content", o_.system}});
  }

  // Answers one user message, streaming the reply to stdout.
  void reply(const std::string& text) {
    messages_.push_back({{"role", "user"}, {"content", text}});
    GenerationRequest request;
    request.prompt = tokenizer_.encode(format_.render(messages_, nullptr, true, vars_));
    request.max_tokens = size_t(o_.predict);
    request.stop_tokens = loaded_.stop_tokens;
    request.sampling = o_.sampling;
    const size_t context = loaded_.config.max_positions;
    if (request.prompt.size() >= context) {
      messages_.erase(messages_.size() - 1);
      throw Error("the conversation no longer fits in the model's context of " + std::to_string(context) +
                  " positions: /reset to start over");
    }
    request.max_tokens = std::min(request.max_tokens, context - request.prompt.size());

    StreamDecoder decoder(tokenizer_, /*skip_special=*/true);
    StopStrings stops(o_.stops);
    std::string answer;
    const auto show = [&](const std::string& piece) {
      answer += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
    Generation result;
    const size_t prompt_tokens = request.prompt.size();
    Scheduler scheduler(
        engine_, {1, 0, 0},
        [&](size_t, const SampledToken& token) {
          show(stops.push(decoder.push(token.token)));
          return !stops.stopped();
        },
        [&](size_t, Generation generation) { result = std::move(generation); });
    scheduler.submit(std::move(request));
    scheduler.run();
    show(stops.push(decoder.finish()) + stops.finish());
    std::printf("\n");
    messages_.push_back({{"role", "assistant"}, {"content", answer}});
    std::fprintf(stderr, "[%zu prompt tokens, %zu of them from the cache; %zu tokens in %.2f s]\n", prompt_tokens,
                 result.cached_positions, result.ids.size(), result.prefill_seconds + result.decode_seconds);
  }

 private:
  static BatchOptions engine_options(const ChatOptions& o, const ModelConfig& config, Pipeline* pipeline) {
    BatchOptions options;
    options.threads = o.threads;
    options.pipeline = pipeline;
    options.cache_dtype = o.cache.dtype();
    // The conversation, and the turns before it while they are still cached.
    options.kv_blocks = o.cache.budget ? kv_blocks_for_budget(config, options.cache_dtype, options.block_size, o.cache.budget)
                                       : kv_blocks_for_sequences(2, config.max_positions, options.block_size);
    return options;
  }

  const ChatOptions& o_;
  const LoadedModel& loaded_;
  const Tokenizer& tokenizer_;
  ChatFormat format_;
  Json vars_;
  BatchEngine engine_;
  Json messages_;
};

void chat(const ChatOptions& o, const std::string& path, const LoadOptions& load, Pipeline* pipeline) {
  const LoadedModel loaded = load_model(path, load);
  require_tokenizer(loaded, path);
  Conversation conversation(o, loaded, pipeline);
  std::fprintf(stderr, "%s: type a message; /reset starts over, /exit (or end of input) leaves\n", loaded.name.c_str());
  for (std::string line;;) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      conversation.reset();
      continue;
    }
    if (line.empty()) continue;
    try {
      conversation.reply(line);
    } catch (const PipelineError&) {
      throw;  // a stage is gone: the conversation cannot go on
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
  }
}

void run_chat(const ChatOptions& o) {
  const std::string path = model_path(o.model);
  LoadOptions load;
  load.numerics = numerics_choice(o.numerics);
  // Under mpirun the first process reads the terminal (mpirun forwards its input to rank 0).
  const std::unique_ptr<Pipeline> pipeline = start_stages(o.stages, load);
  if (pipeline && !pipeline->head()) return run_stage(*pipeline, path, load);
  chat(o, path, load, pipeline.get());
  if (pipeline) pipeline->finish();
}

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Talk with the model in the terminal, in its own chat format");
  add_model_option(cmd, o->model);
  cmd->add_option("--system", o->system, "A system message to start the conversation with");
  cmd->add_option("-n,--predict", o->predict, "Tokens per reply at most")->capture_default_str()->check(CLI::Range(int64_t(1), limits::kPositions.max));
  add_threads_option(cmd, o->threads);
  add_cache_options(cmd, o->cache);
  add_numerics_option(cmd, o->numerics);
  add_sampling_options(cmd, o->sampling);
  cmd->add_option("--stop", o->stops, "End a reply at this string (repeatable); it is not shown");
  add_chat_template_options(cmd, o->chat_template, o->vars);
  add_stage_options(cmd, o->stages);
  cmd->callback([o] { run_chat(*o); });
}

}  // namespace ditto::cli
