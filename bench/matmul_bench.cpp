// The seven matmuls of one SmolLM2-135M layer (q 576, k and v 192, o 576, gate and up 1536 outputs
// of 576 inputs, down 576 of 1536) on random Q4_1 weights, in the exact and the int8 numerics, as
// the decoder calls them (kernels::matmuls for q, k, v and for gate, up): milliseconds per layer
// for one row (decode), a chunk of 16 rows and 512 rows, and each chunk's time per row against
// 512 rows'. The fastest of --reps runs, so that a busy machine blurs the figures less. Runs on the
// best SIMD target, or on DITTO_SIMD_TARGET's (e.g. AVX2). A program to run by hand, not a test.
//
//   build/bench/matmul_bench [--threads 1] [--reps 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/matrix.h"
#include "../tests/test_checkpoint.h"

namespace {

using namespace ditto;

struct Layer {
  PackedMatrix q, k, v, o, gate, up, down;
};

PackedMatrix random_matrix(size_t n, size_t k, Numerics numerics, uint64_t seed) {
  const auto blocks = ditto::testing::random_quant_blocks(DType::Q4_1, n * k, seed, 0.05f);
  return PackedMatrix::pack(DType::Q4_1, n, k, blocks.data(), {}, numerics);
}

Layer random_layer(Numerics numerics) {
  const size_t hidden = 576, kv = 192, intermediate = 1536;
  return {random_matrix(hidden, hidden, numerics, 1),       random_matrix(kv, hidden, numerics, 2),
          random_matrix(kv, hidden, numerics, 3),           random_matrix(hidden, hidden, numerics, 4),
          random_matrix(intermediate, hidden, numerics, 5), random_matrix(intermediate, hidden, numerics, 6),
          random_matrix(hidden, intermediate, numerics, 7)};
}

// Milliseconds of the fastest of `reps` runs of the layer's matmuls on `rows` rows.
double layer_ms(const Layer& w, size_t rows, int threads, int reps) {
  std::vector<float> x(rows * 1536, 0.25f), q(rows * 576), k(rows * 192), v(rows * 192), o(rows * 576),
      gate(rows * 1536), up(rows * 1536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 201) - 100) / 64.0f;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    kernels::matmuls(x.data(), rows, {{{w.q.view(), q.data()}, {w.k.view(), k.data()}, {w.v.view(), v.data()}}}, threads);
    kernels::matmul(x.data(), rows, w.o.view(), o.data(), threads);
    kernels::matmuls(x.data(), rows, {{{w.gate.view(), gate.data()}, {w.up.view(), up.data()}}}, threads);
    kernels::matmul(gate.data(), rows, w.down.view(), o.data(), threads);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else return std::fprintf(stderr, "usage: matmul_bench [--threads 1] [--reps 200]\n"), 2;
  }
  kernels::pin_target_from_environment();
  std::printf("SmolLM2 layer, Q4_1, %s kernels, %d threads, fastest of %d\n", kernels::target_name().c_str(), threads,
              reps);
  std::printf("| numerics | 1 row ms | 16 rows ms | 512 rows ms | per row: 16 / 512 |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (Numerics numerics : {Numerics::Exact, Numerics::Int8}) {
    const Layer layer = random_layer(numerics);
    const double one = layer_ms(layer, 1, threads, reps), chunk = layer_ms(layer, 16, threads, reps),
                 whole = layer_ms(layer, 512, threads, std::max(3, reps / 20));
    std::printf("| %s | %.4f | %.4f | %.3f | %.2f |\n", numerics == Numerics::Exact ? "exact" : "int8", one, chunk,
                whole, (whole / 512) / (chunk / 16));
  }
}
