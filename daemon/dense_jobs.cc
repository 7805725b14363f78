#include "daemon/dense_jobs.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "base/units.h"
#include "daemon/job_files.h"
#include "daemon/npy_file.h"
#include "protocol/messages.h"
#include "protocol/npy.h"
#include "scheduler/dense_solve.h"
#include "scheduler/report_json.h"
#include "storage/generators.h"

namespace stripesolve::daemon {
namespace {

using protocol::get_int;
using protocol::get_string;

}  // namespace

// The rate and the ETA only once the phase has done work to measure them by (the client and the
// daemon's log would print "0.0 GFLOP/s" and "ETA 0s" for the scheduler's zeros otherwise, e.g.
// in the last, "done" phase).
nlohmann::json dense_progress_json(const scheduler::Progress& p) {
  nlohmann::json j = {{"phase", p.phase},
                      {"fraction", p.fraction},
                      {"io_read_bytes", p.io_read_bytes},
                      {"io_written_bytes", p.io_written_bytes},
                      {"io_bytes_per_second", p.io_bytes_per_second},
                      {"cache_hits", p.cache_hits},
                      {"cache_misses", p.cache_misses},
                      {"stripes_done", p.stripes_done},
                      {"stripes_total", p.stripes_total}};
  if (p.gflops > 0) j["gflops"] = p.gflops;
  if (p.fraction > 0) j["eta_seconds"] = p.eta_seconds;
  return j;
}

namespace {

struct SolveParams {
  std::string matrix;
  scheduler::DenseSolveOptions options;
};

Result<SolveParams> parse_params(const nlohmann::json& p) {
  SolveParams s;
  STRIPESOLVE_ASSIGN_OR_RETURN(s.matrix, get_string(p, "matrix"));
  if (p.contains("pivot")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string pivot, get_string(p, "pivot"));
    STRIPESOLVE_ASSIGN_OR_RETURN(s.options.pivot, backend::parse_pivot_mode(pivot));
  }
  if (p.contains("strategy")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string strategy, get_string(p, "strategy"));
    STRIPESOLVE_ASSIGN_OR_RETURN(s.options.strategy, scheduler::parse_strategy(strategy));
  }
  // "auto" (the default) or a number of steps.
  if (p.contains("refinement") && !(p["refinement"].is_string() && p["refinement"] == "auto")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(int64_t steps, get_int(p, "refinement", 0, 100));
    s.options.refinement_steps = static_cast<int>(steps);
  }
  for (const char* key : {"in_place", "reuse", "store"}) {
    if (p.contains(key) && !p[key].is_boolean()) {
      return Status::invalid_argument(fmt::format("field '{}' must be a boolean", key));
    }
  }
  s.options.in_place = p.value("in_place", false);
  s.options.reuse_factors = p.value("reuse", true);
  s.options.store_factors = p.value("store", true);
  return s;
}

}  // namespace

std::optional<std::string> factor_to_resume(const std::string& type, const nlohmann::json& params) {
  if (type != "dense_solve") return std::nullopt;
  auto parsed = parse_params(params);
  if (!parsed.is_ok() || parsed->options.in_place) return std::nullopt;
  return scheduler::factor_name_for(parsed->matrix, parsed->options);
}

namespace {

// Right-hand sides from the file the client passed: (n) or (n, k) float64 (float32 widens), in
// either order; column-major out. The size is checked (check_rhs_size) before the data is read:
// the file's length is the client's to choose.
Result<std::vector<double>> read_rhs_file(const JobContext& ctx, int64_t n,
                                          const DenseJobLimits& limits, int64_t* nrhs,
                                          bool* two_d) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int fd, job_input_file(ctx, "rhs"));
  auto header = read_npy_header(fd);
  if (!header.is_ok()) return header.status().with_context("rhs");
  const int64_t rows = header->rows(), cols = header->cols();
  *two_d = header->shape.size() == 2;
  if (rows != n) {
    return Status::invalid_argument(
        fmt::format("the right-hand sides have {} rows but matrix '{}' has order {}", rows,
                    ctx.params().value("matrix", std::string()), n));
  }
  if (cols <= 0) return Status::invalid_argument("the right-hand sides have no columns");
  STRIPESOLVE_RETURN_IF_ERROR(check_rhs_size(rows, cols, limits));
  std::vector<double> c_order(static_cast<size_t>(n * cols));
  if (Status st = read_npy_floats(fd, *header, c_order.data()); !st.is_ok())
    return st.with_context("rhs");
  *nrhs = cols;
  if (cols == 1) return c_order;
  std::vector<double> b(c_order.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < cols; ++j) b[j * n + i] = c_order[i * cols + j];
  }
  return b;
}

// The first NaN or Inf of the right-hand sides (column-major, n rows), named by row and column:
// a solve of it would only spread it through the solution.
Status check_rhs_finite(const std::vector<double>& b, int64_t n) {
  for (size_t k = 0; k < b.size(); ++k) {
    if (!std::isfinite(b[k])) {
      const auto r = static_cast<int64_t>(k) % n, c = static_cast<int64_t>(k) / n;
      return Status::invalid_argument(
          fmt::format("the right-hand sides hold a non-finite value ({}) at row {}, column {}",
                      std::isnan(b[k]) ? "NaN" : (b[k] > 0 ? "+Inf" : "-Inf"), r, c));
    }
  }
  return Status::ok();
}

// Writes solution rows (column-major, ld = rows) into the client's file, row-major.
Status write_rows(const NpyOutput& out, int64_t row_begin, int64_t rows, int64_t nrhs,
                  const double* x) {
  if (nrhs == 1) return out.write(static_cast<uint64_t>(row_begin), x, static_cast<uint64_t>(rows));
  std::vector<double> row_major(static_cast<size_t>(rows * nrhs));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < nrhs; ++j) row_major[i * nrhs + j] = x[j * rows + i];
  }
  return out.write(static_cast<uint64_t>(row_begin * nrhs), row_major.data(), row_major.size());
}

// The right-hand sides in column-major order, and the shape the solution takes.
struct Rhs {
  std::vector<double> b;
  int64_t nrhs = 1;
  bool two_d = false;  // the solution has the right-hand sides' shape: (n) or (n, k)
};

// Right-hand sides from an .npy the owner uploaded (float64), taken from the store.
Result<Rhs> take_uploaded_rhs(const JobContext& ctx, UploadStore& uploads,
                              const nlohmann::json& rhs, const std::string& matrix, int64_t n,
                              const DenseJobLimits& limits) {
  Rhs r;
  STRIPESOLVE_ASSIGN_OR_RETURN(int64_t upload, get_int(rhs, "upload", 1, INT64_MAX));
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string bytes,
                               uploads.take(ctx.owner(), static_cast<uint64_t>(upload)));
  STRIPESOLVE_ASSIGN_OR_RETURN(protocol::NpyHeader header, protocol::parse_npy_header(bytes));
  STRIPESOLVE_RETURN_IF_ERROR(
      check_rhs_size(header.rows(), std::max<int64_t>(1, header.cols()), limits));
  r.two_d = header.shape.size() == 2;
  int64_t rows = 0;
  STRIPESOLVE_ASSIGN_OR_RETURN(r.b, protocol::npy_to_column_major(bytes, &rows, &r.nrhs));
  if (rows != n) {
    return Status::invalid_argument(fmt::format(
        "the right-hand sides have {} rows but matrix '{}' has order {}", rows, matrix, n));
  }
  return r;
}

// Right-hand sides the daemon generates: {"generate": "ones"|"uniform", "nrhs": k, "seed": s}.
Result<Rhs> generated_rhs(const nlohmann::json& rhs, int64_t n, const DenseJobLimits& limits) {
  Rhs r;
  const std::string kind = rhs.value("generate", std::string("ones"));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      r.nrhs,
      get_int(rhs.contains("nrhs") ? rhs : nlohmann::json{{"nrhs", 1}}, "nrhs", 1, INT64_MAX));
  STRIPESOLVE_RETURN_IF_ERROR(check_rhs_size(n, r.nrhs, limits));
  int64_t seed = 1;
  if (rhs.contains("seed")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(seed, get_int(rhs, "seed", 0, INT64_MAX));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(r.b,
                               storage::generate_rhs(kind, n, r.nrhs, static_cast<uint64_t>(seed)));
  return r;
}

// The right-hand sides the job names: a passed file, an upload, or generated (the default: ones);
// each bounded before it is allocated, and checked finite.
Result<Rhs> gather_rhs(const JobContext& ctx, UploadStore& uploads, const std::string& matrix,
                       int64_t n, const DenseJobLimits& limits) {
  const nlohmann::json rhs = ctx.params().value("rhs", nlohmann::json{{"generate", "ones"}});
  Rhs r;
  if (names_file(ctx.params(), "rhs")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(r.b, read_rhs_file(ctx, n, limits, &r.nrhs, &r.two_d));
  } else if (rhs.contains("upload")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(r, take_uploaded_rhs(ctx, uploads, rhs, matrix, n, limits));
  } else {
    STRIPESOLVE_ASSIGN_OR_RETURN(r, generated_rhs(rhs, n, limits));
  }
  if (r.nrhs <= 0) return Status::invalid_argument("the right-hand sides have no columns");
  r.two_d = r.two_d || r.nrhs > 1;
  STRIPESOLVE_RETURN_IF_ERROR(check_rhs_finite(r.b, n));
  return r;
}

// The solution goes into the client's file when it passed one ("out"), rows as the engine
// finalizes them; else it is kept for `result` to stream.
Result<std::optional<NpyOutput>> open_solution(JobContext& ctx, int64_t n, const Rhs& rhs) {
  if (!names_file(ctx.params(), "out")) {
    STRIPESOLVE_RETURN_IF_ERROR(ctx.job().begin_solution(n, rhs.nrhs));
    return std::optional<NpyOutput>();
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(int out_fd, job_output_file(ctx, "out"));
  auto begun = NpyOutput::begin(
      out_fd, rhs.two_d ? std::vector<int64_t>{n, rhs.nrhs} : std::vector<int64_t>{n});
  if (!begun.is_ok()) return begun.status().with_context("out");
  return std::optional<NpyOutput>(*begun);
}

void log_solve_request(JobContext& ctx, const SolveParams& params, int64_t n, int64_t nrhs) {
  const int steps = params.options.refinement_steps;
  ctx.log(
      fmt::format("solving '{}' (n = {}, {} right-hand side(s), pivot {}, strategy {}, "
                  "refinement {}{}{})",
                  params.matrix, n, nrhs, backend::pivot_mode_name(params.options.pivot),
                  scheduler::strategy_name(params.options.strategy),
                  steps == scheduler::DenseSolveOptions::kRefineAuto ? std::string("auto")
                                                                     : std::to_string(steps),
                  params.options.in_place ? ", in place" : "",
                  params.options.reuse_factors ? "" : ", no reuse"));
}

// An exact zero pivot said in the user's terms (issue 17: a singular matrix says so). Partial
// pivoting (row, gepp) meets one only when the whole remaining row or column is zero, so the
// matrix is singular; local and none do not search everything, so it may not be.
Status explain_zero_pivot(const Status& st, backend::PivotMode pivot, const std::string& matrix) {
  if (st.code() != StatusCode::kNumerical || !st.message().starts_with("zero pivot at row")) {
    return st;
  }
  if (pivot == backend::PivotMode::kRow || pivot == backend::PivotMode::kGepp) {
    return Status::numerical(fmt::format(
        "matrix '{}' is singular: {} (partial pivoting found no nonzero entry to pivot on)", matrix,
        st.message()));
  }
  return Status::numerical(fmt::format(
      "{} with pivot {}, which does not search the whole row for a nonzero pivot: the matrix may "
      "still be regular; try pivot row (the default) or gepp",
      st.message(), backend::pivot_mode_name(pivot)));
}

// Solves through the engine, which cancel reaches at once. Solution rows go to the client's file or
// to the job as the engine finalizes them (all at the end when it hands X only then); progress
// and the engine's trace go to the job.
Result<scheduler::SolveReport> solve_and_publish(JobContext& ctx, storage::MatrixStore& store,
                                                 const scheduler::EngineConfig& engine,
                                                 const SolveParams& params, int64_t n,
                                                 const Rhs& rhs,
                                                 const std::optional<NpyOutput>& out) {
  // The token outlives this call: a cancel hook may run after the solve returned.
  auto token = std::make_shared<scheduler::CancelToken>();
  // A stop for a restart keeps the factorization's durable progress for the next run.
  ctx.job().on_cancel([token, &job = ctx.job()] { token->cancel(job.cancel_for_restart()); });
  std::atomic<int64_t> published{0};
  Job& job = ctx.job();
  const int64_t nrhs = rhs.nrhs;
  scheduler::SolveCallbacks callbacks;
  callbacks.on_progress = [&job](const scheduler::Progress& p) {
    job.set_progress(dense_progress_json(p));
  };
  const auto publish = [&job, &out, nrhs](int64_t row_begin, int64_t rows, const double* x) {
    if (!out) return job.publish_rows(row_begin, rows, x);
    Status st = write_rows(*out, row_begin, rows, nrhs, x);
    return st.is_ok() ? st : st.with_context("writing the solution into the client's file (out)");
  };
  callbacks.on_solution_chunk = [&publish, &published](int64_t row_begin, int64_t rows,
                                                       const double* x) {
    STRIPESOLVE_RETURN_IF_ERROR(publish(row_begin, rows, x));
    published += rows;
    return Status::ok();
  };
  scheduler::TraceRecorder trace;
  auto report = scheduler::solve_dense(store, params.matrix, rhs.b.data(), nrhs, params.options,
                                       engine, *token, callbacks, &trace);
  job.set_engine_trace(trace.to_json());
  if (!report.is_ok())
    return explain_zero_pivot(report.status(), params.options.pivot, params.matrix);
  if (published.load() == 0 && report->x.size() == static_cast<size_t>(n * nrhs)) {
    // The engine handed X only at the end: publish it in one piece.
    STRIPESOLVE_RETURN_IF_ERROR(publish(0, n, report->x.data()));
  } else if (published.load() != n) {
    return Status::internal(
        fmt::format("the engine finalized {} of {} solution rows", published.load(), n));
  }
  return report;
}

void log_solve_outcome(JobContext& ctx, const scheduler::SolveReport& r) {
  // Figures the engine does not track (growth on the GPU tier, rcond without stored factors)
  // are < 0.
  const auto figure = [](double v) {
    return v < 0 ? std::string("n/a") : fmt::format("{:.3e}", v);
  };
  ctx.log(fmt::format(
      "backward error {:.3e} (tolerance {:.3e}, {} refinement steps), rcond estimate {}, "
      "pivot growth {}",
      r.residual, r.tolerance, r.residual_history.empty() ? 0 : r.residual_history.size() - 1,
      figure(r.rcond), figure(r.growth)));
  // With reused factors nothing was factored: no rate.
  const std::string rate =
      r.reused_factors ? std::string() : fmt::format("{:.2f} GFLOP/s ", r.gflops);
  ctx.log(fmt::format("residual {:.3e}, {}on {}, {:.2f} s, read {}, written {}{}", r.residual, rate,
                      r.device.empty() ? r.backend : r.device, r.seconds,
                      format_bytes(r.io_read_bytes), format_bytes(r.io_written_bytes),
                      r.reused_factors ? ", reused factors " + r.factor_name : ""));
  if (!r.pivot_switch.empty()) ctx.log(r.pivot_switch);
  if (r.resumed) {
    // A factorization a crash interrupted, resumed from its durable progress
    // (docs/operations.md).
    ctx.log(fmt::format(
        "resumed the factorization: {} stripes and {} stripe updates were durable and not "
        "done again",
        r.resumed_eliminations, r.resumed_updates));
  }
}

nlohmann::json dense_result(const std::string& matrix, int64_t n, int64_t nrhs,
                            const scheduler::SolveReport& r, const std::optional<NpyOutput>& out) {
  nlohmann::json result{
      {"matrix", matrix},
      {"shape", {n, nrhs}},
      {"residual", r.residual},
      {"residual_history", r.residual_history},
      {"backward_error", r.residual},
      {"tolerance", r.tolerance},
      {"refinement_steps", r.residual_history.empty() ? 0 : r.residual_history.size() - 1},
      {"rcond", r.rcond},
      {"growth", r.growth},
      {"seconds", r.seconds},
      {"factor_seconds", r.factor_seconds},
      {"gflops", r.gflops},
      {"backend", r.backend},
      {"factor", r.factor_name},
      {"reused_factors", r.reused_factors},
      {"stripes", r.plan.stripes},
      {"stripe_rows", r.plan.stripe_rows}};
  result.update(scheduler::io_counters_json(r));
  if (!r.device.empty()) result["device"] = r.device;
  if (r.residual >= 0) result["residual_from"] = scheduler::residual_source_name(r.residual_source);
  result["pivot"] = backend::pivot_mode_name(r.pivot);
  if (!r.pivot_switch.empty()) result["pivot_switch"] = r.pivot_switch;
  if (r.resumed) {
    result["resumed"] = {{"eliminations", r.resumed_eliminations}, {"updates", r.resumed_updates}};
  }
  // The job manager ends a result with a warning COMPLETED_WITH_WARNING.
  if (!r.warning.empty()) result["warning"] = r.warning;
  if (out) result["output"] = {{"bytes", out->file_bytes()}};
  return result;
}

Result<nlohmann::json> run_dense_solve(JobContext& ctx, storage::MatrixStore& store,
                                       UploadStore& uploads, const scheduler::EngineConfig& engine,
                                       const DenseJobLimits& limits) {
  STRIPESOLVE_ASSIGN_OR_RETURN(SolveParams params, parse_params(ctx.params()));
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(params.matrix));
  const int64_t n = info.geometry.n;
  STRIPESOLVE_ASSIGN_OR_RETURN(Rhs rhs, gather_rhs(ctx, uploads, params.matrix, n, limits));
  STRIPESOLVE_ASSIGN_OR_RETURN(std::optional<NpyOutput> out, open_solution(ctx, n, rhs));
  log_solve_request(ctx, params, n, rhs.nrhs);
  STRIPESOLVE_ASSIGN_OR_RETURN(scheduler::SolveReport report,
                               solve_and_publish(ctx, store, engine, params, n, rhs, out));
  log_solve_outcome(ctx, report);
  return dense_result(params.matrix, n, rhs.nrhs, report, out);
}

}  // namespace

Status check_rhs_size(int64_t n, int64_t nrhs, const DenseJobLimits& limits) {
  // n <= 2^30 (storage geometry) and nrhs >= 1 come checked; the product may still overflow.
  const auto values = static_cast<unsigned __int128>(n) * static_cast<unsigned __int128>(nrhs);
  const unsigned __int128 bytes = values * 8;
  const auto shown = [](unsigned __int128 b) {
    return format_bytes(b > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(b));
  };
  if (bytes > limits.max_rhs_bytes) {
    return Status::resource_exhausted(fmt::format(
        "right-hand sides of {} x {} float64 ({}) exceed daemon.limits.max_rhs_bytes ({}); "
        "solve fewer columns at a time",
        n, nrhs, shown(bytes), format_bytes(limits.max_rhs_bytes)));
  }
  const uint64_t available = limits.available_memory ? limits.available_memory() : 0;
  if (available > 0 && bytes * kRhsCopiesInFlight > available) {
    return Status::resource_exhausted(
               fmt::format("right-hand sides of {} x {} float64 ({}) need about {} while solved, "
                           "more than the {} of "
                           "memory available now; solve fewer columns at a time",
                           n, nrhs, shown(bytes), shown(bytes * kRhsCopiesInFlight),
                           format_bytes(available)))
        .set_retryable();
  }
  return Status::ok();
}

void register_dense_jobs(JobRegistry& registry, storage::MatrixStore& store, UploadStore& uploads,
                         const scheduler::EngineConfig& engine, const DenseJobLimits& limits) {
  registry.add("dense_solve", Lane::kDense,
               [&store, &uploads, &engine, limits](JobContext& ctx) -> Result<nlohmann::json> {
                 return run_dense_solve(ctx, store, uploads, engine, limits);
               });
}

}  // namespace stripesolve::daemon
