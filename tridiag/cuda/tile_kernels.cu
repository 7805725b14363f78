// Fused SPIKE for strided batches (000 §II-III, with every level of the reduced systems kept in
// shared memory).
//
// The multi-kernel path (spike_kernels.cu) reads the input twice and writes the partition ends
// and reduced systems to global memory: about 80 bytes per unknown. When whole systems fit in
// one block's shared memory, none of that has to leave the SM: a block loads a tile of whole
// systems (transposed, as in spike_kernels.cu: element k of partition t at k * ld + t), each
// thread factors its 9-row partition and keeps y = A_t^-1 f, w (left spike) and v (right
// spike), the partition separators form a reduced system of T rows which is solved the same
// way one level down (T -> ceil(T/9) -> ... rows, until one thread solves the last <= 9 rows
// directly), and on the way back up each interior becomes x = y + w x_left + v x_right. Global
// traffic: dl, d, du, f read once, x written once (40 bytes per unknown).
//
// Tiles hold floor(9 T / n) systems, padded with identity rows; T = 128 threads for n <= 1152,
// 512 for n <= 4608 (about 220 KiB of shared memory: one block per SM).
#include "tridiag/cuda/tile_kernels.cuh"

#include <cuda_runtime.h>

#include <cuda_pipeline.h>

#include "tridiag/cuda/spike_device.cuh"

namespace stripesolve::tridiag::gpu {

namespace {

constexpr int M = kPartitionRows;
constexpr int kMaxLevels = 6;
constexpr int kSmallThreads = 128;
constexpr int kLargeThreads = 512;

// Level k of a tile of T partitions: R rows (P partitions of M rows, padded), pitch ld. The
// deepest level has R <= M rows and is solved directly (P = 1, ld = 1).
struct Level {
  int rows;
  int parts;
  int ld;
  std::size_t bytes;  // shared bytes of its arrays (dl, d, du, f, w and the kinds)
};

__host__ __device__ constexpr int odd_pitch(int p) { return p % 2 == 0 ? p + 1 : p; }

__host__ __device__ constexpr std::size_t level_bytes(int ld) {
  return std::size_t{5} * M * ld * sizeof(double) + (std::size_t{M} * ld + 7) / 8 * 8;
}

// Fills levels[0..count) for T partitions at level 0; returns count (the deepest is last).
__host__ __device__ constexpr int plan_levels(int threads, Level* levels) {
  int count = 0;
  int rows = threads * M;
  int parts = threads;
  int ld = threads + 1;
  while (true) {
    levels[count] = Level{rows, parts, ld, level_bytes(ld)};
    ++count;
    if (parts == 1 && rows <= M) break;
    rows = parts;
    if (rows <= M) {
      parts = 1;
      ld = 1;
    } else {
      parts = (rows + M - 1) / M;
      ld = odd_pitch(parts);
    }
  }
  return count;
}

__host__ __device__ constexpr std::size_t tile_shared_bytes(int threads) {
  Level levels[kMaxLevels] = {};
  const int count = plan_levels(threads, levels);
  std::size_t total = std::size_t{3} * threads * sizeof(double);  // first-end scratch
  for (int k = 0; k < count; ++k) total += levels[k].bytes;
  return total;
}

static_assert(tile_shared_bytes(kLargeThreads) <= 227 * 1024, "tile of 512 partitions fits an SM");

struct TileArrays {
  Tile t;
  double* w;
};

__device__ TileArrays arrays_at(char* base, int ld) {
  auto* p = reinterpret_cast<double*>(base);
  const int size = M * ld;
  TileArrays a;
  a.t.dl = p;
  a.t.d = p + size;
  a.t.du = p + 2 * size;
  a.t.f = p + 3 * size;
  a.w = p + 4 * size;
  a.t.kind = reinterpret_cast<unsigned char*>(p + 5 * size);
  a.t.ld = ld;
  return a;
}

__device__ int slot(int g, int ld) { return (g % M) * ld + g / M; }

template <bool kPivot, int T>
__global__ void __launch_bounds__(T) tile_batch_kernel(const double* dl, const double* d,
                                                        const double* du, const double* f,
                                                        double* x, std::size_t total_rows,
                                                        std::size_t n, double tol,
                                                        unsigned long long* flags) {
  extern __shared__ __align__(16) char smem[];
  Level levels[kMaxLevels] = {};
  const int depth = plan_levels(T, levels);
  auto* first_y = reinterpret_cast<double*>(smem);
  double* first_w = first_y + T;
  double* first_v = first_w + T;
  TileArrays lv[kMaxLevels];
  {
    char* p = smem + std::size_t{3} * T * sizeof(double);
    for (int k = 0; k < depth; ++k) {
      lv[k] = arrays_at(p, levels[k].ld);
      p += levels[k].bytes;
    }
  }
  const int tid = threadIdx.x;
  const std::size_t per_tile = (std::size_t{T} * M) / n;
  const std::size_t systems = total_rows / n;
  const std::size_t r0 = blockIdx.x * per_tile * n;
  const std::size_t sys_end = (blockIdx.x + 1) * per_tile < systems ? (blockIdx.x + 1) * per_tile : systems;
  const int tile_rows = static_cast<int>(sys_end * n - r0);

  // Load, transposed, with identity rows past the tile's systems.
  {
    const Tile s = lv[0].t;
    for (int g = tid; g < T * M; g += T) {
      const int idx = slot(g, s.ld);
      if (g < tile_rows) {
        const std::size_t i = r0 + g;
        __pipeline_memcpy_async(&s.dl[idx], &dl[i], sizeof(double));
        __pipeline_memcpy_async(&s.d[idx], &d[i], sizeof(double));
        __pipeline_memcpy_async(&s.du[idx], &du[i], sizeof(double));
        __pipeline_memcpy_async(&s.f[idx], &f[i], sizeof(double));
      } else {
        s.dl[idx] = 0.0;
        s.d[idx] = 1.0;
        s.du[idx] = 0.0;
        s.f[idx] = 0.0;
      }
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
  }

  // Down: factor each level's partitions, keep y, w, v, and form the next level.
  std::size_t stride = 1;
  for (int k = 0; k + 1 < depth; ++k, stride *= M) {
    // By value: register copies, not references into the (local-memory) level tables, so
    // shared-memory stores cannot make the compiler reload the pointers.
    const TileArrays a = lv[k];
    const Tile s = a.t;
    const int parts = levels[k].parts;
    const int q = M - 1;
    LevelArgs args{total_rows, k == 0 ? n : 0, stride, total_rows, tol, flags, r0};
    double sa = 0, sb = 1, sc = 0, sf = 0, yl = 0, pl = 0, ql = 0;
    if (tid < parts) {
      const int t = tid;
      if (k == 0) fix_couplings(s, t, r0 + std::size_t{static_cast<unsigned>(t)} * M, q, args);
      const double a_first = s.dl[t], c_last = s.du[(q - 1) * s.ld + t];
      for (int i = 0; i < q; ++i) a.w[i * s.ld + t] = i == 0 ? -a_first : 0.0;
      double ends[2] = {0.0, 0.0};
      const bool ok = solve_interior<kPivot>(s, t, q, std::size_t{static_cast<unsigned>(t)} * M,
                                             args, a.w, c_last, ends, true);
      sa = s.dl[q * s.ld + t];
      sb = s.d[q * s.ld + t];
      sc = s.du[q * s.ld + t];
      sf = s.f[q * s.ld + t];
      if (ok) {
        first_y[t] = s.f[t];
        first_w[t] = a.w[t];
        first_v[t] = ends[0];
        yl = s.f[(q - 1) * s.ld + t];
        pl = a.w[(q - 1) * s.ld + t];
        ql = ends[1];
      } else {  // flagged; NaNs keep the rest of the block from dividing by garbage silently
        first_y[t] = first_w[t] = first_v[t] = yl = pl = ql = NAN;
      }
    }
    __syncthreads();
    const Tile next = lv[k + 1].t;
    if (tid < parts) {
      const int t = tid;
      const bool has_next = t + 1 < parts;
      const double c = has_next ? sc : 0.0;
      const int idx = slot(t, next.ld);
      next.dl[idx] = sa * pl;
      next.d[idx] = sb + sa * ql + (has_next ? c * first_w[t + 1] : 0.0);
      next.du[idx] = has_next ? c * first_v[t + 1] : 0.0;
      next.f[idx] = sf - sa * yl - (has_next ? c * first_y[t + 1] : 0.0);
    }
    if (k + 2 < depth) {  // pad the next partitioned level with identity rows
      for (int g = parts + tid; g < levels[k + 1].parts * M; g += T) {
        const int idx = slot(g, next.ld);
        next.dl[idx] = 0.0;
        next.d[idx] = 1.0;
        next.du[idx] = 0.0;
        next.f[idx] = 0.0;
      }
    }
    __syncthreads();
  }

  // The deepest level (<= 9 rows): one thread, directly.
  if (tid == 0) {
    const Level& deepest = levels[depth - 1];
    LevelArgs args{static_cast<std::size_t>(deepest.rows), 0, stride, total_rows, tol, flags, r0};
    Tile s = lv[depth - 1].t;
    if (deepest.rows > 0) {
      s.dl[0] = 0.0;
      s.du[deepest.rows - 1] = 0.0;
      solve_interior<kPivot>(s, 0, deepest.rows, 0, args, nullptr, 0.0, nullptr);
    }
  }
  __syncthreads();

  // Up: interiors from the separators one level down; separators take their values.
  for (int k = depth - 2; k >= 0; --k) {
    const TileArrays a = lv[k];
    const Tile s = a.t;
    const Tile next = lv[k + 1].t;
    const int q = M - 1;
    if (tid < levels[k].parts) {
      const int t = tid;
      const double xl = t > 0 ? next.f[slot(t - 1, next.ld)] : 0.0;
      const double xr = next.f[slot(t, next.ld)];
      for (int i = 0; i < q; ++i) {
        const int at = i * s.ld + t;
        s.f[at] += a.w[at] * xl + s.d[at] * xr;  // y + w x_left + v x_right (v kept in d)
      }
      s.f[q * s.ld + t] = xr;
    }
    __syncthreads();
  }

  const Tile s = lv[0].t;
  for (int g = tid; g < tile_rows; g += T) {
    const double v = s.f[slot(g, s.ld)];
    if (!isfinite(v)) atomicMin(&flags[1], static_cast<unsigned long long>(r0 + g));
    x[r0 + g] = v;
  }
}

template <bool kPivot, int T>
void launch(const double* dl, const double* d, const double* du, const double* f, double* x,
            std::size_t rows, std::size_t n, double tol, unsigned long long* flags,
            cudaStream_t stream) {
  const std::size_t per_tile = (std::size_t{T} * M) / n;
  const std::size_t systems = rows / n;
  const unsigned blocks = static_cast<unsigned>((systems + per_tile - 1) / per_tile);
  tile_batch_kernel<kPivot, T><<<blocks, T, tile_shared_bytes(T), stream>>>(dl, d, du, f, x, rows,
                                                                          n, tol, flags);
}

}  // namespace

bool tile_batch_supported(std::size_t n) { return n >= 1 && n <= kMaxTileSystem; }

void launch_tile_batch(bool pivoting, const double* dl, const double* d, const double* du,
                       const double* f, double* x, std::size_t rows, std::size_t n, double tol,
                       unsigned long long* flags, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const bool small = n <= std::size_t{kSmallThreads} * M;
  if (pivoting) {
    small ? launch<true, kSmallThreads>(dl, d, du, f, x, rows, n, tol, flags, stream)
          : launch<true, kLargeThreads>(dl, d, du, f, x, rows, n, tol, flags, stream);
  } else {
    small ? launch<false, kSmallThreads>(dl, d, du, f, x, rows, n, tol, flags, stream)
          : launch<false, kLargeThreads>(dl, d, du, f, x, rows, n, tol, flags, stream);
  }
}

void set_tile_shared_limits() {
  const int small = static_cast<int>(tile_shared_bytes(kSmallThreads));
  const int large = static_cast<int>(tile_shared_bytes(kLargeThreads));
  cudaFuncSetAttribute(tile_batch_kernel<true, kSmallThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, small);
  cudaFuncSetAttribute(tile_batch_kernel<false, kSmallThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, small);
  cudaFuncSetAttribute(tile_batch_kernel<true, kLargeThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, large);
  cudaFuncSetAttribute(tile_batch_kernel<false, kLargeThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, large);
}

}  // namespace stripesolve::tridiag::gpu
