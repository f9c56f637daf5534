#pragma once
// Options several commands share, declared once so that they mean the same everywhere.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "ditto/batch.h"
#include "ditto/dtype.h"
#include "ditto/numerics.h"
#include "runtime/sampler.h"

namespace ditto::cli {

// -m,--model: a GGUF file or checkpoint directory; empty means the default model.
void add_model_option(CLI::App* command, std::string& model);
// --tokenizer: a tokenizer.json to use instead of the model's own.
void add_tokenizer_option(CLI::App* command, std::string& tokenizer);
// -t,--threads for one thread count (default: every core).
void add_threads_option(CLI::App* command, int& threads);
int default_threads();

// The KV cache: --cache-type (f32, f16, bf16) and --kv-budget (bytes, e.g. 512M or 4G).
struct CacheOptions {
  std::string type = "f32";
  size_t budget = 0;  // 0: as the command sizes it
  DType dtype() const { return parse_dtype(type); }
};
void add_cache_options(CLI::App* command, CacheOptions& cache);

// --numerics exact|int8: how quantised matrices multiply; empty: the model file's default.
void add_numerics_option(CLI::App* command, std::string& numerics);
std::optional<Numerics> numerics_choice(const std::string& numerics);

// The sampler: --temp (default 0: greedy), --top-k, --top-p, --min-p, --repeat-penalty,
// --repeat-last-n, --presence-penalty, --frequency-penalty, --seed.
void add_sampling_options(CLI::App* command, SamplingParams& sampling);

}  // namespace ditto::cli
