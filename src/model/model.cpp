#include "ditto/model.h"

#include <filesystem>

#include "ditto/error.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/gguf.h"
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

std::shared_ptr<const Model> load_gguf(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  const GgufFile gguf = parse_gguf(std::span(file->data(), file->size()), "'" + path + "'");
  ModelConfig config = gguf_model_config(gguf);
  const TensorStore store = gguf_tensor_store(file, gguf);
  auto weights = pack_hf_weights(store, config, find_architecture(config.architecture_name)->gguf_qk_layout);
  return std::make_shared<Model>(std::move(config), std::move(weights));
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(path)) return load_gguf(path);
  if (!fs::is_directory(path))
    throw Error("'" + path + "' is not a checkpoint directory (config.json with safetensors weights) nor a GGUF file");
  ModelConfig config = load_hf_config(path);
  const TensorStore store = load_safetensors_checkpoint(path);
  auto weights = pack_hf_weights(store, config);
  return std::make_shared<Model>(std::move(config), std::move(weights));
}

}  // namespace ditto
