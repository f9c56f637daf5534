#include "cli/options.h"

#include <thread>

#include "cli/commands.h"
#include "tensor/limits.h"

namespace ditto::cli {

void add_model_option(CLI::App* command, std::string& model) {
  command->add_option("-m,--model", model,
                      "GGUF file, checkpoint directory or the name of an installed model (" + model_names() +
                          "; default: " + default_model_description() + ")");
}

void add_tokenizer_option(CLI::App* command, std::string& tokenizer) {
  command->add_option("--tokenizer", tokenizer, "tokenizer.json to use instead of the model's own");
}

int default_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

void add_threads_option(CLI::App* command, int& threads) {
  command->add_option("-t,--threads", threads, "Threads (results are identical for any count)")
      ->capture_default_str()->check(CLI::Range(limits::kThreads.min, limits::kThreads.max));
}

void add_cache_options(CLI::App* command, CacheOptions& cache) {
  command->add_option("--cache-type", cache.type, "KV cache precision: f32, f16 or bf16")
      ->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  command->add_option("--kv-budget", cache.budget,
                      "Memory for the KV cache of all sequences, in bytes (e.g. 512M, 4G); default: what the "
                      "sequences in flight can fill")
      ->transform(CLI::AsSizeValue(false));
}

void add_numerics_option(CLI::App* command, std::string& numerics) {
  command
      ->add_option("--numerics", numerics,
                   "How quantised weights multiply: int8 (inputs rounded to int8 per block of 32, integer dot "
                   "products: llama.cpp's kind of arithmetic) or exact (weights dequantised exactly to f32: "
                   "transformers' function). Either is bitwise invariant; dense weights are always exact. Default: " +
                       numerics_name(kQuantizedDefault) + " for a file with quantised weights")
      ->check(CLI::IsMember({"exact", "int8"}));
}

std::optional<Numerics> numerics_choice(const std::string& numerics) {
  if (numerics.empty()) return std::nullopt;
  return parse_numerics(numerics);
}

void add_sampling_options(CLI::App* command, SamplingParams& s) {
  s.temperature = 0.0;
  command->add_option("--temp", s.temperature, "Temperature; 0 = greedy (the most likely token)")->capture_default_str();
  command->add_option("--top-k", s.top_k, "Keep the K most likely tokens; 0 = all")->capture_default_str();
  command->add_option("--top-p", s.top_p, "Keep the most likely tokens that hold this much probability")
      ->capture_default_str();
  command->add_option("--min-p", s.min_p, "Keep tokens at least this fraction as likely as the most likely")
      ->capture_default_str();
  command->add_option("--repeat-penalty", s.repetition_penalty, "Penalty for tokens in the last --repeat-last-n; 1 = off")
      ->capture_default_str();
  command->add_option("--repeat-last-n", s.penalty_window, "Tokens the penalties look back at; 0 = all")
      ->capture_default_str();
  command->add_option("--presence-penalty", s.presence_penalty, "Subtracted once from tokens that appeared")
      ->capture_default_str();
  command->add_option("--frequency-penalty", s.frequency_penalty, "Subtracted per time a token appeared")
      ->capture_default_str();
  command->add_option("--seed", s.seed,
                      "Seed of the draws: the same seed gives the same tokens, alone or in any batch (default: a "
                      "fresh one, printed)");
}

}  // namespace ditto::cli
