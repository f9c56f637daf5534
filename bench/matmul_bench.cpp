// The seven matmuls of one SmolLM2-135M layer (q 576, k and v 192, o 576, gate and up 1536 outputs
// of 576 inputs, down 576 of 1536) on random weights (Q4_1, or --type's), in the exact and the
// int8 numerics, as the decoder calls them (kernels::matmuls for q, k, v and for gate, up):
// milliseconds per layer for one row (decode), a chunk of 16 rows and 512 rows, and each chunk's
// time per row against 512 rows'. The fastest of --reps runs, so that a busy machine blurs the
// figures less. One layer's weights stay in the caches from run to run; with --layers N the runs
// take N layers of their own in turn, and with enough of them (30, a model's) the weights come
// from memory, as a model's do. Runs on the best SIMD target, or on DITTO_SIMD_TARGET's (e.g.
// AVX2). A program to run by hand, not a test.
//
//   build/bench/matmul_bench [--threads 1] [--reps 200] [--layers 1] [--type q4_1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ditto/dtype.h"
#include "kernels/kernels.h"
#include "tensor/matrix.h"
#include "../tests/test_checkpoint.h"

namespace {

using namespace ditto;

struct Layer {
  PackedMatrix q, k, v, o, gate, up, down;
};

PackedMatrix random_matrix(DType dtype, size_t n, size_t k, Numerics numerics, uint64_t seed) {
  const auto blocks = ditto::testing::random_quant_blocks(dtype, n * k, seed, 0.05f);
  return PackedMatrix::pack(dtype, n, k, blocks.data(), {}, numerics);
}

// Layer `index` of a model of random weights of `dtype`.
Layer random_layer(DType dtype, Numerics numerics, uint64_t index) {
  const size_t hidden = 576, kv = 192, intermediate = 1536;
  const uint64_t seed = 7 * index;
  const auto matrix = [&](size_t n, size_t k, uint64_t i) { return random_matrix(dtype, n, k, numerics, seed + i); };
  return {matrix(hidden, hidden, 1),       matrix(kv, hidden, 2),           matrix(kv, hidden, 3),
          matrix(hidden, hidden, 4),       matrix(intermediate, hidden, 5), matrix(intermediate, hidden, 6),
          matrix(hidden, intermediate, 7)};
}

// Milliseconds of the fastest of `reps` runs of a layer's matmuls on `rows` rows, run r on
// layers[r % layers.size()].
double layer_ms(const std::vector<Layer>& layers, size_t rows, int threads, int reps) {
  std::vector<float> x(rows * 1536, 0.25f), q(rows * 576), k(rows * 192), v(rows * 192), o(rows * 576),
      gate(rows * 1536), up(rows * 1536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 201) - 100) / 64.0f;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const Layer& w = layers[size_t(r) % layers.size()];
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
  int threads = 1, reps = 200, layer_count = 1;
  std::string type = "q4_1";
  const auto usage = [] {
    std::fprintf(stderr, "usage: matmul_bench [--threads 1] [--reps 200] [--layers 1] [--type q4_1]\n"
                         "--type: q8_0, q4_0, q4_1, q5_0 or q5_1 (576 inputs hold no whole K-quant block);\n"
                         "the numbers positive\n");
    return 2;
  };
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) return usage();
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--layers")) layer_count = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--type")) type = argv[i + 1];
    else return usage();
  }
  DType dtype = DType::F32;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1})
    if (dtype_name(t) == type) dtype = t;
  if (dtype == DType::F32 || threads < 1 || reps < 1 || layer_count < 1) return usage();
  kernels::pin_target_from_environment();
  std::printf("SmolLM2 layer, %s, %s kernels, %d threads, fastest of %d, %d layer%s\n", type.c_str(),
              kernels::target_name().c_str(), threads, reps, layer_count, layer_count == 1 ? "" : "s");
  std::printf("| numerics | 1 row ms | 16 rows ms | 512 rows ms | per row: 16 / 512 |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (Numerics numerics : {Numerics::Exact, Numerics::Int8}) {
    std::vector<Layer> layers;
    for (int i = 0; i < layer_count; ++i) layers.push_back(random_layer(dtype, numerics, uint64_t(i)));
    const double one = layer_ms(layers, 1, threads, reps), chunk = layer_ms(layers, 16, threads, reps),
                 whole = layer_ms(layers, 512, threads, std::max(3, reps / 20));
    std::printf("| %s | %.4f | %.4f | %.3f | %.2f |\n", numerics == Numerics::Exact ? "exact" : "int8", one, chunk,
                whole, (whole / 512) / (chunk / 16));
  }
}
