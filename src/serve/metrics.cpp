#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace ditto::serve {

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, double value, const std::string& labels = "") {
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + number(value) + "\n";
}

}  // namespace

void Histogram::observe(double value) {
  const size_t bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    cumulative += counts_[b];
    const std::string bound = b < bounds_.size() ? number(bounds_[b]) : "+Inf";
    sample(out, name + "_bucket", double(cumulative), "le=\"" + bound + "\"");
  }
  sample(out, name + "_sum", sum_);
  sample(out, name + "_count", double(count_));
}

void Metrics::count_http(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++http_[{endpoint, status}];
}

void Metrics::count_sequence(size_t prompt_tokens) {
  std::lock_guard lock(mutex_);
  ++sequences_;
  prompt_tokens_ += prompt_tokens;
}

void Metrics::count_token(bool first, double seconds) {
  std::lock_guard lock(mutex_);
  ++generated_tokens_;
  (first ? first_token_ : token_interval_).observe(seconds);
}

void Metrics::count_finished(const std::string& finish_reason) {
  std::lock_guard lock(mutex_);
  ++finished_[finish_reason];
}

std::string Metrics::render(const SchedulerThread::Status& status) const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "ditto_http_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
  for (const auto& [key, count] : http_)
    sample(out, "ditto_http_requests_total", double(count),
           "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"");
  header(out, "ditto_sequences_total", "counter", "Sequences submitted (one per choice of a request).");
  sample(out, "ditto_sequences_total", double(sequences_));
  header(out, "ditto_sequences_finished_total", "counter", "Sequences ended, by finish reason.");
  for (const auto& [reason, count] : finished_)
    sample(out, "ditto_sequences_finished_total", double(count), "finish_reason=\"" + reason + "\"");
  header(out, "ditto_prompt_tokens_total", "counter", "Prompt tokens of the sequences submitted.");
  sample(out, "ditto_prompt_tokens_total", double(prompt_tokens_));
  header(out, "ditto_generated_tokens_total", "counter", "Tokens generated.");
  sample(out, "ditto_generated_tokens_total", double(generated_tokens_));
  header(out, "ditto_prefix_cache_hit_tokens_total", "counter",
         "Prompt positions served from the prefix cache instead of computed.");
  sample(out, "ditto_prefix_cache_hit_tokens_total", double(status.kv.prefix_hit_positions));
  header(out, "ditto_sequences_running", "gauge", "Sequences in the batch.");
  sample(out, "ditto_sequences_running", double(status.running));
  header(out, "ditto_sequences_waiting", "gauge", "Sequences queued, waiting for room in the batch or the KV pool.");
  sample(out, "ditto_sequences_waiting", double(status.waiting));
  header(out, "ditto_kv_blocks", "gauge", "KV pool blocks: all of them, held by sequences, cached, free.");
  sample(out, "ditto_kv_blocks", double(status.kv.blocks), "state=\"total\"");
  sample(out, "ditto_kv_blocks", double(status.kv.used), "state=\"used\"");
  sample(out, "ditto_kv_blocks", double(status.kv.cached), "state=\"cached\"");
  sample(out, "ditto_kv_blocks", double(status.kv.free), "state=\"free\"");
  header(out, "ditto_kv_bytes", "gauge",
         "KV memory: the budget, and what the used blocks hold of it (less once their sliding-window layers give "
         "their memory back).");
  sample(out, "ditto_kv_bytes", double(status.kv.budget_bytes), "state=\"budget\"");
  sample(out, "ditto_kv_bytes", double(status.kv.used_bytes), "state=\"used\"");
  header(out, "ditto_kv_window_dropped_blocks", "gauge",
         "KV pool blocks whose sliding-window layers gave their memory back, every sequence being past them there.");
  sample(out, "ditto_kv_window_dropped_blocks", double(status.kv.window_dropped));
  header(out, "ditto_time_to_first_token_seconds", "histogram",
         "From a request's arrival to the first token of each of its sequences.");
  first_token_.render(out, "ditto_time_to_first_token_seconds");
  header(out, "ditto_inter_token_latency_seconds", "histogram", "Between two tokens of a sequence.");
  token_interval_.render(out, "ditto_inter_token_latency_seconds");
  return out;
}

}  // namespace ditto::serve
