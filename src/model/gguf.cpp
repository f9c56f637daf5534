#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <set>

#include "ditto/error.h"

namespace ditto {

namespace {

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// The ggml tensor types ditto reads, and the names of the others for a clear refusal.
bool ggml_dtype(uint32_t type, DType& dtype) {
  switch (type) {
    case 0: dtype = DType::F32; return true;
    case 1: dtype = DType::F16; return true;
    case 2: dtype = DType::Q4_0; return true;
    case 3: dtype = DType::Q4_1; return true;
    case 6: dtype = DType::Q5_0; return true;
    case 7: dtype = DType::Q5_1; return true;
    case 8: dtype = DType::Q8_0; return true;
    case 10: dtype = DType::Q2_K; return true;
    case 11: dtype = DType::Q3_K; return true;
    case 12: dtype = DType::Q4_K; return true;
    case 13: dtype = DType::Q5_K; return true;
    case 14: dtype = DType::Q6_K; return true;
    case 30: dtype = DType::BF16; return true;
    default: return false;
  }
}

std::string ggml_type_name(uint32_t type) {
  static const char* const names[] = {"F32",     "F16",    "Q4_0",    "Q4_1",   "Q4_2",  "Q4_3",   "Q5_0",
                                      "Q5_1",    "Q8_0",   "Q8_1",    "Q2_K",   "Q3_K",  "Q4_K",   "Q5_K",
                                      "Q6_K",    "Q8_K",   "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
                                      "IQ3_S",   "IQ2_S",  "IQ4_XS",  "I8",     "I16",   "I32",    "I64",
                                      "F64",     "IQ1_M",  "BF16"};
  return type < std::size(names) ? names[type] : "unknown type " + std::to_string(type);
}

// Bounds-checked little-endian reads from the header.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  size_t position() const { return at_; }
  size_t remaining() const { return bytes_.size() - at_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining())
      throw Error(name_ + ": " + what + " claims " + std::to_string(length) + " bytes but only " +
                  std::to_string(remaining()) + " remain in the file");
    std::string text(reinterpret_cast<const char*>(bytes_.data() + at_), size_t(length));
    at_ += size_t(length);
    return text;
  }

  // A count of items that each take at least `min_item_bytes` of the rest of the file.
  uint64_t read_count(const char* what, size_t min_item_bytes) {
    const uint64_t count = read<uint64_t>(what);
    if (count > remaining() / min_item_bytes)
      throw Error(name_ + ": " + what + " is " + std::to_string(count) + ", more than the " +
                  std::to_string(remaining()) + " remaining bytes of the file can hold");
    return count;
  }

 private:
  void need(size_t n, const char* what) {
    if (n > remaining()) throw Error(name_ + ": the file ends inside " + what);
  }

  std::span<const std::byte> bytes_;
  const std::string& name_;
  size_t at_ = 0;
};

// Bytes a value of a scalar type takes; 0 for String and Array, which are variable.
size_t scalar_bytes(GgufType type) {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::String: case GgufType::Array: return 0;
  }
  return 0;
}

GgufType read_type(Reader& in, const std::string& name, const std::string& key) {
  const uint32_t type = in.read<uint32_t>("a metadata type");
  if (type > uint32_t(GgufType::F64))
    throw Error(name + ": metadata '" + key + "' has unknown value type " + std::to_string(type));
  return GgufType(type);
}

double read_number(Reader& in, GgufType type) {
  switch (type) {
    case GgufType::U8: return in.read<uint8_t>("a metadata value");
    case GgufType::I8: return in.read<int8_t>("a metadata value");
    case GgufType::U16: return in.read<uint16_t>("a metadata value");
    case GgufType::I16: return in.read<int16_t>("a metadata value");
    case GgufType::U32: return in.read<uint32_t>("a metadata value");
    case GgufType::I32: return in.read<int32_t>("a metadata value");
    case GgufType::F32: return in.read<float>("a metadata value");
    case GgufType::Bool: return in.read<uint8_t>("a metadata value") != 0;
    case GgufType::U64: return double(in.read<uint64_t>("a metadata value"));
    case GgufType::I64: return double(in.read<int64_t>("a metadata value"));
    case GgufType::F64: return in.read<double>("a metadata value");
    case GgufType::String: case GgufType::Array: break;
  }
  return 0.0;
}

GgufValue read_value(Reader& in, const std::string& name, const std::string& key) {
  GgufValue value;
  value.type = read_type(in, name, key);
  if (value.type == GgufType::String) {
    value.strings.push_back(in.read_string("a metadata string"));
  } else if (value.type == GgufType::Array) {
    value.element_type = read_type(in, name, key);
    if (value.element_type == GgufType::Array)
      throw Error(name + ": metadata '" + key + "' is an array of arrays, which ditto does not read");
    if (value.element_type == GgufType::String) {
      const uint64_t count = in.read_count("a metadata array length", 8);
      value.strings.reserve(size_t(count));
      for (uint64_t i = 0; i < count; ++i) value.strings.push_back(in.read_string("a metadata string"));
    } else {
      const uint64_t count = in.read_count("a metadata array length", scalar_bytes(value.element_type));
      value.numbers.reserve(size_t(count));
      for (uint64_t i = 0; i < count; ++i) value.numbers.push_back(read_number(in, value.element_type));
    }
  } else {
    value.numbers.push_back(read_number(in, value.type));
  }
  return value;
}

bool is_integer_type(GgufType type) {
  return type != GgufType::F32 && type != GgufType::F64 && type != GgufType::Bool && scalar_bytes(type) != 0;
}

const GgufValue& find_value(const GgufFile& gguf, const std::string& key) {
  const auto found = gguf.metadata.find(key);
  if (found == gguf.metadata.end()) throw Error("the GGUF file has no metadata '" + key + "'");
  return found->second;
}

}  // namespace

uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue& value = find_value(*this, key);
  if (!is_integer_type(value.type) || value.numbers[0] < 0)
    throw Error("GGUF metadata '" + key + "' is not a non-negative integer");
  return uint64_t(value.numbers[0]);
}

float GgufFile::get_float(const std::string& key) const {
  const GgufValue& value = find_value(*this, key);
  if (value.type != GgufType::F32 && value.type != GgufType::F64)
    throw Error("GGUF metadata '" + key + "' is not a floating-point number");
  return float(value.numbers[0]);
}

const std::string& GgufFile::get_string(const std::string& key) const {
  const GgufValue& value = find_value(*this, key);
  if (value.type != GgufType::String) throw Error("GGUF metadata '" + key + "' is not a string");
  return value.strings[0];
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& value = find_value(*this, key);
  if (value.type != GgufType::Array || value.element_type != GgufType::String)
    throw Error("GGUF metadata '" + key + "' is not an array of strings");
  return value.strings;
}

const std::vector<double>& GgufFile::get_number_array(const std::string& key) const {
  const GgufValue& value = find_value(*this, key);
  if (value.type != GgufType::Array || value.element_type == GgufType::String)
    throw Error("GGUF metadata '" + key + "' is not an array of numbers");
  return value.numbers;
}

GgufFile parse_gguf(std::span<const std::byte> bytes, const std::string& name, bool tensors) {
  Reader in(bytes, name);
  GgufFile gguf;
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0)
    throw Error(name + " is not a GGUF file: it does not start with the magic 'GGUF'");
  in.read<uint32_t>("the magic");
  gguf.version = in.read<uint32_t>("the version");
  if (gguf.version != 2 && gguf.version != 3)
    throw Error(name + ": GGUF version " + std::to_string(gguf.version) + " is not supported (only 2 and 3)");
  // A tensor info takes at least 8 (name length) + 4 (dims) + 4 (type) + 8 (offset) bytes; a
  // metadata entry at least 8 (key length) + 4 (type) + 1 (value).
  const uint64_t tensor_count = in.read<uint64_t>("the tensor count");
  const uint64_t kv_count = in.read_count("the metadata count", 13);
  if (tensor_count > in.remaining() / 24)
    throw Error(name + ": the tensor count " + std::to_string(tensor_count) + " is more than the file can hold");

  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("a metadata key");
    GgufValue value = read_value(in, name, key);
    if (!gguf.metadata.emplace(key, std::move(value)).second)
      throw Error(name + ": metadata '" + key + "' appears twice");
  }
  if (gguf.has("general.alignment")) {
    const uint64_t alignment = gguf.get_uint("general.alignment");
    if (alignment == 0 || alignment > 65536 || (alignment & (alignment - 1)) != 0)
      throw Error(name + ": general.alignment " + std::to_string(alignment) + " is not a power of two up to 65536");
    gguf.alignment = size_t(alignment);
  }
  if (!tensors) return gguf;

  std::set<std::string> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo tensor;
    tensor.name = in.read_string("a tensor name");
    const std::string where = name + ": tensor '" + tensor.name + "'";
    if (!names.insert(tensor.name).second) throw Error(where + " appears twice");
    const uint32_t dims = in.read<uint32_t>("a tensor's dimension count");
    if (dims == 0 || dims > kMaxDims)
      throw Error(where + " has " + std::to_string(dims) + " dimensions (1 to 4 expected)");
    std::vector<uint64_t> ne(dims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      ne[d] = in.read<uint64_t>("a tensor dimension");
      if (ne[d] == 0 || ne[d] > (uint64_t(1) << 48) / elements) throw Error(where + " has an absurd shape");
      elements *= ne[d];
    }
    tensor.ggml_type = in.read<uint32_t>("a tensor type");
    if (!ggml_dtype(tensor.ggml_type, tensor.dtype))
      throw Error(where + " has type " + ggml_type_name(tensor.ggml_type) +
                  "; ditto reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K");
    if (ne[0] % dtype_block_elements(tensor.dtype) != 0)
      throw Error(where + ": its rows of " + std::to_string(ne[0]) + " values are not whole blocks of " +
                  std::to_string(dtype_block_elements(tensor.dtype)));
    tensor.offset = in.read<uint64_t>("a tensor offset");
    if (tensor.offset % gguf.alignment != 0)
      throw Error(where + ": its offset " + std::to_string(tensor.offset) + " is not a multiple of the alignment " +
                  std::to_string(gguf.alignment));
    tensor.bytes = dtype_bytes(tensor.dtype, size_t(elements));
    for (uint32_t d = dims; d-- > 0;) tensor.shape.push_back(size_t(ne[d]));
    gguf.tensors.push_back(std::move(tensor));
  }

  gguf.data_offset = (in.position() + gguf.alignment - 1) / gguf.alignment * gguf.alignment;
  const size_t data_size = bytes.size() >= gguf.data_offset ? bytes.size() - gguf.data_offset : 0;
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& tensor : gguf.tensors) {
    if (tensor.offset > data_size || tensor.bytes > data_size - tensor.offset)
      throw Error(name + ": the data of tensor '" + tensor.name + "' (" + std::to_string(tensor.bytes) +
                  " bytes at offset " + std::to_string(tensor.offset) + ") runs past the end of the file");
    by_offset.push_back(&tensor);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->bytes)
      throw Error(name + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  return gguf;
}

}  // namespace ditto
