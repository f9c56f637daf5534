#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ditto/dtype.h"
#include "tensor/mapped_file.h"

namespace ditto {

// A tensor as it lies in a mapped checkpoint file: validated to fit inside the file.
struct TensorView {
  DType dtype = DType::F32;
  std::vector<size_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// The named tensors of a checkpoint, with the mappings that hold their bytes.
class TensorStore {
 public:
  void add_file(std::shared_ptr<MappedFile> file) { files_.push_back(std::move(file)); }
  void add(const std::string& name, TensorView tensor, const std::string& origin);
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws ditto::Error naming the tensor when it is missing.
  const TensorView& get(const std::string& name) const;
  // How the file names the tensor transformers names `name` (GGUF: llama.cpp's names), for
  // messages; unset, the file uses transformers' names.
  void set_file_naming(std::function<std::string(const std::string&)> naming) { file_naming_ = std::move(naming); }
  // "'blk.0.attn_q.weight' (transformers' model.layers.0.self_attn.q_proj.weight)", or "'name'".
  std::string describe(const std::string& name) const;
  size_t size() const { return tensors_.size(); }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
  std::function<std::string(const std::string&)> file_naming_;
};

// The tensors of a safetensors file held in `bytes`, pointing into them. Validates the header:
// its length, JSON, dtypes, shapes, offsets inside the file and no two tensors overlapping.
// Throws ditto::Error starting with `name` on any violation.
std::vector<std::pair<std::string, TensorView>> parse_safetensors(std::span<const std::byte> bytes,
                                                                  const std::string& name);

// Maps one .safetensors file and adds its tensors (parse_safetensors) to `store`.
void load_safetensors(const std::string& path, TensorStore& store);

// Loads model.safetensors, or the shards listed in model.safetensors.index.json, of a
// checkpoint directory.
TensorStore load_safetensors_checkpoint(const std::string& directory);

}  // namespace ditto
