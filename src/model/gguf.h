#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ditto/dtype.h"
#include "ditto/model.h"
#include "model/tensor_store.h"
#include "tensor/mapped_file.h"

namespace ditto {

// GGUF metadata value types, as numbered by the format.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

// One metadata value. A scalar holds one entry in `numbers` (integers, floats, bools) or in
// `strings`; an array holds all its elements there, of `element_type`. A double is exact for
// floats and for integers up to 2^53, so a scalar integer is also kept exactly, in `integer`.
struct GgufValue {
  GgufType type = GgufType::U32;
  GgufType element_type = GgufType::U32;  // arrays only
  std::vector<double> numbers;
  std::vector<std::string> strings;
  uint64_t integer = 0;   // a scalar of an integer type (or Bool): its magnitude
  bool negative = false;  // and its sign
};

// A tensor as the header describes it: shape in row-major order (the reverse of GGUF's ne[]),
// its bytes at data_offset + offset of the file.
struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;
  std::vector<size_t> shape;
  uint64_t offset = 0;  // from the start of the data section
  size_t bytes = 0;
};

// The parsed header of a GGUF file (version 2 or 3, little-endian).
struct GgufFile {
  uint32_t version = 0;
  size_t alignment = 32;
  size_t data_offset = 0;  // where the data section starts in the file
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;

  bool has(const std::string& key) const { return metadata.count(key) != 0; }
  // Typed reads of metadata; each throws ditto::Error naming the key when it is missing or of
  // another type. Integers are read exactly, not through a double; a float is read as it is
  // stored, F32 or F64, and its range is the caller's to check.
  uint64_t get_uint(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_string_array(const std::string& key) const;
  const std::vector<double>& get_number_array(const std::string& key) const;
};

// Parses and validates the header of a GGUF file held in `bytes`: magic, version, counts and
// string lengths that fit in the file, known metadata types, tensor types ditto reads, shapes,
// and tensor data that lies inside the file at the declared alignment without overlapping.
// Throws ditto::Error starting with `name` on any violation. With `tensors` false, only the
// header and the metadata are read (all a tokenizer needs, whatever the tensors' types).
GgufFile parse_gguf(std::span<const std::byte> bytes, const std::string& name, bool tensors = true);

// The decoder's hyper-parameters from the metadata of a GGUF file of a family ditto runs.
ModelConfig gguf_model_config(const GgufFile& gguf);

// The tensors of `file`, named as transformers names them (model.layers.N.self_attn.q_proj.weight,
// ...), so that pack_hf_weights packs them; stacked experts (blk.N.ffn_gate_exps, ...) as one
// matrix per expert. A tensor the decoder of `config` does not read is refused.
TensorStore gguf_tensor_store(std::shared_ptr<MappedFile> file, const GgufFile& gguf, const ModelConfig& config);

// The tokenizer of a GGUF file (tokenizer.ggml.*: tokens, token types, merges, pre-tokenizer
// name) as a Hugging Face tokenizer.json for Tokenizer::from_json: byte-level BPE ('gpt2') with
// a pre-tokenizer gguf_tokenizer.cpp knows, or SentencePiece ('llama'); anything else is refused
// with a ditto::Error.
std::string gguf_tokenizer_json(const GgufFile& gguf);

}  // namespace ditto
