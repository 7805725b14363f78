// PersistentPanel (persistent_panel.h): the kernel and its launch.
#include <algorithm>

#include <climits>

#include "backend/cuda/persistent_panel.h"
#include "backend/cuda/persistent_panel_finish.cuh"

namespace stripesolve::backend::cuda {
namespace {

using namespace panel;

__global__ void __launch_bounds__(kThreads, 1) panel_kernel(Shape s, Scratch x) {
  extern __shared__ __align__(16) double smem[];
  Block block(s, x, smem);
  for (int c0 = 0; c0 < s.h; c0 += kOuter) {
    const int nb = min(kOuter, s.h - c0);
    if (c0 > 0) block.update_columns(c0, nb);
    block.laps.lap(0);
    for (int s8 = 0; s8 < nb; s8 += kSub) block.factor_eight(c0, nb, s8);
    if (c0 + nb < s.h) block.pivot_rows_right(c0, nb);
  }
  finish(block);
}

Scratch scratch_in(void* p, int64_t h) {
  auto* bytes = static_cast<char*>(p);
  Scratch x;
  x.counter = reinterpret_cast<unsigned*>(bytes);
  x.phases = reinterpret_cast<long long*>(bytes + 64);
  bytes += 256;
  x.slots = reinterpret_cast<double*>(bytes);
  bytes += sizeof(double) * 2 * kMaxBlocks * kSlot;
  x.move_count = reinterpret_cast<int*>(bytes);
  bytes += 256;
  x.moves = reinterpret_cast<int*>(bytes);
  bytes += sizeof(int) * 4 * h;
  bytes = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(bytes) + 255) / 256 * 256);
  x.udiag = reinterpret_cast<double*>(bytes);
  bytes += sizeof(double) * h * kOuter;
  x.temp = reinterpret_cast<double*>(bytes);
  return x;
}

}  // namespace

int PersistentPanel::blocks_for(int64_t m, int wanted) {
  const int64_t least = (m + kMaxRowsPerBlock - 1) / kMaxRowsPerBlock;
  return static_cast<int>(
      std::clamp<int64_t>(std::max<int64_t>(wanted, least), 1, std::max<int64_t>(1, m)));
}

uint64_t PersistentPanel::scratch_bytes(int64_t h, int /*blocks*/) {
  return 1024 + sizeof(double) * 2 * kMaxBlocks * kSlot + sizeof(int) * 4 * h +
         sizeof(double) * h * kOuter + sizeof(double) * 2 * h * h + 256;
}

cudaError_t PersistentPanel::factor(double* a, int64_t ld, int64_t m, int64_t h, int32_t* ipiv,
                                    int32_t* info, int blocks, void* scratch, cudaStream_t stream) {
  const int g = blocks_for(m, blocks);
  if (h <= 0 || h % kSub != 0 || h > kMaxColumns || m < h || m >= INT_MAX || ld < h ||
      ld % 2 != 0 || reinterpret_cast<uintptr_t>(a) % 16 != 0 || g > kMaxBlocks) {
    return cudaErrorInvalidValue;
  }
  cudaError_t err =
      cudaFuncSetAttribute(panel_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  Scratch x = scratch_in(scratch, h);
  // The barrier's counter, the phase clock and the slots' tags start at zero.
  if (err == cudaSuccess) {
    err = cudaMemsetAsync(x.counter, 0, 256 + sizeof(double) * 2 * kMaxBlocks * kSlot, stream);
  }
  if (err == cudaSuccess) err = cudaMemsetAsync(info, 0, sizeof(int32_t), stream);
  if (err != cudaSuccess) return err;
  Shape s{a,    ld,  static_cast<int>(m), static_cast<int>(h), static_cast<int>((m + g - 1) / g),
          ipiv, info};
  void* args[] = {&s, &x};
  return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(panel_kernel), dim3(g), dim3(kThreads),
                                     args, kSharedBytes, stream);
}

int PersistentPanel::resident_blocks(int device) {
  int current = 0, sms = 0, cooperative = 0, per_sm = 0;
  if (cudaGetDevice(&current) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for the next launch check of this thread
    return 0;
  }
  const bool ok =
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device) == cudaSuccess &&
      cudaFuncSetAttribute(panel_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           kSharedBytes) == cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, panel_kernel, kThreads,
                                                    kSharedBytes) == cudaSuccess;
  (void)cudaSetDevice(current);
  if (!ok) (void)cudaGetLastError();
  if (!ok || cooperative == 0) return 0;
  return std::min(kMaxBlocks, sms * per_sm);
}

const long long* PersistentPanel::phase_nanoseconds(const void* scratch) {
  return reinterpret_cast<const long long*>(static_cast<const char*>(scratch) + 64);
}

}  // namespace stripesolve::backend::cuda
