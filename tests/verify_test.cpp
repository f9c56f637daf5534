// The comparison behind `ditto verify` on hand-made child outputs: what counts as a divergence,
// where it is reported, and how a trace localises it.
#include <gtest/gtest.h>

#include "ditto/error.h"
#include "verify/verify.h"

namespace ditto::verify {
namespace {

PromptRun run(std::vector<int32_t> ids, std::vector<uint64_t> hashes) { return {std::move(ids), std::move(hashes), {}}; }

// Two configurations (whole, 17) x two runs x two prompts, all equal.
struct Fixture {
  std::vector<Config> configs = {{0, 1}, {17, 1}};
  std::vector<size_t> lengths = {5, 9};
  Runs runs;
  Fixture() {
    const std::vector<PromptRun> prompts = {run({10, 11, 12}, {1, 2, 3}), run({20, 21, 22}, {4, 5, 6})};
    runs.assign(2, std::vector<std::vector<PromptRun>>(2, prompts));
  }
};

TEST(Verify, ParsesModesAndThreadCounts) {
  EXPECT_EQ(parse_modes("whole,1,16,17"), (std::vector<size_t>{0, 1, 16, 17}));
  EXPECT_EQ(parse_threads("1,2"), (std::vector<int>{1, 2}));
  for (const char* bad : {"", "0", "whole,", "-1", "16x", "all", "268435457"}) EXPECT_THROW(parse_modes(bad), Error) << bad;
  EXPECT_EQ(parse_modes("268435456"), (std::vector<size_t>{268435456}));
  for (const char* bad : {"", "0", "two", "1,,2"}) EXPECT_THROW(parse_threads(bad), Error) << bad;
}

TEST(Verify, RunsThatAgreePass) {
  Fixture f;
  const Report report = compare(f.configs, f.runs, f.lengths, {}, 3);
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(report.identical, 8u);
  EXPECT_EQ(report.sequences, 8u);
  EXPECT_EQ(report.unique_completions, (std::vector<size_t>{1, 1}));
}

TEST(Verify, ALogitsHashAloneIsADivergence) {
  Fixture f;
  f.runs[1][1][0].step_hashes[2] = 99;  // config 17, run 2, prompt 1: same ids, other logits at step 2
  const Report report = compare(f.configs, f.runs, f.lengths, {}, 3);
  EXPECT_FALSE(report.passed());
  EXPECT_FALSE(report.cells[0][0].first);
  EXPECT_FALSE(report.cells[1][1].first);
  const Divergence& d = *report.cells[0][1].first;
  EXPECT_EQ(d.run, 1u);
  EXPECT_EQ(d.step, 2u);
  EXPECT_TRUE(d.same_id());
  EXPECT_EQ(report.cells[0][1].diverging_runs, (std::vector<size_t>{1}));
  EXPECT_EQ(report.identical, 7u);
  EXPECT_EQ(report.unique_completions, (std::vector<size_t>{1, 1}));
}

TEST(Verify, TheFirstDifferingStepIsReportedWithBothIds) {
  Fixture f;
  f.runs[1][0][1] = run({20, 30, 31}, {4, 7, 8});
  f.runs[1][1][1] = run({20}, {4});  // stopped early
  const Report report = compare(f.configs, f.runs, f.lengths, {}, 3);
  const Cell& cell = report.cells[1][1];
  EXPECT_EQ(cell.diverging_runs, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(cell.first->run, 0u);
  EXPECT_EQ(cell.first->step, 1u);
  EXPECT_EQ(cell.first->expected, 21);
  EXPECT_EQ(cell.first->got, 30);
  EXPECT_EQ(report.unique_completions, (std::vector<size_t>{1, 3}));
  EXPECT_NE(render_table(report, {"1", "2"}, {}).find("unique completions per prompt: 3 for prompt 2; 1 for the other 1\n"),
            std::string::npos);
}

TEST(Verify, TheOracleSetsTheExpectedIds) {
  Fixture f;
  const std::vector<std::vector<int32_t>> oracle = {{10, 11, 12, 13}, {20, 99, 22, 23}};  // longer rows are cut to -n
  const Report report = compare(f.configs, f.runs, f.lengths, oracle, 3);
  EXPECT_EQ(report.oracle_matches, 4u);
  EXPECT_EQ(report.identical, 8u);
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_FALSE(report.cells[0][c].first);
    EXPECT_EQ(report.cells[1][c].first->step, 1u);
    EXPECT_EQ(report.cells[1][c].first->expected, 99);
    EXPECT_EQ(report.cells[1][c].first->got, 21);
  }
  const std::string table = render_table(report, {"1", "2"}, [](int32_t id) { return "t" + std::to_string(id); });
  EXPECT_NE(table.find("tok 1: 99 \"t99\" -> 21 \"t21\" (all runs)  〃\n"), std::string::npos) << table;
  EXPECT_NE(table.find("FAIL: 8 of 8 sequences identical to the baseline (whole run 1) in ids and logits; 4 of 8 match "
                       "the oracle; unique completions per prompt: 1 for every prompt\n"),
            std::string::npos)
      << table;
}

TEST(Verify, AnOracleOfTheWrongShapeIsRefused) {
  EXPECT_THROW(check_oracle({{1, 2, 3}}, 2, 3), Error);
  EXPECT_THROW(check_oracle({{1, 2, 3}, {1, 2}}, 2, 3), Error);
  EXPECT_NO_THROW(check_oracle({}, 2, 3));
}

TEST(Verify, ReadsTheChildProtocol) {
  const auto runs = parse_child_output(
      "{\"prompt\":0,\"ids\":[5,6],\"step_hashes\":[\"00000000000000ff\",\"0000000000000001\"],"
      "\"trace\":[{\"layer\":0,\"op\":\"q\",\"hashes\":[\"0000000000000002\"]}]}\n",
      1);
  EXPECT_EQ(runs[0].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(runs[0].step_hashes, (std::vector<uint64_t>{255, 1}));
  EXPECT_EQ(runs[0].trace[0].operation, "q");
  EXPECT_EQ(runs[0].trace[0].hashes, (std::vector<uint64_t>{2}));
  EXPECT_THROW(parse_child_output("{\"prompt\":0,\"ids\":[5],\"step_hashes\":[\"ff\"]}\n", 1), Error);
  EXPECT_THROW(parse_child_output("{\"prompt\":0,\"ids\":[5],\"step_hashes\":[]}\n", 1), Error);
  EXPECT_THROW(parse_child_output("not json\n", 1), Error);
  EXPECT_THROW(parse_child_output("", 1), Error);
}

// Positions 0..4 are the prompt of 5 tokens; 5 and 6 are fed generated ids 0 and 1.
std::vector<TraceRecorder::Step> trace(uint64_t differs_at_q, uint64_t differs_at_up) {
  std::vector<TraceRecorder::Step> steps = {{0, "q", std::vector<uint64_t>(7, 1)},
                                            {0, "up", std::vector<uint64_t>(7, 2)},
                                            {1, "q", std::vector<uint64_t>(7, 3)},
                                            {1, "up", std::vector<uint64_t>(7, 4)}};
  if (differs_at_q < 7) steps[2].hashes[differs_at_q] = 9;
  if (differs_at_up < 7) steps[3].hashes[differs_at_up] = 9;
  return steps;
}

TEST(Verify, TheTraceNamesTheFirstLayerAndOperationThatDiffers) {
  Fixture f;
  for (auto& config : f.runs)
    for (auto& r : config)
      for (auto& p : r) p.trace = trace(99, 99);
  f.runs[1][0][0].trace = trace(99, 3);  // layer 1 up differs from position 3 on
  f.runs[1][0][0].step_hashes[0] = 7;
  const Report report = compare(f.configs, f.runs, f.lengths, {}, 3);
  const auto d = localise(report, f.runs);
  ASSERT_TRUE(d && d->layer);
  EXPECT_EQ(d->config, 1u);
  EXPECT_EQ(d->run, 0u);
  EXPECT_EQ(*d->layer, 1u);
  EXPECT_EQ(d->operation, "up");
  EXPECT_EQ(d->position, 3u);
  EXPECT_EQ(render_trace(*d, report),
            "trace: prompt 1, 17 run 1 against the baseline (whole run 1): first difference at layer 1, operation up, "
            "position 3 (of 7 positions with the same input)\n");
}

TEST(Verify, TheTraceComparesOnlyPositionsWhoseInputsAgree) {
  Fixture f;
  for (auto& config : f.runs)
    for (auto& r : config)
      for (auto& p : r) p.trace = trace(99, 99);
  // Generated id 0 differs, so position 5 (fed id 0) and later have other inputs: a difference
  // there says nothing. Before it, nothing differs: the cause lies after the last layer.
  f.runs[1][0][0] = run({77, 50, 12}, {1, 8, 3});
  f.runs[1][0][0].trace = trace(6, 5);
  const Report report = compare(f.configs, f.runs, f.lengths, {}, 3);
  const auto d = localise(report, f.runs);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->layer);
  EXPECT_EQ(d->positions_compared, 5u);
}

TEST(Verify, PromptLabelsShowTheStartOfTheText) {
  EXPECT_EQ(prompt_label(0, 5, ""), "1 (5 tok)");
  EXPECT_EQ(prompt_label(2, 5, "Name one primary color."), "3 (5 tok) \"Name one primary color.\"");
  EXPECT_EQ(prompt_label(0, 9, "Write one factual sentence about local inference"), "1 (9 tok) \"Write one factual sentence a…\"");
  EXPECT_EQ(prompt_label(0, 9, std::string(30, 'x') + "\n"), "1 (9 tok) \"" + std::string(28, 'x') + "…\"");
  EXPECT_EQ(prompt_label(0, 9, "日本語のテキストをここに書いて、長くなるようにもう少し書きます"),
            "1 (9 tok) \"日本語のテキストをここに書いて、長くなるようにもう少し書…\"");
}

}  // namespace
}  // namespace ditto::verify
