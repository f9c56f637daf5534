#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "model/tensor_store.h"
#include "tensor/limits.h"

namespace ditto {

namespace {

using nlohmann::json;

DType safetensors_dtype(const std::string& name, const std::string& tensor) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  throw Error("tensor '" + tensor + "' has dtype '" + name + "'; ditto reads F32, F16 and BF16");
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void TensorStore::add(const std::string& name, TensorView tensor, const std::string& origin) {
  if (!tensors_.emplace(name, std::move(tensor)).second)
    throw Error("tensor '" + name + "' appears twice (again in " + origin + ")");
}

const TensorView& TensorStore::get(const std::string& name) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) throw Error("the checkpoint has no tensor " + describe(name));
  return found->second;
}

std::string TensorStore::describe(const std::string& name) const {
  const std::string in_file = file_naming_ ? file_naming_(name) : name;
  return in_file == name || in_file.empty() ? "'" + name + "'" : "'" + in_file + "' (transformers' " + name + ")";
}

std::vector<std::pair<std::string, TensorView>> parse_safetensors(std::span<const std::byte> bytes,
                                                                  const std::string& name) {
  const size_t size = bytes.size();
  if (size < 8) throw Error(name + " is not a safetensors file: shorter than its 8-byte header length");
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | uint8_t(bytes[size_t(i)]);
  if (header_length > size - 8)
    throw Error(name + ": the header length (" + std::to_string(header_length) +
                " bytes) runs past the end of the file (" + std::to_string(size) + " bytes)");
  if (header_length > limits::kMaxSafetensorsHeaderBytes)
    throw Error(name + ": the header length is " + std::to_string(header_length) + " bytes, outside the accepted range 0.." +
                std::to_string(limits::kMaxSafetensorsHeaderBytes));
  const json header =
      parse_json(std::string_view(reinterpret_cast<const char*>(bytes.data() + 8), header_length), name + ": the header");
  if (!header.is_object()) throw Error(name + ": the header is not a JSON object");

  const std::byte* data = bytes.data() + 8 + header_length;
  const size_t data_size = size - 8 - header_length;
  struct Extent {
    size_t begin, end;
    std::string name;
  };
  std::vector<Extent> extents;
  std::vector<std::pair<std::string, TensorView>> tensors;
  for (const auto& [tensor_name, entry] : header.items()) {
    if (tensor_name == "__metadata__") continue;
    const std::string where = name + ", tensor '" + tensor_name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() || !entry.contains("data_offsets") ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      throw Error(where + ": needs a dtype, a shape and two data_offsets");
    TensorView tensor;
    tensor.dtype = safetensors_dtype(entry["dtype"].get<std::string>(), tensor_name);
    size_t elements = 1;
    for (const json& dim : entry["shape"]) {
      if (!dim.is_number_unsigned()) throw Error(where + ": a dimension is not a non-negative integer");
      const uint64_t d = dim.get<uint64_t>();
      if (d != 0 && elements > limits::kMaxTensorElements / d)
        throw Error(where + ": the shape is absurdly large (a tensor holds at most 2^48 values)");
      elements *= d;
      tensor.shape.push_back(size_t(d));
    }
    const json& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw Error(where + ": data_offsets must be non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") lie outside the " + std::to_string(data_size) + " bytes of data");
    if (end - begin != elements * dtype_size(tensor.dtype))
      throw Error(where + ": holds " + std::to_string(end - begin) + " bytes but its shape and dtype need " +
                  std::to_string(elements * dtype_size(tensor.dtype)));
    tensor.data = data + begin;
    tensor.bytes = end - begin;
    extents.push_back({size_t(begin), size_t(end), tensor_name});
    tensors.emplace_back(tensor_name, std::move(tensor));
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].begin < extents[i - 1].end)
      throw Error(name + ": tensors '" + extents[i - 1].name + "' and '" + extents[i].name + "' overlap");
  return tensors;
}

void load_safetensors(const std::string& path, TensorStore& store) {
  auto file = std::make_shared<MappedFile>(path);
  const std::string name = "'" + path + "'";
  for (auto& [tensor_name, tensor] : parse_safetensors(std::span(file->data(), file->size()), name))
    store.add(tensor_name, std::move(tensor), name);
  store.add_file(std::move(file));
}

TensorStore load_safetensors_checkpoint(const std::string& directory) {
  namespace fs = std::filesystem;
  const fs::path dir(directory);
  TensorStore store;
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    load_safetensors(single.string(), store);
  } else if (fs::exists(index)) {
    const json map = parse_json(read_text_file(index), "'" + index.string() + "'");
    if (!map.contains("weight_map") || !map["weight_map"].is_object())
      throw Error("'" + index.string() + "' has no weight_map object");
    std::set<std::string> shards;
    for (const auto& [name, file] : map["weight_map"].items()) {
      if (!file.is_string()) throw Error("'" + index.string() + "': the shard of '" + name + "' is not a file name");
      const std::string shard = file.get<std::string>();
      if (shard.find('/') != std::string::npos) throw Error("'" + index.string() + "': shard '" + shard + "' is not a plain file name");
      shards.insert(shard);
    }
    for (const std::string& shard : shards) load_safetensors((dir / shard).string(), store);
    for (const auto& [name, file] : map["weight_map"].items())
      if (!store.contains(name))
        throw Error("'" + index.string() + "' names tensor '" + name + "' but " + file.get<std::string>() + " lacks it");
  } else {
    throw Error("'" + directory + "' holds neither model.safetensors nor model.safetensors.index.json");
  }
  return store;
}

}  // namespace ditto
