#include "cli/options.h"

#include <thread>

#include "cli/commands.h"

namespace ditto::cli {

void add_model_option(CLI::App* command, std::string& model) {
  command->add_option("-m,--model", model, "GGUF file or checkpoint directory (default: " + default_model_description() + ")");
}

void add_tokenizer_option(CLI::App* command, std::string& tokenizer) {
  command->add_option("--tokenizer", tokenizer, "tokenizer.json to use instead of the model's own");
}

int default_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

void add_threads_option(CLI::App* command, int& threads) {
  command->add_option("-t,--threads", threads, "Threads (results are identical for any count)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
}

void add_cache_options(CLI::App* command, CacheOptions& cache) {
  command->add_option("--cache-type", cache.type, "KV cache precision: f32, f16 or bf16")
      ->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  command->add_option("--kv-budget", cache.budget,
                      "Memory for the KV cache of all sequences, in bytes (e.g. 512M, 4G); default: what the "
                      "sequences in flight can fill")
      ->transform(CLI::AsSizeValue(false));
}

}  // namespace ditto::cli
