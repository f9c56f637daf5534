// Pinning the kernels to one SIMD target, e.g. to measure the AVX2 kernels on an AVX-512 machine.
#include <cctype>
#include <cstdlib>
#include <string>

#include "ditto/error.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"

namespace ditto::kernels {

void pin_target_from_environment() {
  static const bool pinned = [] {
    const char* given = std::getenv(kTargetVariable);
    if (given == nullptr || *given == '\0') return false;
    std::string name = given;
    for (char& c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
    int64_t chosen = 0, better = 0;
    std::string known;
    // Targets are bits, a lower bit a better target; the list runs from the best.
    for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
      known += (known.empty() ? "" : ", ") + std::string(hwy::TargetName(target));
      if (name == hwy::TargetName(target)) chosen = target;
      if (chosen == 0) better |= target;
    }
    if (chosen == 0)
      throw Error(std::string(kTargetVariable) + "=" + given + " is not a SIMD target of this CPU and build (" + known +
                  ")");
    hwy::DisableTargets(better);
    return true;
  }();
  (void)pinned;
}

}  // namespace ditto::kernels
