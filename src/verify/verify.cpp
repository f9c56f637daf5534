#include "verify/verify.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "ditto/error.h"
#include "tensor/limits.h"

namespace ditto::verify {

namespace {

// "a,,b," -> {"a", "", "b", ""}: every empty item is kept, to be refused.
std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> parts(1);
  for (const char c : text) {
    if (c == ',') {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

// A positive integer, or nothing.
std::optional<size_t> positive(const std::string& word) {
  if (word.empty() || word.size() > 9 || !std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const size_t value = std::stoul(word);
  return value ? std::optional<size_t>(value) : std::nullopt;
}

uint64_t parse_hash(const nlohmann::json& value) {
  const std::string text = value.get<std::string>();
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw Error("'" + text + "' is not a hash of 16 hex digits");
  return std::stoull(text, nullptr, 16);
}

std::vector<uint64_t> parse_hashes(const nlohmann::json& values) {
  std::vector<uint64_t> hashes;
  for (const auto& value : values) hashes.push_back(parse_hash(value));
  return hashes;
}

// The first step at which `run` departs from the expected ids or from the baseline's logits.
std::optional<size_t> first_divergence(const PromptRun& run, const std::vector<int32_t>& expected_ids,
                                       const std::vector<uint64_t>& baseline_hashes) {
  const size_t steps = std::max({run.ids.size(), expected_ids.size(), baseline_hashes.size()});
  const auto at = [](const auto& values, size_t i) {
    return i < values.size() ? std::optional(values[i]) : std::nullopt;
  };
  for (size_t i = 0; i < steps; ++i)
    if (at(run.ids, i) != at(expected_ids, i) || at(run.step_hashes, i) != at(baseline_hashes, i)) return i;
  return std::nullopt;
}

bool same_as(const PromptRun& a, const PromptRun& b) { return a.ids == b.ids && a.step_hashes == b.step_hashes; }

// "run 2", "runs 1,3" (1-based) or "all runs".
std::string runs_text(const std::vector<size_t>& runs, size_t total) {
  if (runs.size() == total && total > 1) return "all runs";
  std::string text = runs.size() == 1 ? "run " : "runs ";
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(runs[i] + 1);
  }
  return text;
}

// "1 for every prompt", or the prompts with more than one, e.g. "2 for prompt 3; 1 for the other 7".
std::string unique_text(const std::vector<size_t>& unique) {
  std::string several;
  size_t ones = 0;
  for (size_t p = 0; p < unique.size(); ++p) {
    if (unique[p] == 1) {
      ++ones;
      continue;
    }
    if (!several.empty()) several += ", ";
    several += std::to_string(unique[p]) + " for prompt " + std::to_string(p + 1);
  }
  if (several.empty()) return "1 for every prompt";
  return ones ? several + "; 1 for the other " + std::to_string(ones) : several;
}

// Text in double quotes, with JSON's escapes (\n, \") and invalid UTF-8 replaced.
std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// An id with its text, e.g. `576 " The"`, or "(none)" past the end of a sequence.
std::string token_label(std::optional<int32_t> id, const TokenText& text) {
  if (!id) return "(none)";
  std::string label = std::to_string(*id);
  if (text) {
    label += ' ';
    label += quoted(text(*id));
  }
  return label;
}

std::string cell_text(const Cell& cell, size_t runs, const TokenText& text) {
  if (!cell.first) return "same";
  const Divergence& d = *cell.first;
  std::string what = "tok " + std::to_string(d.step) + ": ";
  what += d.same_id() ? "logits differ, id " + std::to_string(*d.got) + " same"
                      : token_label(d.expected, text) + " -> " + token_label(d.got, text);
  return what + " (" + runs_text(cell.diverging_runs, runs) + ")";
}

// Terminal columns of UTF-8 text: one per code point, two for East Asian wide ones (CJK, kana,
// hangul, fullwidth forms, emoji) so that a Qwen vocabulary keeps the table aligned.
size_t width(const std::string& text) {
  size_t columns = 0;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    uint32_t cp = length == 1 ? byte : byte & (0x7f >> length);
    for (size_t k = 1; k < length && i + k < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    const bool wide = (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3) ||
                      (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
                      (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1f64f) || (cp >= 0x20000 && cp <= 0x3fffd);
    columns += wide ? 2 : 1;
    i += length;
  }
  return columns;
}

std::string padded(const std::string& text, size_t to) { return text + std::string(to - std::min(to, width(text)), ' '); }

constexpr const char* kDitto = "〃";

std::string baseline_name(const Report& report) { return config_name(report.configs, 0) + " run 1"; }

// Positive integers up to `most`, comma-separated; `what` names one in the error.
std::vector<size_t> parse_counts(std::string_view text, size_t most, const std::string& what) {
  std::vector<size_t> counts;
  for (const std::string& word : split_commas(text)) {
    const auto count = positive(word);
    if (!count || *count > most) throw Error("'" + word + "' is not a " + what + ": give counts like 1,2");
    counts.push_back(*count);
  }
  return counts;
}

}  // namespace

std::string prompt_label(size_t index, size_t tokens, const std::string& text) {
  std::string label = std::to_string(index + 1) + " (" + std::to_string(tokens) + " tok)";
  if (text.empty()) return label;
  constexpr size_t kShown = 28;  // code points of the prompt's text
  size_t points = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80 && points++ == kShown)
      return label + " " + quoted(text.substr(0, i) + "…");
  return label + " " + quoted(text);
}

std::string Config::name(bool with_threads, bool with_stages) const {
  return (chunk ? std::to_string(chunk) : "whole") + (with_threads ? " t" + std::to_string(threads) : "") +
         (with_stages ? " s" + std::to_string(stages) : "");
}

std::string config_name(const std::vector<Config>& configs, size_t c) {
  const auto varies = [&](auto field) {
    return std::any_of(configs.begin(), configs.end(), [&](const Config& other) { return field(other) != field(configs[0]); });
  };
  return configs[c].name(varies([](const Config& x) { return size_t(x.threads); }),
                         varies([](const Config& x) { return x.stages; }));
}

std::vector<size_t> parse_modes(std::string_view text) {
  std::vector<size_t> modes;
  for (const std::string& word : split_commas(text)) {
    if (word == "whole") {
      modes.push_back(0);
    } else if (const auto chunk = positive(word); chunk && *chunk <= size_t(limits::kPositions.max)) {
      modes.push_back(*chunk);
    } else {
      throw Error("'" + word + "' is not a prefill mode: give 'whole' or a chunk size in tokens (1.." +
                  std::to_string(limits::kPositions.max) + "), e.g. whole,1,16,17");
    }
  }
  return modes;
}

std::vector<int> parse_threads(std::string_view text) {
  std::vector<int> threads;
  for (const size_t count : parse_counts(text, 1024, "thread count")) threads.push_back(int(count));
  return threads;
}

std::vector<size_t> parse_stages(std::string_view text) { return parse_counts(text, 4096, "stage count"); }

std::vector<PromptRun> parse_child_output(std::string_view text, size_t prompts) {
  std::vector<PromptRun> runs;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    const std::string where = "child output line " + std::to_string(runs.size() + 1) + ": ";
    try {
      const nlohmann::json object = nlohmann::json::parse(line);
      if (object.at("prompt").get<size_t>() != runs.size()) throw Error("prompts out of order");
      PromptRun run;
      run.ids = object.at("ids").get<std::vector<int32_t>>();
      run.step_hashes = parse_hashes(object.at("step_hashes"));
      if (run.step_hashes.size() != run.ids.size()) throw Error("not one hash per id");
      if (object.contains("trace"))
        for (const auto& step : object["trace"])
          run.trace.push_back({step.at("layer").get<size_t>(), step.at("op").get<std::string>(), parse_hashes(step.at("hashes"))});
      runs.push_back(std::move(run));
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + e.what());
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
  }
  if (runs.size() != prompts)
    throw Error("the child answered " + std::to_string(runs.size()) + " of " + std::to_string(prompts) + " prompts");
  return runs;
}

bool Report::passed() const {
  for (const auto& row : cells)
    for (const Cell& cell : row)
      if (cell.first) return false;
  return true;
}

void check_oracle(const std::vector<std::vector<int32_t>>& oracle, size_t prompts, size_t tokens) {
  if (!oracle.empty() && oracle.size() != prompts)
    throw Error("the oracle has " + std::to_string(oracle.size()) + " rows but there are " + std::to_string(prompts) +
                " prompts: give one row of expected ids per prompt");
  for (size_t p = 0; p < oracle.size(); ++p)
    if (oracle[p].size() < tokens)
      throw Error("oracle row " + std::to_string(p + 1) + " has " + std::to_string(oracle[p].size()) +
                  " ids, fewer than the " + std::to_string(tokens) + " tokens to compare (-n)");
}

Report compare(const std::vector<Config>& configs, const Runs& runs, const std::vector<size_t>& prompt_lengths,
               const std::vector<std::vector<int32_t>>& oracle, size_t tokens) {
  const size_t prompts = prompt_lengths.size();
  check_oracle(oracle, prompts, tokens);
  Report report;
  report.configs = configs;
  report.runs = runs.at(0).size();
  report.prompt_lengths = prompt_lengths;
  report.has_oracle = !oracle.empty();
  report.cells.assign(prompts, std::vector<Cell>(configs.size()));
  for (size_t p = 0; p < prompts; ++p) {
    const PromptRun& baseline = runs[0][0][p];
    const std::vector<int32_t> expected =
        oracle.empty() ? baseline.ids : std::vector<int32_t>(oracle[p].begin(), oracle[p].begin() + ptrdiff_t(tokens));
    std::set<std::vector<int32_t>> completions;
    for (size_t c = 0; c < configs.size(); ++c) {
      Cell& cell = report.cells[p][c];
      for (size_t r = 0; r < report.runs; ++r) {
        const PromptRun& run = runs[c][r][p];
        completions.insert(run.ids);
        ++report.sequences;
        report.identical += same_as(run, baseline);
        report.oracle_matches += report.has_oracle && run.ids == expected;
        const auto step = first_divergence(run, expected, baseline.step_hashes);
        if (!step) continue;
        cell.diverging_runs.push_back(r);
        if (cell.first) continue;
        const auto id_at = [&](const std::vector<int32_t>& ids) {
          return *step < ids.size() ? std::optional(ids[*step]) : std::nullopt;
        };
        cell.first = Divergence{r, *step, id_at(expected), id_at(run.ids)};
      }
    }
    report.unique_completions.push_back(completions.size());
  }
  return report;
}

std::optional<TraceDifference> localise(const Report& report, const Runs& runs) {
  for (size_t p = 0; p < report.prompt_lengths.size(); ++p) {
    const PromptRun& baseline = runs[0][0][p];
    for (size_t c = 0; c < report.configs.size(); ++c) {
      for (size_t r = 0; r < report.runs; ++r) {
        const PromptRun& run = runs[c][r][p];
        if (same_as(run, baseline)) continue;
        if (baseline.trace.empty() || run.trace.size() != baseline.trace.size())
          throw Error("the runs carry no comparable trace");
        // Position prompt_length + i is fed generated id i: compare positions up to the first id that differs.
        const auto mismatch = std::mismatch(run.ids.begin(), run.ids.end(), baseline.ids.begin(), baseline.ids.end());
        const size_t agreeing_inputs = report.prompt_lengths[p] + size_t(mismatch.first - run.ids.begin());
        TraceDifference difference;
        difference.prompt = p, difference.config = c, difference.run = r;
        for (size_t s = 0; s < baseline.trace.size(); ++s) {
          const TraceRecorder::Step& a = baseline.trace[s];
          const TraceRecorder::Step& b = run.trace[s];
          if (a.layer != b.layer || a.operation != b.operation) throw Error("the runs traced different operations");
          const size_t positions = std::min({agreeing_inputs, a.hashes.size(), b.hashes.size()});
          difference.positions_compared = std::max(difference.positions_compared, positions);
          for (size_t pos = 0; pos < positions; ++pos) {
            if (a.hashes[pos] != b.hashes[pos]) {
              difference.layer = a.layer;
              difference.operation = a.operation;
              difference.position = pos;
              return difference;
            }
          }
        }
        return difference;
      }
    }
  }
  return std::nullopt;
}

std::string render_table(const Report& report, const std::vector<std::string>& prompt_labels, const TokenText& text) {
  std::vector<std::vector<std::string>> table;
  table.push_back({"prompt"});
  for (size_t c = 0; c < report.configs.size(); ++c) table[0].push_back(config_name(report.configs, c));
  // A divergence repeated from the cell to its left is shown as a ditto mark, so that a row whose
  // every mode departs from the oracle in the same way (a deterministic engine) reads at a glance.
  bool dittos = false;
  for (size_t p = 0; p < report.cells.size(); ++p) {
    table.push_back({prompt_labels.at(p)});
    std::string left;
    for (const Cell& cell : report.cells[p]) {
      const std::string cell_label = cell_text(cell, report.runs, text);
      const bool repeated = cell.first && cell_label == left;
      table.back().push_back(repeated ? kDitto : cell_label);
      dittos |= repeated;
      left = cell_label;
    }
  }
  std::vector<size_t> widths(table[0].size());
  for (const auto& row : table)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], width(row[i]));
  std::string out;
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += padded(row[i], widths[i]) + "  ";
    out += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  }

  out += std::string(report.passed() ? "PASS" : "FAIL") + ": " + std::to_string(report.identical) + " of " +
         std::to_string(report.sequences) + " sequences identical to the baseline (" + baseline_name(report) +
         ") in ids and logits";
  if (report.has_oracle)
    out += "; " + std::to_string(report.oracle_matches) + " of " + std::to_string(report.sequences) + " match the oracle";
  out += "; unique completions per prompt: " + unique_text(report.unique_completions) + "\n";
  if (dittos) out += std::string(kDitto) + " = the same divergence as the cell to its left\n";
  return out;
}

std::string render_trace(const TraceDifference& d, const Report& report) {
  std::string out = "trace: prompt " + std::to_string(d.prompt + 1) + ", " +
                    config_name(report.configs, d.config) + " run " + std::to_string(d.run + 1) +
                    " against the baseline (" + baseline_name(report) + "): ";
  if (!d.layer)
    return out + "every intermediate agrees at all " + std::to_string(d.positions_compared) +
           " positions with the same input; the difference arises after the last layer\n";
  return out + "first difference at layer " + std::to_string(*d.layer) + ", operation " + d.operation +
         ", position " + std::to_string(d.position) + " (of " + std::to_string(d.positions_compared) +
         " positions with the same input)\n";
}

nlohmann::json report_json(const Report& report, const std::optional<TraceDifference>& trace, const TokenText& text) {
  nlohmann::json configs = nlohmann::json::array();
  for (size_t c = 0; c < report.configs.size(); ++c) {
    const Config& config = report.configs[c];
    configs.push_back({{"name", config_name(report.configs, c)}, {"chunk", config.chunk}, {"threads", config.threads},
                       {"stages", config.stages}});
  }
  const auto id_json = [&](std::optional<int32_t> id) -> nlohmann::json {
    if (!id) return nullptr;
    nlohmann::json value = {{"id", *id}};
    if (text) value["text"] = text(*id);
    return value;
  };
  nlohmann::json prompts = nlohmann::json::array();
  for (size_t p = 0; p < report.cells.size(); ++p) {
    nlohmann::json cells = nlohmann::json::array();
    for (size_t c = 0; c < report.configs.size(); ++c) {
      const Cell& cell = report.cells[p][c];
      nlohmann::json entry = {{"config", config_name(report.configs, c)}, {"same", !cell.first}};
      if (cell.first) {
        std::vector<size_t> runs;
        for (const size_t r : cell.diverging_runs) runs.push_back(r + 1);
        entry.update({{"runs", runs}, {"run", cell.first->run + 1}, {"token", cell.first->step},
                      {"expected", id_json(cell.first->expected)}, {"got", id_json(cell.first->got)},
                      {"logits_only", cell.first->same_id()}});
      }
      cells.push_back(entry);
    }
    prompts.push_back({{"prompt", p + 1}, {"tokens", report.prompt_lengths[p]},
                       {"unique_completions", report.unique_completions[p]}, {"cells", cells}});
  }
  nlohmann::json out = {{"passed", report.passed()},   {"baseline", baseline_name(report)},
                        {"configs", configs},          {"runs", report.runs},
                        {"identical", report.identical}, {"sequences", report.sequences},
                        {"prompts", prompts}};
  if (report.has_oracle) out["oracle_matches"] = report.oracle_matches;
  if (trace) {
    out["trace"] = {{"prompt", trace->prompt + 1},
                    {"config", config_name(report.configs, trace->config)},
                    {"run", trace->run + 1},
                    {"layer", trace->layer ? nlohmann::json(*trace->layer) : nlohmann::json(nullptr)},
                    {"operation", trace->operation},
                    {"position", trace->position},
                    {"positions_compared", trace->positions_compared}};
  }
  return out;
}

}  // namespace ditto::verify
