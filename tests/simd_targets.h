#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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

// Requires every target and thread count to give the reference's bits for the matmul of the
// `rows` rows of x with w; `what` names the case in a failure.
inline void expect_matmul_matches_reference(const MatrixView& w, const std::vector<float>& x, size_t rows,
                                            const std::string& what) {
  std::vector<float> expected(rows * w.rows);
  ref::matmul(x.data(), rows, w, expected.data(), 1);
  for_each_target([&] {
    for (int threads : {1, 3}) {
      std::vector<float> got(rows * w.rows, -1.0f);
      kernels::matmul(x.data(), rows, w, got.data(), threads);
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << what << " rows " << rows << " n " << w.rows << " k " << w.cols << " threads " << threads;
    }
  });
}

}  // namespace ditto::testing
