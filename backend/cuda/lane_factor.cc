// CudaLane (lane.h): the elimination of a stripe (cuSOLVER getrf, by pivot mode), its growth, and
// the J updates (dtrsm or the inverted diagonal blocks for the multipliers, dgemm for the rest,
// J's copies overlapped segment by segment).
#include <algorithm>
#include <cstring>
#include <vector>

#include <climits>
#include <fmt/format.h>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/lane.h"
#include "backend/cuda/persistent_panel.h"
#include "gpu/cuda/check.h"

namespace stripesolve::backend::cuda {

// Whether the one-launch panel takes an h x m stripe held in `part` (engine.gpu_panel_blocks):
// its shape limits, and room for its scratch in the transposed copy getrf would have used.
bool CudaLane::persistent_panel_takes(const DeviceBlock& part, int64_t h, int64_t m) const {
  return panel_blocks_ > 0 && h % 8 == 0 && h <= PersistentPanel::kMaxColumns && part.ld % 2 == 0 &&
         reinterpret_cast<uintptr_t>(part.data) % 16 == 0 &&
         PersistentPanel::blocks_for(m, panel_blocks_) <= panel_resident_blocks_ &&
         PersistentPanel::scratch_bytes(h, panel_blocks_) <= column_bytes(rows_, 0, cols_);
}

// GEPP of the h x m stripe `region` (ld) as a tall m x h panel by cuSOLVER getrf of its
// transpose, transposed back: pivots in ipiv_, the first zero pivot in info_.
Status CudaLane::factor_transposed(double* region, int64_t ld, int64_t h, int64_t m) {
  const double one = 1.0, zero = 0.0;
  RETURN_CUBLAS(lib_.dgeam(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m),
                           static_cast<int>(h), &one, region, static_cast<int>(ld), &zero,
                           transposed_, static_cast<int>(m), transposed_, static_cast<int>(m)),
                "transpose of the stripe");
  RETURN_CUSOLVER(lib_.dgetrf(solver_, static_cast<int>(m), static_cast<int>(h), transposed_,
                              static_cast<int>(m), solver_work_, ipiv_, info_),
                  "cusolverDnDgetrf of the transposed stripe");
  RETURN_CUBLAS(lib_.dgeam(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(h),
                           static_cast<int>(m), &one, transposed_, static_cast<int>(m), &zero,
                           region, static_cast<int>(ld), region, static_cast<int>(ld)),
                "transpose back of the stripe");
  return Status::ok();
}

// The same GEPP by the one-launch panel (engine.gpu_panel_blocks), the transposed copy's room
// its scratch.
Status CudaLane::factor_in_one_launch(double* region, int64_t ld, int64_t h, int64_t m) {
  RETURN_CUDA(
      PersistentPanel::factor(region, ld, m, h, ipiv_, info_, panel_blocks_, transposed_, compute_),
      "the one-launch panel (engine.gpu_panel_blocks)");
  return Status::ok();
}

Status CudaLane::eliminate(const DeviceBlock& part, int64_t block_col, PivotMode mode,
                           int64_t substripe_rows, int64_t global_row, int64_t* host_swaps,
                           int32_t* device_raw, int32_t* device_perm, int64_t* perm_count) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  const int64_t h = part.rows;
  const int64_t m = part.cols - block_col;
  if (h > rows_ || m > cols_ || mode != mode_ || h > m) {
    return Status::invalid_argument(
        fmt::format("device elimination of a {} x {} stripe: the lane was made for {} x {} ({})", h,
                    m, rows_, cols_, pivot_mode_name(mode_)));
  }
  double* region = part.data + block_col * part.ld;
  std::vector<int32_t> ipiv(static_cast<size_t>(h));
  int32_t first_zero = 0;
  if (mode == PivotMode::kRow) {
    // GEPP on the transposed stripe = column interchanges (backend.h kRow): in one launch on
    // engine.gpu_panel_blocks SMs on the stripe as it is held, else by getrf of its transpose.
    STRIPESOLVE_RETURN_IF_ERROR(persistent_panel_takes(part, h, m)
                                    ? factor_in_one_launch(region, part.ld, h, m)
                                    : factor_transposed(region, part.ld, h, m));
    cuda::launch_doolittle(region, part.ld, h, m, compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("doolittle kernel"));
    cuda::launch_pivots_from_ipiv(ipiv_, h, 0, device_raw, compute_);
    RETURN_CUDA(
        cudaMemcpyAsync(ipiv.data(), ipiv_, sizeof(int32_t) * h, cudaMemcpyDeviceToHost, compute_),
        "pivots to the host");
    RETURN_CUDA(
        cudaMemcpyAsync(&first_zero, info_, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
        "info to the host");
  } else if (mode == PivotMode::kNone) {
    RETURN_CUSOLVER(lib_.dgetrf(solver_, static_cast<int>(h), static_cast<int>(m), region,
                                static_cast<int>(part.ld), solver_work_, nullptr, info_),
                    "cusolverDnDgetrf of the stripe (no pivoting)");
    RETURN_CUDA(
        cudaMemcpyAsync(&first_zero, info_, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
        "info to the host");
  } else {
    STRIPESOLVE_RETURN_IF_ERROR(
        eliminate_local(part, block_col, substripe_rows, ipiv.data(), device_raw, &first_zero));
  }
  int32_t bad_row = INT32_MAX;
  RETURN_CUDA(
      cudaMemcpyAsync(info_ + 1, &bad_row, sizeof(int32_t), cudaMemcpyHostToDevice, compute_),
      "flag to the device");
  cuda::launch_first_non_finite(region, part.ld, h, m, info_ + 1, compute_);
  STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("non-finite scan"));
  RETURN_CUDA(
      cudaMemcpyAsync(&bad_row, info_ + 1, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
      "flag to the host");
  RETURN_CUDA(cudaStreamSynchronize(compute_), "device elimination");
  if (first_zero > 0) {
    return Status::numerical(fmt::format("zero pivot at row {}", global_row + first_zero - 1));
  }
  if (bad_row != INT32_MAX) {
    return Status::numerical(
        fmt::format("non-finite value in row {} after elimination", global_row + bad_row));
  }
  if (mode == PivotMode::kRow) {
    std::vector<int32_t> raw(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) {
      raw[k] = ipiv[k] - 1;
      host_swaps[k] = block_col + raw[k];
    }
    const std::vector<int32_t> pairs = permutation_pairs(raw);
    *perm_count = static_cast<int64_t>(pairs.size() / 2);
    if (!pairs.empty()) {
      RETURN_CUDA(cudaMemcpyAsync(device_perm, pairs.data(), sizeof(int32_t) * pairs.size(),
                                  cudaMemcpyHostToDevice, compute_),
                  "permutation to the device");
      RETURN_CUDA(cudaStreamSynchronize(compute_), "permutation to the device");
    }
  } else if (mode == PivotMode::kLocal) {
    for (int64_t k = 0; k < h; ++k) host_swaps[k] = ipiv[k];
  }
  return Status::ok();
}

// kLocal (002 §5, Fig 11): per substripe, dgetrf of its rows from its diagonal column (row
// search inside the substripe), its swaps carried over the substripe's earlier multipliers,
// then dtrsm + dgemm for the stripe's rows below it.
Status CudaLane::eliminate_local(const DeviceBlock& part, int64_t block_col, int64_t substripe_rows,
                                 int32_t* host_ipiv, int32_t* device_raw, int32_t* first_zero) {
  const int64_t h = part.rows;
  const int64_t cols = part.cols;
  const int64_t count = (h + substripe_rows - 1) / substripe_rows;
  const double one = 1.0, minus_one = -1.0;
  std::vector<int32_t> infos(static_cast<size_t>(count), 0);
  for (int64_t q = 0; q < count; ++q) {
    const int64_t pr = q * h / count;
    const int64_t ps = (q + 1) * h / count - pr;
    const int64_t dc = block_col + pr;
    double* panel = part.data + pr + dc * part.ld;
    RETURN_CUSOLVER(lib_.dgetrf(solver_, static_cast<int>(ps), static_cast<int>(cols - dc), panel,
                                static_cast<int>(part.ld), solver_work_, ipiv_ + pr, info_),
                    "cusolverDnDgetrf of a substripe");
    RETURN_CUDA(
        cudaMemcpyAsync(&infos[q], info_, sizeof(int32_t), cudaMemcpyDeviceToHost, compute_),
        "info to the host");
    if (pr > 0) {
      cuda::launch_row_swaps(part.data + pr + block_col * part.ld, part.ld, pr, ipiv_ + pr, ps,
                             compute_);
      STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("row swaps of earlier multipliers"));
    }
    cuda::launch_pivots_from_ipiv(ipiv_ + pr, ps, static_cast<int32_t>(pr), device_raw + pr,
                                  compute_);
    if (pr + ps < h) {
      double* t = part.data + (pr + ps) + dc * part.ld;
      RETURN_CUBLAS(
          lib_.dtrsm(blas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                     CUBLAS_DIAG_NON_UNIT, static_cast<int>(h - pr - ps), static_cast<int>(ps),
                     &one, panel, static_cast<int>(part.ld), t, static_cast<int>(part.ld)),
          "dtrsm of a substripe's multipliers");
      if (cols - dc - ps > 0) {
        RETURN_CUBLAS(
            lib_.dgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(h - pr - ps),
                       static_cast<int>(cols - dc - ps), static_cast<int>(ps), &minus_one, t,
                       static_cast<int>(part.ld), panel + ps * part.ld, static_cast<int>(part.ld),
                       &one, t + ps * part.ld, static_cast<int>(part.ld)),
            "dgemm of a substripe's trailing update");
      }
    }
  }
  std::vector<int32_t> raw(static_cast<size_t>(h));
  RETURN_CUDA(cudaMemcpyAsync(raw.data(), device_raw, sizeof(int32_t) * h, cudaMemcpyDeviceToHost,
                              compute_),
              "pivots to the host");
  RETURN_CUDA(cudaStreamSynchronize(compute_), "device elimination");
  for (int64_t q = 0; q < count; ++q) {
    if (infos[q] > 0 && *first_zero == 0)
      *first_zero = static_cast<int32_t>(q * h / count) + infos[q];
  }
  std::copy(raw.begin(), raw.end(), host_ipiv);
  return Status::ok();
}

Result<double> CudaLane::max_abs_upper(const DeviceBlock& part, int64_t block_col) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  RETURN_CUDA(cudaMemsetAsync(max_bits_, 0, sizeof(unsigned long long), compute_),
              "clearing the growth's maximum");
  cuda::launch_max_abs_upper(part.data, part.ld, part.rows, part.cols, block_col, max_bits_,
                             compute_);
  STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("max_abs_upper kernel"));
  unsigned long long bits = 0;
  RETURN_CUDA(cudaMemcpyAsync(&bits, max_bits_, sizeof bits, cudaMemcpyDeviceToHost, compute_),
              "copying the growth's maximum");
  RETURN_CUDA(cudaStreamSynchronize(compute_), "synchronizing the growth's maximum");
  double most = 0;
  std::memcpy(&most, &bits, sizeof most);
  return most;
}

Status CudaLane::update(const DeviceUpdate& op) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  const DeviceBlock& j = op.j;
  const int64_t k = op.u.rows;
  const int64_t c0 = op.j_col;
  const int64_t c_end = j.cols;
  if (op.u.cols != c_end - c0 || k > c_end - c0 || j.rows > j_rows_) {
    return Status::invalid_argument(fmt::format(
        "device update: J of {} x {} from column {} by U of {} x {} (lane for J of {} rows)",
        j.rows, j.cols, c0, op.u.rows, op.u.cols, j_rows_));
  }
  // Segments: [c0, c0 + k) for the multipliers, then GEMM segments of `seg` columns, which
  // let the copies of a streamed J overlap its arithmetic. A J that stays on the device has
  // nothing to overlap: one GEMM, so that a critical update beside the sweeps waits for SMs
  // once instead of once a segment.
  const bool copies = op.host_in != nullptr || op.host_out != nullptr;
  const int64_t seg = copies ? std::max<int64_t>(op.segment_columns, 256) : c_end;
  struct Segment {
    int64_t a, b;
  };
  std::vector<Segment> segs;
  segs.push_back(Segment{c0, c0 + k});
  for (int64_t c = c0 + k; c < c_end; c += seg)
    segs.push_back(Segment{c, std::min(c_end, c + seg)});
  STRIPESOLVE_RETURN_IF_ERROR(ensure_events(2 * segs.size() + 1));
  const bool whole_first = op.host_in != nullptr && !op.permutations.empty();
  if (op.host_in != nullptr) {
    if (whole_first) {
      RETURN_CUDA(cudaMemcpyAsync(j.data + c0 * j.ld, op.host_in + c0 * j.ld,
                                  column_bytes(j.ld, c0, c_end), cudaMemcpyHostToDevice, in_),
                  "copy of J to the device");
      RETURN_CUDA(cudaEventRecord(events_[0], in_), "event");
      RETURN_CUDA(cudaStreamWaitEvent(compute_, events_[0]), "event wait");
    }
  }
  for (const ColumnPermutation& p : op.permutations) {
    if (p.count == 0) continue;
    cuda::launch_permute_columns(j.data, j.ld, j.rows, c0 + p.first, p.pairs, p.count, gather_,
                                 compute_);
    STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("column permutation"));
  }
  const double one = 1.0, minus_one = -1.0;
  double* multipliers = j.data + c0 * j.ld;
  for (size_t s = 0; s < segs.size(); ++s) {
    const int64_t a = segs[s].a;
    const int64_t b = segs[s].b;
    if (op.host_in != nullptr && !whole_first) {
      RETURN_CUDA(cudaMemcpyAsync(j.data + a * j.ld, op.host_in + a * j.ld,
                                  column_bytes(j.ld, a, b), cudaMemcpyHostToDevice, in_),
                  "copy of a J segment to the device");
      RETURN_CUDA(cudaEventRecord(events_[1 + 2 * s], in_), "event");
      RETURN_CUDA(cudaStreamWaitEvent(compute_, events_[1 + 2 * s]), "event wait");
    }
    if (s == 0 && op.u_inverse.data != nullptr) {
      STRIPESOLVE_RETURN_IF_ERROR(multipliers_by_inverses(op, multipliers));
    } else if (s == 0) {
      RETURN_CUBLAS(
          lib_.dtrsm(blas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                     CUBLAS_DIAG_NON_UNIT, static_cast<int>(j.rows), static_cast<int>(k), &one,
                     op.u.data, static_cast<int>(op.u.ld), multipliers, static_cast<int>(j.ld)),
          "dtrsm of the J multipliers");
    } else {
      // In pieces of update_k_ along k (DeviceEngineOptions::update_k).
      const int64_t piece = update_k_ > 0 ? update_k_ : k;
      for (int64_t k0 = 0; k0 < k; k0 += piece) {
        const int64_t depth = std::min(piece, k - k0);
        RETURN_CUBLAS(lib_.dgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(j.rows),
                                 static_cast<int>(b - a), static_cast<int>(depth), &minus_one,
                                 multipliers + k0 * j.ld, static_cast<int>(j.ld),
                                 op.u.data + (a - c0) * op.u.ld + k0, static_cast<int>(op.u.ld),
                                 &one, j.data + a * j.ld, static_cast<int>(j.ld)),
                      "dgemm of the J update");
      }
    }
    if (op.host_out != nullptr) {
      RETURN_CUDA(cudaEventRecord(events_[2 + 2 * s], compute_), "event");
      RETURN_CUDA(cudaStreamWaitEvent(out_, events_[2 + 2 * s]), "event wait");
      RETURN_CUDA(cudaMemcpyAsync(op.host_out + a * j.ld, j.data + a * j.ld,
                                  column_bytes(j.ld, a, b), cudaMemcpyDeviceToHost, out_),
                  "copy of a J segment from the device");
    }
  }
  RETURN_CUDA(cudaStreamSynchronize(compute_), "device update");
  RETURN_CUDA(cudaStreamSynchronize(in_), "device update");
  RETURN_CUDA(cudaStreamSynchronize(out_), "device update");
  return Status::ok();
}

// x (J's K multiplier columns) <- x triu(U)^-1 by block columns of nb: x_p -= x_<p U_<p,p,
// then x_p <- x_p inv(U_pp) through the gather buffer (queued on the compute stream).
Status CudaLane::multipliers_by_inverses(const DeviceUpdate& op, double* x) {
  const int64_t m = op.j.rows;
  const int64_t k = op.u.rows;
  const int64_t nb = op.u_inverse.cols;
  if (column_bytes(m, 0, nb) > gather_bytes_ || op.u_inverse.rows != k) {
    return Status::invalid_argument(fmt::format(
        "device update: inverses of {} x {} blocks for J of {} rows and U of {} rows (the "
        "lane's buffer holds {} bytes)",
        nb, nb, m, k, gather_bytes_));
  }
  const double one = 1.0, zero = 0.0, minus_one = -1.0;
  const int ldj = static_cast<int>(op.j.ld);
  for (int64_t c = 0; c < k; c += nb) {
    const int64_t b = std::min(nb, k - c);
    double* xp = x + c * op.j.ld;
    if (c > 0) {
      RETURN_CUBLAS(lib_.dgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m),
                               static_cast<int>(b), static_cast<int>(c), &minus_one, x, ldj,
                               op.u.data + c * op.u.ld, static_cast<int>(op.u.ld), &one, xp, ldj),
                    "dgemm of the J multipliers");
    }
    RETURN_CUBLAS(
        lib_.dgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(b),
                   static_cast<int>(b), &one, xp, ldj, op.u_inverse.data + c,
                   static_cast<int>(op.u_inverse.ld), &zero, gather_, static_cast<int>(m)),
        "dgemm by an inverted diagonal block");
    RETURN_CUDA(cudaMemcpy2DAsync(xp, sizeof(double) * op.j.ld, gather_, sizeof(double) * m,
                                  sizeof(double) * m, b, cudaMemcpyDeviceToDevice, compute_),
                "copy of J multipliers");
  }
  return Status::ok();
}

Status CudaLane::invert_diagonal_blocks(const DeviceBlock& u, const DeviceBlock& inverse) {
  RETURN_CUDA(cudaSetDevice(device_), "cudaSetDevice");
  const int64_t k = u.rows;
  const int64_t nb = inverse.cols;
  if (inverse.rows != k || inverse.ld < k || nb < 1 || u.cols < k) {
    return Status::invalid_argument(
        fmt::format("inverses of the diagonal blocks of a {} x {} U into a {} x {} block", u.rows,
                    u.cols, inverse.rows, inverse.cols));
  }
  cuda::launch_identity_blocks(inverse.data, inverse.ld, k, nb, compute_);
  STRIPESOLVE_RETURN_IF_ERROR(gpu::launch_check("identity blocks"));
  const double one = 1.0;
  for (int64_t c = 0; c < k; c += nb) {
    const int64_t b = std::min(nb, k - c);
    RETURN_CUBLAS(lib_.dtrsm(blas_, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                             CUBLAS_DIAG_NON_UNIT, static_cast<int>(b), static_cast<int>(b), &one,
                             u.data + c + c * u.ld, static_cast<int>(u.ld), inverse.data + c,
                             static_cast<int>(inverse.ld)),
                  "dtrsm inverting a diagonal block of U");
  }
  RETURN_CUDA(cudaStreamSynchronize(compute_), "inverses of U's diagonal blocks");
  return Status::ok();
}

}  // namespace stripesolve::backend::cuda
