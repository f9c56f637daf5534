#include "ditto/model.h"

#include "ditto/load.h"
#include "model/weights.h"

namespace ditto {

Model::Model(ModelConfig config, std::unique_ptr<ModelWeights> weights)
    : config_(std::move(config)), weights_(std::move(weights)) {}

Model::~Model() = default;

size_t Model::parameter_count() const {
  const ModelConfig& c = config_;
  const size_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const size_t per_layer = 2 * c.hidden_size + 2 * q_width * c.hidden_size + 2 * kv_width * c.hidden_size +
                           3 * c.hidden_size * c.intermediate_size + (c.qk_norm ? 2 * c.head_dim : 0);
  return c.vocab_size * c.hidden_size * (c.tied_embeddings ? 1 : 2) + c.layers * per_layer + c.hidden_size;
}

namespace {

size_t packed_bytes(const MatrixView& m) { return m.panels() * m.panel_bytes(); }

}  // namespace

size_t Model::streamed_weight_bytes() const {
  size_t bytes = weights_->part.head ? packed_bytes(weights_->output_matrix()) : 0;
  for (const LayerWeights& l : weights_->layers)
    for (const PackedMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) bytes += packed_bytes(m->view());
  return bytes;
}

double Model::flops_per_position(double context, double logit_share) const {
  const ModelConfig& c = config_;
  const double q = double(c.heads * c.head_dim), kv = double(c.kv_heads * c.head_dim), h = double(c.hidden_size);
  const double layer = 2.0 * (h * q * 2 + h * kv * 2 + 3 * h * double(c.intermediate_size)) + 4.0 * context * q;
  return double(c.layers) * layer + logit_share * 2.0 * h * double(c.vocab_size);
}

std::string Model::weight_type() const { return dtype_name(weights_->layers.front().q.view().dtype); }

std::shared_ptr<const Model> Model::load(const std::string& path) {
  LoadOptions options;
  options.tokenizer = false;
  return load_model(path, options).model;
}

}  // namespace ditto
