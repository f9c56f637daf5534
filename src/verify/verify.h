#pragma once
// The comparison behind `ditto verify`: the outputs of child processes (`ditto generate --json`),
// one per (configuration, run), compared with a baseline run and an optional oracle, then shown
// as a table or JSON. No processes here: the command (src/cli/verify.cpp) runs them.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/trace.h"

namespace ditto::verify {

// One column of the table: a prefill chunk policy, a thread count and a number of pipeline stages.
struct Config {
  size_t chunk = 0;  // 0: the whole prompt in one prefill call
  int threads = 1;
  size_t stages = 1;
  // "whole", "17", "17 t2" with threads, "17 s3" with stages, "17 t2 s3" with both
  std::string name(bool with_threads, bool with_stages = false) const;
};
// The name of configs[c], with the thread count and the stage count where they vary.
std::string config_name(const std::vector<Config>& configs, size_t c);

// "whole,1,16,17" -> chunk sizes (0 for whole). Throws ditto::Error on anything else.
std::vector<size_t> parse_modes(std::string_view text);
// "1,2" -> thread counts. Throws ditto::Error on anything else.
std::vector<int> parse_threads(std::string_view text);
// "1,2,3" -> stage counts. Throws ditto::Error on anything else.
std::vector<size_t> parse_stages(std::string_view text);

// What one child printed for one prompt.
struct PromptRun {
  std::vector<int32_t> ids;
  std::vector<uint64_t> step_hashes;         // of the logits that chose each id
  std::vector<TraceRecorder::Step> trace;    // empty unless the child ran with --trace
};

// Parses the output of `ditto generate --json` for `prompts` prompts. Throws ditto::Error.
std::vector<PromptRun> parse_child_output(std::string_view text, size_t prompts);

// runs[c][r][p]: configuration c, run r, prompt p. Run 0 of configuration 0 is the baseline.
using Runs = std::vector<std::vector<std::vector<PromptRun>>>;

// Where one run of one prompt first departs from what was expected: token `step` differs from
// the expected id (the oracle's, else the baseline's), or its logits differ from the baseline's.
struct Divergence {
  size_t run = 0;
  size_t step = 0;
  std::optional<int32_t> expected, got;  // the ids at `step`, where each side has one
  bool same_id() const { return expected && got && *expected == *got; }
};

struct Cell {
  std::optional<Divergence> first;     // the first run that diverges; none: "same"
  std::vector<size_t> diverging_runs;  // every run that diverges (0-based)
};

struct Report {
  std::vector<Config> configs;
  size_t runs = 0;
  std::vector<size_t> prompt_lengths;
  bool has_oracle = false;
  std::vector<std::vector<Cell>> cells;     // [prompt][config]
  std::vector<size_t> unique_completions;   // per prompt: distinct id sequences over all runs
  size_t identical = 0, sequences = 0;      // runs of a prompt equal to the baseline in ids and logits
  size_t oracle_matches = 0;                // runs of a prompt whose ids equal the oracle row
  bool passed() const;
};

// An oracle (empty: none) must have one row per prompt, each of at least `tokens` ids; only
// the first `tokens` are compared. Throws ditto::Error saying which row is wrong.
void check_oracle(const std::vector<std::vector<int32_t>>& oracle, size_t prompts, size_t tokens);

// Compares every run with the baseline and, when given, with the oracle (see check_oracle).
Report compare(const std::vector<Config>& configs, const Runs& runs, const std::vector<size_t>& prompt_lengths,
               const std::vector<std::vector<int32_t>>& oracle, size_t tokens);

// The first intermediate (in the decoder's order: layer, then operation) whose hash differs
// between two runs of one prompt, at the positions whose input tokens agree.
struct TraceDifference {
  size_t prompt = 0, config = 0, run = 0;  // the run compared with the baseline
  std::optional<size_t> layer;             // none: every traced intermediate agrees
  std::string operation;
  size_t position = 0;                     // the first position where it differs
  size_t positions_compared = 0;
};

// Localises the first run that differs from the baseline (in table order); none if no run does.
// Throws ditto::Error if the runs carry no trace.
std::optional<TraceDifference> localise(const Report& report, const Runs& runs);

// Renders a token id for people, e.g. ` The`; empty when there is no tokenizer.
using TokenText = std::function<std::string(int32_t)>;

// A row label: `3 (24 tok) "Return a JSON object with k…"`, or without text `3 (24 tok)`.
std::string prompt_label(size_t index, size_t tokens, const std::string& text);

// The table (prompts down, configurations across) and the summary line.
std::string render_table(const Report& report, const std::vector<std::string>& prompt_labels, const TokenText& text);
std::string render_trace(const TraceDifference& difference, const Report& report);
nlohmann::json report_json(const Report& report, const std::optional<TraceDifference>& trace, const TokenText& text);

}  // namespace ditto::verify
