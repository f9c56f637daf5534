// Python bindings of the tokenizer (src/tokenizer), registered into the _ditto module.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void bind_tokenizer(py::module_& /*module*/) {}
