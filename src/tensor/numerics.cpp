#include "ditto/numerics.h"

#include "ditto/error.h"

namespace ditto {

std::string numerics_name(Numerics numerics) { return numerics == Numerics::Int8 ? "int8" : "exact"; }

Numerics parse_numerics(const std::string& name) {
  if (name == "exact") return Numerics::Exact;
  if (name == "int8") return Numerics::Int8;
  throw Error("unknown numerics '" + name + "' (expected exact or int8)");
}

}  // namespace ditto
