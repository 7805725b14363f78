#include "scheduler/dense_solve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "base/logging.h"
#include "cache/stripe_cache.h"
#include "scheduler/factor_run.h"
#include "scheduler/io_role.h"
#include "scheduler/substitution.h"

namespace stripesolve::scheduler {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::string_view kPivotsBlob = "pivots";

void put_u64(std::vector<std::byte>& out, uint64_t v) {
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::byte>((v >> (8 * k)) & 0xff));
}

uint64_t get_u64(std::span<const std::byte> in, size_t pos) {
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(in[pos + k]) << (8 * k);
  return v;
}

// u64 count, then per stripe: u64 length + stripe::serialize_pivots bytes.
std::vector<std::byte> serialize_all(const std::vector<stripe::StripePivots>& pivots) {
  std::vector<std::byte> out;
  put_u64(out, pivots.size());
  for (const auto& p : pivots) {
    const auto bytes = stripe::serialize_pivots(p);
    put_u64(out, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

Result<std::vector<stripe::StripePivots>> parse_all(std::span<const std::byte> in,
                                                    int64_t stripes, const std::string& name) {
  auto bad = [&](const std::string& what) {
    return Status::corruption("factor '" + name + "': pivots blob " + what);
  };
  if (in.size() < 8) return bad("is truncated");
  const uint64_t count = get_u64(in, 0);
  if (count != static_cast<uint64_t>(stripes)) {
    return bad("holds " + std::to_string(count) + " stripes, the factor has " +
               std::to_string(stripes));
  }
  std::vector<stripe::StripePivots> out;
  size_t pos = 8;
  for (uint64_t i = 0; i < count; ++i) {
    if (pos + 8 > in.size()) return bad("is truncated");
    const uint64_t len = get_u64(in, pos);
    pos += 8;
    if (len > in.size() - pos) return bad("is truncated");
    STRIPESOLVE_ASSIGN_OR_RETURN(auto p, stripe::parse_pivots(in.subspan(pos, len)));
    out.push_back(std::move(p));
    pos += len;
  }
  return out;
}

double norm_inf(const double* v, int64_t n, int64_t nrhs) {
  double m = 0;
  for (int64_t k = 0; k < n * nrhs; ++k) m = std::max(m, std::fabs(v[k]));
  return m;
}

Status emit_chunk(const SolveCallbacks& cb, const storage::StripeGeometry& g, const double* x,
                  int64_t nrhs, int64_t i) {
  const int64_t h = g.rows(i);
  const int64_t r0 = g.row_begin(i);
  std::vector<double> chunk(static_cast<size_t>(h * nrhs));
  for (int64_t k = 0; k < nrhs; ++k) {
    std::memcpy(chunk.data() + k * h, x + r0 + k * g.n, sizeof(double) * static_cast<size_t>(h));
  }
  return cb.on_solution_chunk(r0, h, chunk.data());
}

}  // namespace

// The longest factor suffix, ".lu.local", fits in what the store keeps free in matrix names.
static_assert(std::string_view(".lu.local").size() <= storage::kDerivedNameReserve);

std::string factor_name_for(std::string_view matrix_name, const DenseSolveOptions& options) {
  if (options.in_place) return std::string(matrix_name);
  return std::string(matrix_name) + ".lu." + std::string(backend::pivot_mode_name(options.pivot));
}

Result<SolveReport> solve_dense(storage::MatrixStore& store, std::string_view matrix_name,
                                const double* b, int64_t nrhs, const DenseSolveOptions& options,
                                const EngineConfig& config, CancelToken& cancel,
                                const SolveCallbacks& callbacks, TraceRecorder* trace) {
  auto backend = backend::make_cpu_backend();
  return solve_dense(*backend, store, matrix_name, b, nrhs, options, config, cancel, callbacks,
                     trace);
}

Result<SolveReport> solve_dense(backend::Backend& backend, storage::MatrixStore& store,
                                std::string_view matrix_name, const double* b, int64_t nrhs,
                                const DenseSolveOptions& options, const EngineConfig& config,
                                CancelToken& cancel, const SolveCallbacks& callbacks,
                                TraceRecorder* trace) {
  const auto start = Clock::now();
  const std::string name(matrix_name);
  if (nrhs < 1 || b == nullptr) {
    return Status::invalid_argument("dense solve of '" + name + "': need at least one right-hand side, got " +
                                    std::to_string(nrhs));
  }
  if (options.in_place && options.refinement_steps > 0) {
    return Status::invalid_argument("dense solve of '" + name +
                                    "': refinement needs the original matrix, which in_place overwrites");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(name));
  const storage::StripeGeometry g = info.geometry;
  const int64_t n = g.n;

  SolveReport report;
  STRIPESOLVE_ASSIGN_OR_RETURN(
      report.plan, plan_dense(n, g.stripe_rows, config, describe_machine(config, info.path_count)));
  const Plan& plan = report.plan;
  static const auto log = logger("scheduler");
  log->info("dense solve of '{}' ({} pivoting, {} strategy): {}", name,
            backend::pivot_mode_name(options.pivot), strategy_name(options.strategy),
            plan_to_text(plan));
  report.factor_name = factor_name_for(name, options);

  // Declared before the roles so that they outlive every transfer (destroyed after IoRole).
  std::unique_ptr<storage::StripedMatrix> a;
  std::unique_ptr<storage::StripedMatrix> writable;
  std::unique_ptr<storage::StripedMatrix> factor;
  std::vector<stripe::StripePivots> pivots;
  storage::ObjectNameLock factor_lock;

  if (options.in_place) {
    if (info.kind == "factor") {
      if (!options.reuse_factors) {
        return Status::failed_precondition("matrix '" + name +
                                           "' was factored in place; its original values are gone");
      }
      STRIPESOLVE_ASSIGN_OR_RETURN(factor, store.open_factor(name));
    }
  } else {
    STRIPESOLVE_ASSIGN_OR_RETURN(a, store.open_matrix(name));
    // Concurrent first solves of one matrix make one factor: the later ones wait here until it
    // is committed (or given up), then reuse it (issue 15).
    STRIPESOLVE_ASSIGN_OR_RETURN(factor_lock, store.lock_name(report.factor_name,
                                                              [&cancel] { return cancel.cancelled(); }));
    auto existing = store.open_factor(report.factor_name);
    if (existing.is_ok()) {
      // Only the factor of this very matrix: its id (made at creation, so a matrix removed and
      // made again under its name never matches), order and data checksums (issue 15).
      const bool same = storage::is_factor_of((*existing)->info(), a->info());
      if (options.reuse_factors && same) {
        factor = std::move(*existing);
      } else {
        existing->reset();
        STRIPESOLVE_RETURN_IF_ERROR(store.remove(report.factor_name));
      }
    } else if (existing.status().code() != StatusCode::kNotFound) {
      return existing.status();
    }
  }
  if (factor) {
    STRIPESOLVE_ASSIGN_OR_RETURN(auto blob, factor->read_blob(kPivotsBlob));
    STRIPESOLVE_ASSIGN_OR_RETURN(pivots, parse_all(blob, g.stripes, report.factor_name));
    if (!pivots.empty() && pivots[0].mode != options.pivot) {
      return Status::failed_precondition(
          "factor '" + report.factor_name + "' was made with " +
          std::string(backend::pivot_mode_name(pivots[0].mode)) + " pivoting, not " +
          std::string(backend::pivot_mode_name(options.pivot)));
    }
    report.reused_factors = true;
  }

  cache::StripeCache cache(config.ram_budget);
  ProgressMeter progress(callbacks.on_progress, config.progress_interval_seconds);
  progress.set_cache_counts([&cache](uint64_t* hits, uint64_t* misses) {
    const cache::CacheStats s = cache.stats();
    *hits = s.hits;
    *misses = s.misses;
  });
  IoRole io(cache, progress, trace);
  EngineContext ctx{backend, cache, progress, cancel, trace, config.progress_interval_seconds};

  if (!factor) {
    if (options.in_place) {
      STRIPESOLVE_ASSIGN_OR_RETURN(writable, store.open_for_in_place(name));
      io.set_sources(writable.get(), writable.get());
    } else {
      STRIPESOLVE_ASSIGN_OR_RETURN(writable, store.create_factor(report.factor_name, *a));
      io.set_sources(a.get(), writable.get());
    }
    const double flops = factorization_flops(g);
    progress.begin_phase("factor", flops, g.stripes);
    const auto t0 = Clock::now();
    FactorParams params{options.pivot, options.strategy, plan.meta_stripes, plan.substripe_rows,
                        plan.elim_j_workers};
    STRIPESOLVE_ASSIGN_OR_RETURN(pivots, run_factorization(ctx, *writable, params));
    STRIPESOLVE_RETURN_IF_ERROR(writable->write_blob(kPivotsBlob, serialize_all(pivots)));
    if (cancel.cancelled()) return Status::cancelled("dense solve cancelled");
    STRIPESOLVE_RETURN_IF_ERROR(writable->commit());
    report.factor_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    report.gflops = report.factor_seconds > 0 ? flops / report.factor_seconds / 1e9 : 0.0;
    io.set_sources(nullptr, nullptr);
    writable.reset();
    STRIPESOLVE_ASSIGN_OR_RETURN(factor, store.open_factor(report.factor_name));
  }
  factor_lock.release();  // the factor is committed and open: the next solve may reuse it

  // Substitution, then residual and refinement.
  report.x.assign(b, b + n * nrhs);
  double* x = report.x.data();
  const bool stream_chunks = callbacks.on_solution_chunk && options.pivot != stripe::PivotMode::kRow &&
                             options.refinement_steps == 0;
  io.set_sources(factor.get(), nullptr);
  const auto t_subst = Clock::now();
  STRIPESOLVE_RETURN_IF_ERROR(substitute(ctx, *factor, pivots, x, nrhs, [&](int64_t i) {
    return stream_chunks ? emit_chunk(callbacks, g, x, nrhs, i) : Status::ok();
  }));
  const auto t_residual = Clock::now();
  report.substitution_seconds = std::chrono::duration<double>(t_residual - t_subst).count();
  if (!options.in_place) {
    std::vector<double> r(static_cast<size_t>(n * nrhs));
    const double b_norm = norm_inf(b, n, nrhs);
    for (int step = 0;; ++step) {
      STRIPESOLVE_RETURN_IF_ERROR(cache.flush());  // factor cells must not serve reads of A
      io.set_sources(a.get(), nullptr);
      STRIPESOLVE_ASSIGN_OR_RETURN(ResidualResult res, residual(ctx, *a, b, x, nrhs, r.data()));
      const double denom = res.a_norm_inf * norm_inf(x, n, nrhs) + b_norm;
      report.residual_history.push_back(denom > 0 ? res.r_norm_inf / denom : res.r_norm_inf);
      if (step == options.refinement_steps) break;
      io.set_sources(factor.get(), nullptr);
      STRIPESOLVE_RETURN_IF_ERROR(substitute(ctx, *factor, pivots, r.data(), nrhs, nullptr));
      for (int64_t k = 0; k < n * nrhs; ++k) x[k] += r[static_cast<size_t>(k)];
    }
    report.residual = report.residual_history.back();
    report.residual_seconds = std::chrono::duration<double>(Clock::now() - t_residual).count();
  }
  if (callbacks.on_solution_chunk && !stream_chunks) {
    for (int64_t i = g.stripes - 1; i >= 0; --i) {
      STRIPESOLVE_RETURN_IF_ERROR(emit_chunk(callbacks, g, x, nrhs, i));
    }
  }
  progress.begin_phase("done", 0, 0);
  const cache::CacheStats cs = cache.stats();
  report.cache_hits = cs.hits;
  report.cache_misses = cs.misses;
  report.cache_peak_bytes = cs.peak_bytes;
  report.cache_budget = cs.budget;
  report.io_read_bytes = progress.io_read_bytes();
  report.io_written_bytes = progress.io_written_bytes();
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  log->info("dense solve of '{}' done in {:.3f} s: residual {:.3g}, factor {:.2f} GFLOP/s{}, SSD "
            "read {} written {}",
            name, report.seconds, report.residual, report.gflops,
            report.reused_factors ? " (reused factors)" : "", report.io_read_bytes,
            report.io_written_bytes);
  return report;
}

}  // namespace stripesolve::scheduler
