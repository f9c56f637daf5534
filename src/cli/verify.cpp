// `ditto verify`: the seed report's test method as one command. Every (mode, threads, run) runs
// in a fresh child process, `ditto generate --json`; src/verify compares what they print.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "ditto/error.h"
#include "ditto/tokenizer.h"
#include "runtime/token_ids.h"
#include "tensor/limits.h"
#include "verify/child_process.h"
#include "verify/verify.h"

namespace ditto::cli {

namespace {

// The seed report's prompts (../shared/seed/): the default set, encoded as plain text.
const std::vector<std::string> kSeedPrompts = {
    "Name one primary color.",
    "Write one factual sentence about local inference on Apple silicon.",
    "Return a JSON object with keys \"language\" and \"runtime\" for Swift and Core AI.",
    "Explain in two sentences why logits should stay on the final stage.",
    "Write a Swift function signature for adding two Int values.",
    "List three constraints for a safe distributed model test.",
    "Answer with one word: what device family runs macOS?",
    "Summarize pipeline parallelism in one short paragraph.",
};

struct VerifyOptions {
  std::string model;
  std::string prompts;
  bool ids = false;
  std::string tokenizer;
  std::string modes = "whole,1,16,17,64";
  std::string threads = "1,2";
  size_t runs = 3;
  size_t predict = 8;
  std::string oracle;
  std::string cache_type = "f32";
  std::string numerics;  // empty: exact with an oracle (transformers' answers), else the file's default
  bool json = false;
  bool trace = false;
  std::string stages = "1";
  std::string mpirun = "mpirun";
};

// The prompts as token ids in a file for the children, removed when done.
class PromptFile {
 public:
  explicit PromptFile(const std::vector<std::vector<int32_t>>& prompts) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ditto-verify-XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw Error("cannot create a temporary file in " + std::filesystem::temp_directory_path().string());
    ::close(fd);
    path_ = pattern;
    std::ofstream out(path_);
    for (const auto& prompt : prompts) {
      for (size_t i = 0; i < prompt.size(); ++i) out << (i ? " " : "") << prompt[i];
      out << "\n";
    }
    if (!out.flush()) throw Error("cannot write the prompts to " + path_);
  }
  ~PromptFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The non-empty pieces of `text` between separators.
std::vector<std::string> split_words(const std::string& text, char separator) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; std::getline(in, word, separator);)
    if (!word.empty()) words.push_back(word);
  return words;
}

// A program named without a directory, found in PATH as a shell would (run_child does not search).
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const std::string& directory : split_words(path ? path : "", ':'))
    if (::access((directory + "/" + name).c_str(), X_OK) == 0) return directory + "/" + name;
  throw Error("'" + name + "' is not in PATH: --stages above 1 runs the children under mpirun (Debian: openmpi-bin), "
              "or give its path with --mpirun");
}

// One child: `ditto generate`, under `mpirun -np S` for S stages. The children of mpirun run
// ditto by its path, since /proc/self/exe would be mpirun's own.
std::vector<std::string> child_command(const VerifyOptions& o, const std::string& prompt_file, const verify::Config& c) {
  std::vector<std::string> argv;
  if (c.stages > 1) {
    argv = split_words(o.mpirun, ' ');
    if (argv.empty()) throw Error("--mpirun is empty");
    argv[0] = find_program(argv[0]);
    argv.insert(argv.end(), {"-np", std::to_string(c.stages), std::filesystem::canonical("/proc/self/exe").string()});
  } else {
    argv = {"/proc/self/exe"};
  }
  argv.insert(argv.end(), {"generate", "-m", o.model, "--tokens-file", prompt_file, "-n", std::to_string(o.predict),
                           "--chunk", std::to_string(c.chunk), "-t", std::to_string(c.threads), "--cache-type",
                           o.cache_type, "--ignore-eos", "--no-prefix-cache", "--json"});
  if (c.stages > 1) argv.insert(argv.end(), {"--stages", std::to_string(c.stages)});
  const std::string numerics = !o.numerics.empty() ? o.numerics : o.oracle.empty() ? "" : "exact";
  if (!numerics.empty()) argv.insert(argv.end(), {"--numerics", numerics});
  if (o.trace) argv.push_back("--trace");
  return argv;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string text = argv[0] == "/proc/self/exe" ? "ditto" : argv[0];
  for (size_t i = 1; i < argv.size(); ++i) text += " " + argv[i];
  return text;
}

struct Prompts {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> texts;  // empty for prompts given as ids
};

// Text prompts are encoded with the tokenizer, which is also used to show token ids as text:
// it is loaded when given, when the prompts are text, or when the model directory holds one.
std::optional<Tokenizer> load_tokenizer(const VerifyOptions& o) {
  const bool beside_model = std::filesystem::exists(std::filesystem::path(o.model) / "tokenizer.json");
  if (o.ids && o.tokenizer.empty() && !beside_model) return std::nullopt;
  return cli::load_tokenizer(o.model, o.tokenizer);
}

Prompts read_prompts(const VerifyOptions& o, const std::optional<Tokenizer>& tokenizer) {
  Prompts prompts;
  if (o.ids) {
    prompts.ids = read_token_id_rows(o.prompts, "prompt");
    return prompts;
  }
  prompts.texts = o.prompts.empty() ? kSeedPrompts : read_lines(o.prompts);
  for (size_t p = 0; p < prompts.texts.size(); ++p) {
    prompts.ids.push_back(tokenizer->encode(prompts.texts[p]));
    if (prompts.ids.back().empty()) throw Error(o.prompts + ":" + std::to_string(p + 1) + ": the prompt is empty");
  }
  if (prompts.ids.empty()) throw Error("'" + o.prompts + "' holds no prompts");
  return prompts;
}

void run_verify(const VerifyOptions& o) {
  const std::optional<Tokenizer> tokenizer = load_tokenizer(o);
  const Prompts prompt_set = read_prompts(o, tokenizer);
  const auto& prompts = prompt_set.ids;
  const auto oracle = o.oracle.empty() ? std::vector<std::vector<int32_t>>() : read_token_id_rows(o.oracle, "oracle row");
  verify::check_oracle(oracle, prompts.size(), o.predict);
  const std::vector<int> thread_counts = verify::parse_threads(o.threads);
  const std::vector<size_t> stage_counts = verify::parse_stages(o.stages);
  if (o.trace && std::any_of(stage_counts.begin(), stage_counts.end(), [](size_t s) { return s > 1; }))
    throw Error("--trace follows every intermediate in one process: use it with --stages 1");
  std::vector<verify::Config> configs;
  for (const size_t chunk : verify::parse_modes(o.modes))
    for (const int threads : thread_counts)
      for (const size_t stages : stage_counts) configs.push_back({chunk, threads, stages});

  const PromptFile prompt_file(prompts);
  verify::Runs runs(configs.size(), std::vector<std::vector<verify::PromptRun>>(o.runs));
  for (size_t r = 0; r < o.runs; ++r) {
    for (size_t c = 0; c < configs.size(); ++c) {
      const auto argv = child_command(o, prompt_file.path(), configs[c]);
      const auto start = std::chrono::steady_clock::now();
      const verify::ChildResult child = verify::run_child(argv);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "run %zu/%zu  %-10s %6.2f s\n", r + 1, o.runs, verify::config_name(configs, c).c_str(), seconds);
      if (child.exit_code != 0 || child.signal != 0)
        throw Error("the child `" + command_text(argv) + "` " +
                    (child.signal ? "was killed by signal " + std::to_string(child.signal)
                                  : "failed with exit status " + std::to_string(child.exit_code)) +
                    ":\n" + child.err);
      try {
        runs[c][r] = verify::parse_child_output(child.out, prompts.size());
      } catch (const Error& e) {
        throw Error("the child `" + command_text(argv) + "` printed what verify cannot read: " + e.what());
      }
    }
  }

  std::vector<size_t> lengths;
  std::vector<std::string> labels;
  for (size_t p = 0; p < prompts.size(); ++p) {
    lengths.push_back(prompts[p].size());
    labels.push_back(verify::prompt_label(p, prompts[p].size(), prompt_set.texts.empty() ? "" : prompt_set.texts[p]));
  }
  const verify::Report report = verify::compare(configs, runs, lengths, oracle, o.predict);
  const auto trace = o.trace ? verify::localise(report, runs) : std::nullopt;
  verify::TokenText token_text;
  if (tokenizer) token_text = [&](int32_t id) { return tokenizer->decode(std::span<const int32_t>(&id, 1)); };
  if (o.json) {
    std::printf("%s\n", verify::report_json(report, trace, token_text).dump(2).c_str());
  } else {
    std::printf("%s", verify::render_table(report, labels, token_text).c_str());
    if (trace) {
      std::printf("%s", verify::render_trace(*trace, report).c_str());
    } else if (o.trace && !report.passed()) {
      std::printf("trace: every run computed the baseline's logits; only the oracle differs\n");
    }
  }
  std::fflush(stdout);
  if (!report.passed()) throw CLI::RuntimeError(1);
}

}  // namespace

void register_verify(CLI::App& app) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Run prompts under several prefill modes and thread counts, each run in a fresh process, and compare");
  cmd->footer(
      "Each (run, mode, thread count, stage count) is a fresh child process, run one after another (run 1 of\n"
      "every mode, thread count and stage count, then run 2, ...):\n"
      "  ditto generate -m MODEL --tokens-file IDS -n N --chunk C -t T --cache-type X --ignore-eos --no-prefix-cache\n"
      "    --json [--numerics N] [--trace]\n"
      "(for S > 1 stages: `mpirun -np S ditto generate ... --stages S`), which prints a JSON line per prompt: the greedy ids and the hash of the logits of every step (see\n"
      "`ditto generate --help`). The first child (first mode, first thread count, run 1) is the baseline: a\n"
      "run agrees when its ids equal the oracle row (without --oracle: the baseline's) and its logits hash\n"
      "as the baseline's at every step.\n"
      "Table: prompts down, modes across; a cell is `same` or the first divergence, `tok I: EXPECTED -> GOT\n"
      "(run R)` with I counted from 0, or 〃 for the same divergence as the cell to its left. Exit status 0\n"
      "only if every cell is `same`.\n"
      "--trace also hashes every intermediate at every position (per layer: attn_norm, q, k, v (q and k\n"
      "after norm and RoPE), attention, o_proj, attn_residual, mlp_norm, up, silu_mul, down (a mixture of\n"
      "experts: router, experts), mlp_residual; Gemma 3: gelu_mul for silu_mul, and post_attn_norm,\n"
      "post_mlp_norm before the residuals; and the embedding) and names the first layer and operation\n"
      "where the first diverging run departs from the baseline, comparing the positions whose input tokens agree.");
  cmd->add_option("-m,--model", options->model, "GGUF file or checkpoint directory (config.json + safetensors)")
      ->required();
  CLI::Option* prompts = cmd->add_option(
      "-p,--prompts", options->prompts, "Prompts, one per line, as text (default: the seed report's eight prompts)");
  cmd->add_flag("--ids", options->ids, "The prompt file holds token ids, space-separated, instead of text")->needs(prompts);
  add_tokenizer_option(cmd, options->tokenizer);
  cmd->add_option("--modes", options->modes, "Prefill modes to compare: 'whole' or a chunk size in tokens")
      ->capture_default_str();
  cmd->add_option("-t,--threads", options->threads, "Thread counts to compare")->capture_default_str();
  cmd->add_option("-r,--runs", options->runs, "Fresh-process runs of each mode and thread count")
      ->capture_default_str()->check(CLI::Range(limits::kRepetitions.min, limits::kRepetitions.max));
  cmd->add_option("-n,--predict", options->predict, "Greedy tokens per prompt")
      ->capture_default_str()->check(CLI::Range(int64_t(1), limits::kPositions.max));
  cmd->add_option("--oracle", options->oracle, "Expected ids, one row of space-separated ids per prompt (the seed's format)");
  cmd->add_option("--cache-type", options->cache_type, "KV cache precision of the runs: f32, f16 or bf16")
      ->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--numerics", options->numerics,
                  "How the runs multiply quantised weights: exact or int8 (default: exact with --oracle, whose "
                  "answers are transformers', else the file's default)")
      ->check(CLI::IsMember({"exact", "int8"}));
  cmd->add_flag("--json", options->json, "Print the report as JSON");
  cmd->add_flag("--trace", options->trace, "Name the first layer and operation where diverging runs part");
  cmd->add_option("--stages", options->stages,
                  "Pipeline stage counts to compare: a child of S > 1 stages runs as `mpirun -np S ditto generate "
                  "... --stages S`")
      ->capture_default_str();
  cmd->add_option("--mpirun", options->mpirun, "The mpirun command (with its options) for children of several stages")
      ->capture_default_str();
  cmd->callback([options] { run_verify(*options); });
}

}  // namespace ditto::cli
