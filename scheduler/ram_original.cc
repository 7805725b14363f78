// RamOriginal (ram_original.h): the copy of A in the RAM cache's arena, and the residual on it.
#include "scheduler/ram_original.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "base/logging.h"
#include "base/units.h"

namespace stripesolve::scheduler {

std::unique_ptr<RamOriginal> RamOriginal::reserve(cache::StripeCache& cache,
                                                  const storage::StripeGeometry& g,
                                                  uint64_t cells_need) {
  const uint64_t bytes = 8ull * static_cast<uint64_t>(g.n) * static_cast<uint64_t>(g.n);
  const uint64_t budget = cache.stats().budget;
  static const auto log = logger("scheduler");
  if (cache::Arena::round_up(bytes) + cells_need > budget) {
    log->info("no copy of A in RAM for the residual: A's cells ({}) and the copy ({}) exceed {}",
              format_bytes(cells_need), format_bytes(bytes), format_bytes(budget));
    return nullptr;
  }
  std::byte* block = cache.reserve(bytes);
  if (block == nullptr) {
    log->info("no copy of A in RAM for the residual: no hole of {} in the cache's {}",
              format_bytes(bytes), format_bytes(budget));
    return nullptr;
  }
  return std::unique_ptr<RamOriginal>(new RamOriginal(cache, g, block));
}

RamOriginal::RamOriginal(cache::StripeCache& cache, const storage::StripeGeometry& g,
                         std::byte* block)
    : cache_(cache), g_(g), block_(block), kept_(static_cast<size_t>(g.stripes), false) {}

RamOriginal::~RamOriginal() {
  cache_.unreserve(block_);
}

void RamOriginal::keep(int64_t i, const double* data, int threads) {
  {
    MutexLock lock(mu_);
    if (kept_[static_cast<size_t>(i)]) return;
  }
  auto* at =
      reinterpret_cast<std::byte*>(reinterpret_cast<double*>(block_) + g_.row_begin(i) * g_.n);
  const auto* from = reinterpret_cast<const std::byte*>(data);
  const uint64_t bytes = g_.stripe_bytes(i);
  // In pieces of whole 2 MiB pages, one a thread: the first touch of each page of the block
  // (its zeroing) is most of the copy's cost.
  constexpr uint64_t kPage = uint64_t{2} << 20;
  const uint64_t piece = std::max<uint64_t>(
      kPage, (bytes / static_cast<uint64_t>(std::max(threads, 1)) + kPage - 1) / kPage * kPage);
  std::vector<std::thread> helpers;
  for (uint64_t off = piece; off < bytes; off += piece) {
    helpers.emplace_back([at, from, off, len = std::min(piece, bytes - off)] {
      std::memcpy(at + off, from + off, len);
    });
  }
  std::memcpy(at, from, std::min(piece, bytes));
  for (std::thread& t : helpers) t.join();
  MutexLock lock(mu_);
  kept_[static_cast<size_t>(i)] = true;
}

void RamOriginal::keep_read(const cache::CellView& cell, const storage::PartLayout& layout) {
  if (cell.i0_store != 0 || layout.data_bytes < g_.stripe_bytes(cell.stripe)) return;
  keep(cell.stripe, reinterpret_cast<const double*>(cell.buffer + layout.data_offset));
}

bool RamOriginal::complete() const {
  MutexLock lock(mu_);
  return std::all_of(kept_.begin(), kept_.end(), [](bool b) { return b; });
}

ResidualResult RamOriginal::residual(EngineContext& ctx, const double* b, const double* x,
                                     int64_t nrhs, double* r, int threads) {
  const int64_t n = g_.n;
  ctx.progress.begin_phase(
      "residual", 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(nrhs),
      g_.stripes);
  const bool with_norms = norms_ == nullptr;
  const int workers = static_cast<int>(std::clamp<int64_t>(threads, 1, g_.stripes));
  // Each worker takes the next stripe, writes its rows of r and folds into its own sums.
  std::vector<ResidualResult> partial(static_cast<size_t>(workers));
  std::vector<std::vector<double>> col_abs(static_cast<size_t>(with_norms ? workers : 0));
  std::atomic<int64_t> next{0};
  auto work = [&](int w) {
    double* cols = nullptr;
    if (with_norms) {
      col_abs[static_cast<size_t>(w)].assign(static_cast<size_t>(n), 0.0);
      cols = col_abs[static_cast<size_t>(w)].data();
    }
    for (int64_t i = next++; i < g_.stripes; i = next++) {
      const StripeRows a{reinterpret_cast<const double*>(block_) + g_.row_begin(i) * n, g_.rows(i),
                         g_.row_begin(i)};
      stripe_residual(a, n, b, x, nrhs, r, cols, partial[static_cast<size_t>(w)]);
      ctx.progress.add_flops(2.0 * static_cast<double>(a.rows) * static_cast<double>(n) *
                             static_cast<double>(nrhs));
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  ResidualResult out;
  for (const ResidualResult& p : partial) {
    out.r_norm_inf = std::max(out.r_norm_inf, p.r_norm_inf);
    out.a_norm_inf = std::max(out.a_norm_inf, p.a_norm_inf);
    out.a_max_abs = std::max(out.a_max_abs, p.a_max_abs);
  }
  if (with_norms) {
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0;
      for (const auto& v : col_abs) sum += v[static_cast<size_t>(c)];
      out.a_norm_1 = std::max(out.a_norm_1, sum);
    }
    norms_ = std::make_unique<ResidualResult>(out);
  } else {
    out.a_norm_inf = norms_->a_norm_inf;
    out.a_norm_1 = norms_->a_norm_1;
    out.a_max_abs = norms_->a_max_abs;
  }
  return out;
}

}  // namespace stripesolve::scheduler
