// The Python module `ditto._ditto`: a thin layer over the C++ API, used by the oracle tests.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cctype>

#include "ditto/error.h"
#include "ditto/session.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "kernels/ref/kernels.h"
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

  py::class_<ditto::Model, std::shared_ptr<ditto::Model>>(m, "Model")
      .def_static("load", [](const std::string& path) { return std::const_pointer_cast<ditto::Model>(ditto::Model::load(path)); })
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
        const ditto::GgufTokenizer tokenizer = ditto::read_gguf_tokenizer(path);
        return std::make_pair(tokenizer.tokenizer_json, tokenizer.chat_template);
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
  m.def("chat_prompt", &ditto::chat_prompt, py::arg("chat_template"), py::arg("user_text"),
        "One user message in the model's (ChatML) chat format, ready to encode.");

  bind_tokenizer(m);
}
