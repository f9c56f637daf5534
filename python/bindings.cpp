// The Python module `ditto._ditto`: a thin layer over the C++ API, used by the oracle tests.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cctype>

#include "ditto/chat_template.h"
#include "ditto/error.h"
#include "ditto/session.h"
#include "model/gguf.h"
#include "kernels/kernels.h"
#include "runtime/sampler.h"
#include "tensor/matrix.h"

namespace py = pybind11;

void bind_tokenizer(py::module_& module);

namespace {

// Hands the logits to numpy without a copy, as a rows x vocab array.
py::array_t<float> to_array(std::vector<float> values, size_t vocab) {
  const size_t rows = values.size() / vocab;
  auto* owned = new std::vector<float>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return py::array_t<float>({rows, vocab}, owned->data(), free_when_done);
}

// SamplingParams from a dict whose keys are the field names; an unknown key is an error.
ditto::SamplingParams sampling_params(const py::dict& values) {
  ditto::SamplingParams params;
  for (const auto& [key, value] : values) {
    const std::string name = py::str(key);
    if (name == "temperature") params.temperature = value.cast<double>();
    else if (name == "top_k") params.top_k = value.cast<int>();
    else if (name == "top_p") params.top_p = value.cast<double>();
    else if (name == "min_p") params.min_p = value.cast<double>();
    else if (name == "repetition_penalty") params.repetition_penalty = value.cast<double>();
    else if (name == "presence_penalty") params.presence_penalty = value.cast<double>();
    else if (name == "frequency_penalty") params.frequency_penalty = value.cast<double>();
    else if (name == "penalty_window") params.penalty_window = value.cast<int>();
    else if (name == "logit_bias") params.logit_bias = value.cast<std::map<int32_t, double>>();
    else if (name == "seed") params.seed = value.cast<std::optional<uint64_t>>();
    else if (name == "logprobs") params.logprobs = value.cast<bool>();
    else if (name == "top_logprobs") params.top_logprobs = value.cast<int>();
    else throw ditto::Error("sampling: unknown parameter '" + name + "'");
  }
  return params;
}

// "q4_k" or "Q4_K": a quantised type by its name.
ditto::DType quantized_dtype(std::string name) {
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const ditto::DType dtype : ditto::kQuantizedDTypes)
    if (ditto::dtype_name(dtype) == name) return dtype;
  throw ditto::Error("unknown quantised type '" + name + "'");
}

}  // namespace

PYBIND11_MODULE(_ditto, m) {
  py::register_exception<ditto::Error>(m, "Error", PyExc_ValueError);
  ditto::kernels::pin_target_from_environment();
  m.def("simd_target", &ditto::kernels::target_name, "The SIMD target the kernels run on (DITTO_SIMD_TARGET pins one).");

  py::class_<ditto::Model, std::shared_ptr<ditto::Model>>(m, "Model")
      .def_static(
          "load",
          [](const std::string& path, const std::optional<std::string>& numerics) {
            std::optional<ditto::Numerics> chosen;
            if (numerics) chosen = ditto::parse_numerics(*numerics);
            return std::const_pointer_cast<ditto::Model>(ditto::Model::load(path, chosen));
          },
          py::arg("path"), py::arg("numerics") = py::none(),
          "Loads a GGUF file or checkpoint directory; numerics 'exact' or 'int8' (default: the file's).")
      .def_property_readonly("numerics", [](const ditto::Model& model) { return ditto::numerics_name(model.numerics()); })
      .def_property_readonly("vocab_size", [](const ditto::Model& model) { return model.config().vocab_size; })
      .def_property_readonly("eos_token_id", [](const ditto::Model& model) { return model.config().eos_token_id; })
      .def_property_readonly("parameter_count", &ditto::Model::parameter_count);

  py::class_<ditto::Session>(m, "Session")
      .def(py::init([](std::shared_ptr<ditto::Model> model, size_t capacity, const std::string& cache_dtype, int threads) {
             return std::make_unique<ditto::Session>(
                 model, ditto::SessionOptions{capacity, ditto::parse_dtype(cache_dtype), threads});
           }),
           py::arg("model"), py::arg("capacity") = 0, py::arg("cache_dtype") = "f32", py::arg("threads") = 1)
      .def(
          "prefill",
          [](ditto::Session& session, const std::vector<int32_t>& tokens, bool all_logits) {
            const size_t vocab = session.model().config().vocab_size;
            std::vector<float> logits;
            {
              py::gil_scoped_release release;
              logits = session.prefill(tokens, all_logits ? ditto::Logits::All : ditto::Logits::Last);
            }
            return to_array(std::move(logits), vocab);
          },
          py::arg("tokens"), py::arg("all_logits") = true,
          "Appends tokens; returns logits (rows x vocab) of every new position, or of the last one.")
      .def("decode", [](ditto::Session& session, int32_t token) {
        const size_t vocab = session.model().config().vocab_size;
        std::vector<float> logits;
        {
          py::gil_scoped_release release;
          logits = session.decode(token);
        }
        return to_array(std::move(logits), vocab).reshape({vocab});
      })
      .def_property_readonly("position", &ditto::Session::position)
      .def_property_readonly("capacity", &ditto::Session::capacity)
      .def("reset", &ditto::Session::reset);

  m.def("gguf_tokenizer", [](const std::string& path) {
        const ditto::MappedFile file(path);
        const ditto::GgufFile gguf = ditto::parse_gguf(std::span(file.data(), file.size()), path, /*tensors=*/false);
        return std::make_pair(ditto::gguf_tokenizer_json(gguf),
                              gguf.has("tokenizer.chat_template") ? gguf.get_string("tokenizer.chat_template") : "");
      }, py::arg("path"), "The tokenizer of a GGUF file: (tokenizer.json text for Tokenizer.from_json, chat template).");
  m.def(
      "dequantize",
      [](const std::string& type, const py::bytes& blocks) {
        const ditto::DType dtype = quantized_dtype(type);
        const std::string_view bytes = blocks;
        if (bytes.size() % ditto::dtype_block_bytes(dtype) != 0)
          throw ditto::Error(std::to_string(bytes.size()) + " bytes are not whole " + ditto::dtype_name(dtype) +
                             " blocks of " + std::to_string(ditto::dtype_block_bytes(dtype)) + " bytes");
        const size_t count = bytes.size() / ditto::dtype_block_bytes(dtype) * ditto::dtype_block_elements(dtype);
        // As one row of a packed matrix, read back as the reference kernels read weights.
        const auto row = ditto::PackedMatrix::pack(dtype, 1, count, bytes.data());
        py::array_t<float> values(count);
        ditto::ref::embedding_row(row.view(), 0, values.mutable_data());
        return values;
      },
      py::arg("type"), py::arg("blocks"),
      "Raw blocks of a quantised type ('q4_k', ...) dequantised to f32, as ditto packs and reads them.");
  m.def(
      "sample",
      [](py::array_t<float, py::array::c_style | py::array::forcecast> logits, const std::vector<int32_t>& history,
         const py::dict& params, uint64_t position) {
        if (logits.ndim() != 1) throw ditto::Error("sample: the logits must be one row (a 1-D array)");
        const ditto::SampledToken token = ditto::sample(std::span<const float>(logits.data(), size_t(logits.size())),
                                                        history, sampling_params(params), position);
        std::vector<std::pair<int32_t, float>> top;
        for (const auto& alternative : token.top) top.emplace_back(alternative.token, alternative.logprob);
        return py::make_tuple(token.token, token.logprob, top);
      },
      py::arg("logits"), py::arg("history"), py::arg("params"), py::arg("position"),
      "One token drawn from one row of logits (docs/sampling.md): (token, logprob, [(token, logprob), ...]).\n"
      "params: a dict of SamplingParams fields (temperature, top_k, top_p, min_p, repetition_penalty,\n"
      "presence_penalty, frequency_penalty, penalty_window, logit_bias, seed, logprobs, top_logprobs).");
  m.def("render_chat_template", [](const std::string& chat_template, const std::string& context_json) {
        const ditto::ChatTemplate parsed = ditto::ChatTemplate::parse(chat_template);
        const auto context = nlohmann::ordered_json::parse(context_json);
        py::gil_scoped_release release;
        return parsed.render(context);
      }, py::arg("chat_template"), py::arg("context_json"),
      "Renders a chat template with the variables of a JSON object; raises ditto.Error on a bad template.");
  m.def("apply_chat_template",
        [](const std::string& chat_template, const std::string& messages_json, const std::string& tools_json,
           bool add_generation_prompt, const std::map<std::string, std::string>& special_tokens,
           const std::string& extra_json) {
          const ditto::ChatTemplate parsed = ditto::ChatTemplate::parse(chat_template);
          ditto::ChatInputs inputs;
          inputs.messages = nlohmann::ordered_json::parse(messages_json);
          inputs.tools = nlohmann::ordered_json::parse(tools_json);
          inputs.add_generation_prompt = add_generation_prompt;
          inputs.special_tokens = special_tokens;
          inputs.extra = nlohmann::ordered_json::parse(extra_json);
          py::gil_scoped_release release;
          return parsed.render_chat(inputs);
        },
        py::arg("chat_template"), py::arg("messages_json"), py::arg("tools_json") = "null",
        py::arg("add_generation_prompt") = false, py::arg("special_tokens") = std::map<std::string, std::string>{},
        py::arg("extra_json") = "{}",
        "ChatTemplate::render_chat: a conversation rendered as transformers' apply_chat_template(tokenize=False) does.");

  bind_tokenizer(m);
}
