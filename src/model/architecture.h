#pragma once
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ditto/model.h"
#include "model/config.h"

namespace ditto {

// How the rows of the q and k projections are ordered in a file: as transformers has them, or
// as llama.cpp's converter permutes them for its RoPE (GGUF files of the llama family).
enum class QkLayout { Transformers, InterleavedRope };

// transformers' names of a mixture-of-experts block's tensors, within a layer: the router
// `router`, expert e's matrices `expert` + e + "." + gate / up / down.
struct ExpertNames {
  std::string_view router, expert, gate, up, down;
};

// A whole-number GGUF metadata key, "<general.architecture>." + `gguf`, and the config.json key
// it is read as (src/model/gguf_model.cpp); a required one's absence is an error.
struct GgufKey {
  const char* gguf;
  const char* hf;
  bool required;
};

// What sets one decoder family apart: its names, how its config maps onto ModelConfig beyond
// the fields every family shares (src/model/config.cpp), and what its blocks do differently
// (the flags it sets in ModelConfig, which the decoder follows). One file per family in
// src/model/architectures/, listed in the registry (architecture.cpp).
struct Architecture {
  std::string_view name;       // transformers' model_type
  std::string_view gguf_name;  // GGUF's general.architecture
  QkLayout gguf_qk_layout;
  // Reads the family's own fields from config.json (GGUF metadata arrives translated into
  // config.json's keys), refusing with a ditto::Error what the decoder does not implement.
  void (*read_config)(const ConfigFields& config, ModelConfig& out);
  // The file holds q, k and v as one matrix (qkv_proj), and gate and up as one (gate_up_proj),
  // each split at load into the decoder's matrices (Phi-3).
  bool fused_projections = false;
  // A mixture-of-experts family: its tensors' names. GGUF files of one general.architecture
  // may hold either kind (llama: Llama or Mixtral); their expert_count tells which.
  const ExpertNames* experts = nullptr;
  // The family's own GGUF keys, read with those every family's files have; and what its files
  // leave to llama.cpp's conventions for it, written into the config read from them (in
  // config.json's terms; nullptr: nothing).
  std::span<const GgufKey> gguf_keys = {};
  void (*gguf_conventions)(nlohmann::json& config) = nullptr;
  // GGUF block tensors that llama.cpp names otherwise in this family than in Llama's files:
  // {part of "blk.N.part", part of transformers' "model.layers.N.part"}.
  std::span<const std::pair<const char*, const char*>> gguf_block_tensors = {};
};

// The family of a config.json model_type, or of a GGUF general.architecture with or without
// experts; nullptr if ditto does not run it.
const Architecture* find_architecture(std::string_view model_type);
const Architecture* find_gguf_architecture(std::string_view gguf_name, bool experts);
// "qwen3, llama": the families ditto runs, for error messages.
std::string architecture_names();

// The registry's entries, one per file in src/model/architectures/.
const Architecture& qwen3_architecture();
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& mistral_architecture();
const Architecture& phi3_architecture();
const Architecture& mixtral_architecture();
const Architecture& qwen3_moe_architecture();
const Architecture& gemma3_architecture();

}  // namespace ditto
