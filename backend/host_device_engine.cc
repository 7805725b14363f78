#include "backend/host_device_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"

namespace stripesolve::backend {
namespace {

void permute(double* a, int64_t ld, int64_t rows, const ColumnPermutation& p) {
  std::vector<double> tmp(static_cast<size_t>(rows * p.count));
  for (int64_t q = 0; q < p.count; ++q) {
    std::memcpy(tmp.data() + q * rows, a + (p.first + p.pairs[2 * q + 1]) * ld,
                sizeof(double) * static_cast<size_t>(rows));
  }
  for (int64_t q = 0; q < p.count; ++q) {
    std::memcpy(a + (p.first + p.pairs[2 * q]) * ld, tmp.data() + q * rows,
                sizeof(double) * static_cast<size_t>(rows));
  }
}

// CUDA's rules for registered host memory, kept so that a test without a GPU fails where the
// GPU would: a copy's host range lies inside one registration or outside all of them (cuMemcpy
// refuses one that spans two, or registered and unregistered memory, with
// cudaErrorInvalidValue), and a block is registered once. Registrations are process-wide, as
// CUDA's are (the arena is registered portable, for every device).
class HostRegistrations {
 public:
  static HostRegistrations& get() {
    static HostRegistrations registrations;
    return registrations;
  }

  Status add(const void* data, uint64_t bytes) {
    const auto begin = reinterpret_cast<uintptr_t>(data);
    std::lock_guard<std::mutex> lock(mu_);
    if (overlapping(begin, begin + bytes) != ranges_.end()) {
      return Status::invalid_argument(fmt::format(
          "cudaHostRegister of {} bytes at {}: cudaErrorHostMemoryAlreadyRegistered", bytes, data));
    }
    ranges_.emplace(begin, begin + bytes);
    return Status::ok();
  }
  void remove(const void* data) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_.erase(reinterpret_cast<uintptr_t>(data));
  }
  Status check_copy(const void* host, uint64_t bytes, const char* what) const {
    const auto begin = reinterpret_cast<uintptr_t>(host);
    const uintptr_t end = begin + bytes;
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = overlapping(begin, end);
    if (it == ranges_.end() || (it->first <= begin && end <= it->second)) return Status::ok();
    return Status::internal(
        fmt::format("{}: the host range of {} bytes at {} spans registered and other host memory "
                    "(cudaErrorInvalidValue)",
                    what, bytes, host));
  }

 private:
  // The first registration that overlaps [begin, end), or end().
  std::map<uintptr_t, uintptr_t>::const_iterator overlapping(uintptr_t begin, uintptr_t end) const {
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second > begin) return std::prev(it);
    return it != ranges_.end() && it->first < end ? it : ranges_.end();
  }

  mutable std::mutex mu_;
  std::map<uintptr_t, uintptr_t> ranges_;  // registered [begin, end)
};

class HostLane final : public DeviceLane {
 public:
  Status upload(const double* host, const DeviceBlock& dst, int64_t c0, int64_t c1) override {
    STRIPESOLVE_RETURN_IF_ERROR(HostRegistrations::get().check_copy(
        host + c0 * dst.ld, column_bytes(dst.ld, c0, c1), "copy to the device"));
    std::memcpy(dst.data + c0 * dst.ld, host + c0 * dst.ld, column_bytes(dst.ld, c0, c1));
    return Status::ok();
  }
  Status download(const DeviceBlock& src, double* host, int64_t c0, int64_t c1) override {
    STRIPESOLVE_RETURN_IF_ERROR(HostRegistrations::get().check_copy(
        host + c0 * src.ld, column_bytes(src.ld, c0, c1), "copy from the device"));
    std::memcpy(host + c0 * src.ld, src.data + c0 * src.ld, column_bytes(src.ld, c0, c1));
    return Status::ok();
  }
  Status copy_from_peer(double* dst, const double* src, int, uint64_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status upload_ints(const std::vector<int32_t>& values, int32_t* device) override {
    std::copy(values.begin(), values.end(), device);
    return Status::ok();
  }
  Result<uint64_t> download_later(const DeviceBlock& src, double* host, int64_t c0,
                                  int64_t c1) override {
    STRIPESOLVE_RETURN_IF_ERROR(download(src, host, c0, c1));
    return uint64_t{0};
  }
  Status wait(uint64_t) override { return Status::ok(); }
  Status synchronize() override { return Status::ok(); }

  Status eliminate(const DeviceBlock& part, int64_t block_col, PivotMode mode,
                   int64_t substripe_rows, int64_t global_row, int64_t* host_swaps,
                   int32_t* device_raw, int32_t* device_perm, int64_t* perm_count) override {
    const int64_t h = part.rows;
    const int64_t count = (h + substripe_rows - 1) / substripe_rows;
    std::vector<int64_t> local(static_cast<size_t>(h), 0);
    for (int64_t q = 0; q < count; ++q) {
      const int64_t pr = q * h / count;
      const int64_t ps = (q + 1) * h / count - pr;
      PanelFactor op;
      op.part = part.data;
      op.ld = part.ld;
      op.rows = h;
      op.cols = part.cols;
      op.block_col = block_col;
      op.panel_row = pr;
      op.panel_rows = ps;
      op.mode = mode;
      op.swaps = local.data() + pr;
      op.global_row = global_row;
      const WorkspaceSize need = cpu_.workspace_size(op);
      workspace_.resize(std::max<size_t>(workspace_.size(), need.host_bytes / sizeof(double) + 1));
      STRIPESOLVE_RETURN_IF_ERROR(
          cpu_.run(op, Workspace{reinterpret_cast<std::byte*>(workspace_.data()),
                                 workspace_.size() * sizeof(double), nullptr, 0}));
      if (pr + ps < h) {
        const int64_t dc = block_col + pr;
        BlockUpdate up;
        up.u = part.data + pr + dc * part.ld;
        up.ld_u = part.ld;
        up.k = ps;
        up.cols = part.cols - dc;
        up.t = part.data + (pr + ps) + dc * part.ld;
        up.ld_t = part.ld;
        up.t_rows = h - pr - ps;
        STRIPESOLVE_RETURN_IF_ERROR(cpu_.run(up, {}));
      }
    }
    for (int64_t c = block_col; c < part.cols; ++c) {
      for (int64_t r = 0; r < h; ++r) {
        if (!std::isfinite(part.data[r + c * part.ld])) {
          return Status::numerical(
              fmt::format("non-finite value in row {} after elimination", global_row + r));
        }
      }
    }
    if (mode == PivotMode::kNone) return Status::ok();
    std::vector<int32_t> raw(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) {
      host_swaps[k] = local[k];
      raw[k] = static_cast<int32_t>(mode == PivotMode::kRow ? local[k] - block_col : local[k]);
    }
    std::copy(raw.begin(), raw.end(), device_raw);
    if (mode == PivotMode::kRow) {
      const std::vector<int32_t> pairs = permutation_pairs(raw);
      std::copy(pairs.begin(), pairs.end(), device_perm);
      *perm_count = static_cast<int64_t>(pairs.size() / 2);
    }
    return Status::ok();
  }

  Result<double> max_abs_upper(const DeviceBlock& part, int64_t block_col) override {
    double most = 0;
    for (int64_t c = block_col; c < part.cols; ++c) {
      const int64_t rows = std::min(part.rows, c - block_col + 1);
      for (int64_t r = 0; r < rows; ++r)
        most = std::max(most, std::fabs(part.data[r + c * part.ld]));
    }
    return most;
  }

  Status update(const DeviceUpdate& op) override {
    const DeviceBlock& j = op.j;
    const int64_t k = op.u.rows;
    const int64_t c0 = op.j_col;
    if (op.u.cols != j.cols - c0 || k > j.cols - c0) {
      return Status::invalid_argument(
          fmt::format("device update: J of {} x {} from column {} by U of {} x {}", j.rows, j.cols,
                      c0, op.u.rows, op.u.cols));
    }
    if (op.host_in != nullptr) STRIPESOLVE_RETURN_IF_ERROR(upload(op.host_in, j, c0, j.cols));
    for (const ColumnPermutation& p : op.permutations) {
      ColumnPermutation shifted = p;
      shifted.first += c0;
      permute(j.data, j.ld, j.rows, shifted);
    }
    double* t = j.data + c0 * j.ld;
    if (op.u_inverse.data != nullptr) {
      multipliers_by_inverses(op, t);
    } else {
      cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit,
                  static_cast<int>(j.rows), static_cast<int>(k), 1.0, op.u.data,
                  static_cast<int>(op.u.ld), t, static_cast<int>(j.ld));
    }
    if (j.cols - c0 > k) {
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(j.rows),
                  static_cast<int>(j.cols - c0 - k), static_cast<int>(k), -1.0, t,
                  static_cast<int>(j.ld), op.u.data + k * op.u.ld, static_cast<int>(op.u.ld), 1.0,
                  t + k * j.ld, static_cast<int>(j.ld));
    }
    if (op.host_out != nullptr) STRIPESOLVE_RETURN_IF_ERROR(download(j, op.host_out, c0, j.cols));
    return Status::ok();
  }

  Status invert_diagonal_blocks(const DeviceBlock& u, const DeviceBlock& inverse) override {
    const int64_t k = u.rows;
    const int64_t nb = inverse.cols;
    if (inverse.rows != k || inverse.ld < k || nb < 1 || u.cols < k) {
      return Status::invalid_argument("inverses of U's diagonal blocks: shapes do not match");
    }
    for (int64_t c = 0; c < nb; ++c) {
      for (int64_t r = 0; r < k; ++r) inverse.data[r + c * inverse.ld] = (r % nb == c) ? 1.0 : 0.0;
    }
    for (int64_t c = 0; c < k; c += nb) {
      const int64_t b = std::min(nb, k - c);
      cblas_dtrsm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit,
                  static_cast<int>(b), static_cast<int>(b), 1.0, u.data + c + c * u.ld,
                  static_cast<int>(u.ld), inverse.data + c, static_cast<int>(inverse.ld));
    }
    return Status::ok();
  }

  // The CUDA lane's blocked solve with inverted diagonal blocks, step for step.
  void multipliers_by_inverses(const DeviceUpdate& op, double* x) {
    const int64_t m = op.j.rows;
    const int64_t k = op.u.rows;
    const int64_t nb = op.u_inverse.cols;
    const int ldj = static_cast<int>(op.j.ld);
    std::vector<double> tmp(static_cast<size_t>(m * nb));
    for (int64_t c = 0; c < k; c += nb) {
      const int64_t b = std::min(nb, k - c);
      double* xp = x + c * op.j.ld;
      if (c > 0) {
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                    static_cast<int>(b), static_cast<int>(c), -1.0, x, ldj, op.u.data + c * op.u.ld,
                    static_cast<int>(op.u.ld), 1.0, xp, ldj);
      }
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(b), static_cast<int>(b), 1.0, xp, ldj, op.u_inverse.data + c,
                  static_cast<int>(op.u_inverse.ld), 0.0, tmp.data(), static_cast<int>(m));
      for (int64_t q = 0; q < b; ++q) {
        std::memcpy(xp + q * op.j.ld, tmp.data() + q * m, sizeof(double) * static_cast<size_t>(m));
      }
    }
  }

  Status copy_rows(const DeviceBlock& dst, int64_t dst_row, const DeviceBlock& src) override {
    for (int64_t c = 0; c < src.cols; ++c) {
      std::memcpy(dst.data + dst_row + c * dst.ld, src.data + c * src.ld,
                  sizeof(double) * static_cast<size_t>(src.rows));
    }
    return Status::ok();
  }

  Status permute_columns(const DeviceBlock& target, const ColumnPermutation& perm) override {
    permute(target.data, target.ld, target.rows, perm);
    return Status::ok();
  }

  Status forward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) override {
    for (const FactorStripe& s : stripes) {
      STRIPESOLVE_RETURN_IF_ERROR(forward_one(s.part, s.row_begin, s.raw, rhs));
    }
    return Status::ok();
  }
  Status backward(const std::vector<FactorStripe>& stripes, const DeviceBlock& rhs) override {
    for (const FactorStripe& s : stripes) {
      STRIPESOLVE_RETURN_IF_ERROR(backward_one(s.part, s.row_begin, s.raw, rhs));
    }
    return Status::ok();
  }

  Status transposed_upper(const std::vector<FactorStripe>& stripes,
                          const DeviceBlock& rhs) override {
    for (const FactorStripe& s : stripes) {
      if (s.raw != nullptr) {
        for (int64_t c = 0; c < rhs.cols; ++c) {
          double* x = rhs.data + c * rhs.ld + s.row_begin;
          for (int64_t k = 0; k < s.part.rows; ++k) std::swap(x[k], x[s.raw[k]]);
        }
      }
      UpperSubstitution op = upper_op(s.part, s.row_begin, rhs);
      op.transposed = true;
      STRIPESOLVE_RETURN_IF_ERROR(cpu_.run(op, {}));
    }
    return Status::ok();
  }
  Status transposed_lower(const std::vector<FactorStripe>& stripes,
                          const DeviceBlock& rhs) override {
    for (const FactorStripe& s : stripes) {
      std::vector<int64_t> swaps;
      if (s.raw != nullptr) swaps.assign(s.raw, s.raw + s.part.rows);
      LowerSubstitution op = lower_op(s.part, s.row_begin, swaps, rhs);
      op.transposed = true;
      STRIPESOLVE_RETURN_IF_ERROR(cpu_.run(op, {}));
    }
    return Status::ok();
  }

  Status residual(const std::vector<FactorStripe>& stripes, const DeviceBlock& x,
                  const DeviceBlock& r, double* sums, bool transposed) override {
    const int64_t n = r.rows;
    std::fill(sums, sums + 2 * n + 1, 0.0);
    for (const FactorStripe& s : stripes) {
      const DeviceBlock& a = s.part;
      for (int64_t c = 0; c < a.cols; ++c) {
        const double* col = a.data + c * a.ld;
        for (int64_t q = 0; q < a.rows; ++q) {
          const double v = std::fabs(col[q]);
          sums[s.row_begin + q] += v;
          sums[n + c] += v;
          sums[2 * n] = std::max(sums[2 * n], v);
        }
        for (int64_t k = 0; k < r.cols; ++k) {
          if (transposed) {  // r[c] -= sum_q part[q, c] x[row_begin + q]
            const double* xk = x.data + s.row_begin + k * x.ld;
            double dot = 0;
            for (int64_t q = 0; q < a.rows; ++q) dot += col[q] * xk[q];
            r.data[c + k * r.ld] -= dot;
            continue;
          }
          const double xv = x.data[c + k * x.ld];
          double* rk = r.data + s.row_begin + k * r.ld;
          for (int64_t q = 0; q < a.rows; ++q) rk[q] -= col[q] * xv;
        }
      }
    }
    return Status::ok();
  }

 private:
  // The CPU backend's step of a stripe whose part (h x n from column 0) starts at row_begin.
  static LowerSubstitution lower_op(const DeviceBlock& part, int64_t row_begin,
                                    const std::vector<int64_t>& swaps, const DeviceBlock& rhs) {
    LowerSubstitution op;
    op.part = part.data;
    op.ld = part.ld;
    op.rows = part.rows;
    op.row_begin = row_begin;
    op.row_swaps = swaps.empty() ? nullptr : swaps.data();
    op.rhs = rhs.data;
    op.ld_rhs = rhs.ld;
    op.nrhs = rhs.cols;
    return op;
  }
  static UpperSubstitution upper_op(const DeviceBlock& part, int64_t row_begin,
                                    const DeviceBlock& rhs) {
    UpperSubstitution op;
    op.part = part.data + row_begin * part.ld;
    op.ld = part.ld;
    op.rows = part.rows;
    op.cols = rhs.rows - row_begin;
    op.rhs = rhs.data + row_begin;
    op.ld_rhs = rhs.ld;
    op.nrhs = rhs.cols;
    return op;
  }

  Status forward_one(const DeviceBlock& part, int64_t row_begin, const int32_t* device_raw,
                     const DeviceBlock& rhs) {
    std::vector<int64_t> swaps;
    if (device_raw != nullptr) swaps.assign(device_raw, device_raw + part.rows);
    return cpu_.run(lower_op(part, row_begin, swaps, rhs), {});
  }

  Status backward_one(const DeviceBlock& part, int64_t row_begin, const int32_t* device_raw,
                      const DeviceBlock& rhs) {
    STRIPESOLVE_RETURN_IF_ERROR(cpu_.run(upper_op(part, row_begin, rhs), {}));
    if (device_raw != nullptr) {
      for (int64_t c = 0; c < rhs.cols; ++c) {
        double* x = rhs.data + c * rhs.ld + row_begin;
        for (int64_t k = part.rows - 1; k >= 0; --k) std::swap(x[k], x[device_raw[k]]);
      }
    }
    return Status::ok();
  }

  CpuBackend cpu_;
  std::vector<double> workspace_;
};

class HostEngine final : public DeviceEngine {
 public:
  explicit HostEngine(HostEngineOptions options) : options_(options) {}
  std::string description() const override { return "host memory (the GPU tier's test engine)"; }
  int device() const override { return -1; }
  uint64_t free_memory() const override { return 1ull << 30; }
  Result<void*> allocate(uint64_t bytes, const std::string& what) override {
    void* p = std::aligned_alloc(256, (std::max<uint64_t>(bytes, 1) + 255) / 256 * 256);
    if (p == nullptr) return Status::resource_exhausted("host allocation for " + what);
    return p;
  }
  void release(void* data) override { std::free(data); }
  Status enable_peer_access(int) override { return Status::ok(); }
  Status register_host(void* data, uint64_t bytes) override {
    if (data == nullptr || bytes == 0) return Status::ok();
    if (options_.refuse_pinning) {
      return Status::resource_exhausted(
          fmt::format("cudaHostRegister of {} bytes: cudaErrorMemoryAllocation (refused by the "
                      "test engine's options)",
                      bytes));
    }
    return HostRegistrations::get().add(data, bytes);
  }
  void unregister_host(void* data) override { HostRegistrations::get().remove(data); }
  Result<uint64_t> lane_workspace_bytes(int64_t, int64_t, PivotMode, int64_t,
                                        int64_t) const override {
    return uint64_t{256};
  }
  Result<std::unique_ptr<DeviceLane>> make_lane(bool, int64_t, int64_t, PivotMode, int64_t, int64_t,
                                                void*) override {
    return std::unique_ptr<DeviceLane>(std::make_unique<HostLane>());
  }

 private:
  const HostEngineOptions options_;
};

}  // namespace

std::unique_ptr<DeviceEngine> make_host_device_engine(HostEngineOptions options) {
  return std::make_unique<HostEngine>(options);
}

}  // namespace stripesolve::backend
