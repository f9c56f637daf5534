// Python bindings of the tokenizer (src/tokenizer), registered into the _ditto module.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ditto/tokenizer.h"

namespace py = pybind11;

void bind_tokenizer(py::module_& module) {
  using ditto::StreamDecoder;
  using ditto::Tokenizer;
  py::class_<Tokenizer>(module, "Tokenizer")
      .def_static("from_file", &Tokenizer::from_file, py::arg("path"))
      .def_static("from_json", [](const std::string& json_text) { return Tokenizer::from_json(json_text); },
                  py::arg("json_text"))
      .def("encode", [](const Tokenizer& tokenizer, const std::string& text, bool allow_special,
                        bool add_special_tokens) {
             py::gil_scoped_release release;
             return tokenizer.encode(text, allow_special, add_special_tokens);
           },
           py::arg("text"), py::arg("allow_special") = true, py::arg("add_special_tokens") = false)
      // For text that is not valid UTF-8, which a Python str cannot hold.
      .def("encode_bytes", [](const Tokenizer& tokenizer, const py::bytes& data, bool allow_special) {
             return tokenizer.encode(std::string(data), allow_special);
           },
           py::arg("data"), py::arg("allow_special") = true)
      .def("decode", [](const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
             return tokenizer.decode(ids, skip_special);
           },
           py::arg("ids"), py::arg("skip_special") = false)
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"))
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"))
      .def("token_bytes", [](const Tokenizer& tokenizer, int32_t id) -> std::optional<py::bytes> {
             std::optional<std::string> bytes = tokenizer.token_bytes(id);
             if (!bytes) return std::nullopt;
             return py::bytes(*bytes);
           },
           py::arg("id"))
      .def("is_special", &Tokenizer::is_special, py::arg("id"))
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size);

  py::class_<StreamDecoder>(module, "StreamDecoder")
      .def(py::init<const Tokenizer&, bool>(), py::arg("tokenizer"), py::arg("skip_special") = false,
           py::keep_alive<1, 2>())
      .def("push", &StreamDecoder::push, py::arg("id"))
      .def("finish", &StreamDecoder::finish);
}
