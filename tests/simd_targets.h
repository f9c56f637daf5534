#pragma once
#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/kernels.h"

namespace ditto::testing {

// Runs `check` once per SIMD target the CPU supports and the build compiled, with the kernels
// dispatched to it (targets without fma run the scalar reference), then restores the default.
template <typename Check>
void for_each_target(Check check) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    ASSERT_EQ(kernels::target_name(), hwy::TargetName(target));
    check();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace ditto::testing
