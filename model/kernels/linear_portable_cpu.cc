// Portable micro-kernels of the fixed-order linear: the contract's chains with std::fma, which
// rounds exactly like one vector FMA lane (linear_microkernel.h).
#include <cmath>

#include "model/kernels/linear_microkernel.h"

namespace lockstep::kernels::linear_internal {
namespace {

template <int MR, int NR>
void ChunkPortable(const ChunkTile& t) {
  for (int i = 0; i < MR; ++i) {
    const float* x = t.x + i * t.x_stride;
    for (int j = 0; j < NR; ++j) {
      const float* w = t.w + j * t.w_stride;
      float* carried = t.partial + (i * t.partial_stride + j) * kLanes;
      float acc[kLanes] = {};
      if (!t.first) {
        for (int l = 0; l < kLanes; ++l) acc[l] = carried[l];
      }
      for (int64_t k0 = 0; k0 < t.length; k0 += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const int64_t k = k0 + l;
          acc[l] = k < t.length ? std::fma(x[k], w[k], acc[l]) : std::fma(0.0f, 0.0f, acc[l]);
        }
      }
      if (!t.last) {
        for (int l = 0; l < kLanes; ++l) carried[l] = acc[l];
        continue;
      }
      float out = ReduceLanes(acc);
      if (t.bias != nullptr) out = out + t.bias[j];
      t.y[i * t.y_stride + j] = out;
    }
  }
}

template <int MR, int NR>
struct PortableFamily {
  static constexpr int kMaxColumns = MR <= 4 ? 12 / MR : 3;
  static void Run(const ChunkTile& t) {
    if constexpr (NR <= kMaxColumns) ChunkPortable<MR, NR>(t);
  }
};

constexpr KernelTable kPortableTable = MakeTable<PortableFamily>();

}  // namespace

const Isa& PortableIsa() {
  static constexpr Isa isa{LinearKernel::kPortable,
                           "portable",
                           &kPortableTable,
                           &kPortableTable,  // no prefetch in the portable family
                           &kPortableTable,
                           8,
                           8,
                           {0, 12, 6, 4, 3, 3, 3, 3, 3},
                           {0, 12, 6, 4, 3, 3, 3, 3, 3},
                           {0, 12, 6, 4, 3, 3, 3, 3, 3}};
  return isa;
}

}  // namespace lockstep::kernels::linear_internal
