#include "ditto/model.h"

#include <algorithm>

#include "ditto/load.h"
#include "model/weights.h"

namespace ditto {

Model::Model(ModelConfig config, std::unique_ptr<ModelWeights> weights)
    : config_(std::move(config)), weights_(std::move(weights)) {}

Model::~Model() = default;

size_t Model::parameter_count() const {
  const ModelConfig& c = config_;
  const size_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const size_t attention = 2 * q_width * c.hidden_size + 2 * kv_width * c.hidden_size +
                           (c.qkv_bias ? q_width + 2 * kv_width : 0) + (c.qk_norm ? 2 * c.head_dim : 0);
  size_t layers = 0;
  for (size_t l = 0; l < c.layers; ++l)
    layers += (c.post_norms ? 4 : 2) * c.hidden_size + attention +
              (c.sparse(l) ? c.experts * c.hidden_size * (1 + 3 * c.expert_intermediate_size)
                           : 3 * c.hidden_size * c.intermediate_size);
  return c.vocab_size * c.hidden_size * (c.tied_embeddings ? 1 : 2) + layers + c.hidden_size;
}

namespace {

size_t packed_bytes(const MatrixView& m) { return m.panels() * m.panel_bytes(); }

}  // namespace

size_t Model::streamed_weight_bytes() const {
  size_t bytes = weights_->part.head ? packed_bytes(weights_->output_matrix()) : 0;
  for (const LayerWeights& l : weights_->layers) {
    for (const PackedMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.router})
      if (m->view().data) bytes += packed_bytes(m->view());
    // A row reads experts_per_token of the experts: on average that share of them.
    size_t experts = 0;
    for (const ExpertWeights& e : l.experts)
      experts += packed_bytes(e.gate.view()) + packed_bytes(e.up.view()) + packed_bytes(e.down.view());
    if (!l.experts.empty()) bytes += experts / l.experts.size() * config_.experts_per_token;
  }
  return bytes;
}

double Model::flops_per_position(double context, double logit_share) const {
  const ModelConfig& c = config_;
  const double q = double(c.heads * c.head_dim), kv = double(c.kv_heads * c.head_dim), h = double(c.hidden_size);
  double layers = 0.0;
  for (size_t l = 0; l < c.layers; ++l) {
    const double mlp = c.sparse(l) ? h * double(c.experts) + 3 * h * double(c.expert_intermediate_size * c.experts_per_token)
                                   : 3 * h * double(c.intermediate_size);
    const double keys = c.window(l) != 0 ? std::min(context, double(c.window(l))) : context;
    layers += 2.0 * (h * q * 2 + h * kv * 2 + mlp) + 4.0 * keys * q;
  }
  return layers + logit_share * 2.0 * h * double(c.vocab_size);
}

std::string Model::weight_type() const { return dtype_name(weights_->layers.front().q.view().dtype); }

Numerics Model::numerics() const { return weights_->numerics; }

std::shared_ptr<const Model> Model::load(const std::string& path, std::optional<Numerics> numerics) {
  LoadOptions options;
  options.tokenizer = false;
  options.numerics = numerics;
  return load_model(path, options).model;
}

}  // namespace ditto
