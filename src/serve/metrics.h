#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/scheduler_thread.h"

namespace ditto::serve {

// A Prometheus histogram: counts of observations at or below each bound.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double value);
  // The sample lines of metric `name` (…_bucket, …_sum, …_count).
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The server's counters and latency histograms, for GET /metrics in Prometheus' text format
// (version 0.0.4). Any thread.
class Metrics {
 public:
  void count_http(const std::string& endpoint, int status);
  void count_sequence(size_t prompt_tokens);  // a sequence submitted
  // A generated token: a sequence's first, `seconds` after its request arrived, or a later one,
  // `seconds` after the sequence's previous token.
  void count_token(bool first, double seconds);
  void count_finished(const std::string& finish_reason);
  std::string render(const SchedulerThread::Status& status) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  std::map<std::string, uint64_t> finished_;
  uint64_t sequences_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram first_token_{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram token_interval_{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
};

}  // namespace ditto::serve
