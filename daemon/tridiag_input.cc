#include "daemon/tridiag_input.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "base/units.h"
#include "protocol/messages.h"
#include "tridiag/interleaved_runs.h"
#include "tridiag/parallel_for.h"

namespace stripesolve::daemon {

using protocol::format_shape;
using protocol::npy_dtype_name;

namespace {

// float64 bytes per unknown of the four inputs (dl, d, du, rhs) the cap counts.
constexpr uint64_t kInputBytesPerUnknown = 4 * sizeof(double);

Result<std::string> optional_string(const nlohmann::json& job, std::string_view key,
                                    std::string fallback) {
  if (!job.contains(key)) return fallback;
  return protocol::get_string(job, key);
}

std::string describe_value(double v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

}  // namespace

std::string_view tridiag_device_name(TridiagDevice device) {
  switch (device) {
    case TridiagDevice::kAuto:
      return "auto";
    case TridiagDevice::kCpu:
      return "cpu";
    case TridiagDevice::kGpu:
      return "gpu";
  }
  return "?";
}

Result<TridiagParams> parse_tridiag_params(const nlohmann::json& job) {
  TridiagParams p;
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string algorithm, optional_string(job, "algorithm", "auto"));
  STRIPESOLVE_ASSIGN_OR_RETURN(p.algorithm, tridiag::parse_algorithm(algorithm));
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string layout, optional_string(job, "layout", "strided"));
  if (layout == "interleaved") {
    p.layout = tridiag::BatchLayout::kInterleaved;
  } else if (layout != "strided") {
    return Status::invalid_argument("field 'layout' must be 'strided' or 'interleaved', got '" +
                                    layout + "'");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(p.unstable_ok, protocol::get_bool(job, "unstable_ok", false));
  STRIPESOLVE_ASSIGN_OR_RETURN(p.fallback, protocol::get_bool(job, "fallback", false));
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string device, optional_string(job, "device", "auto"));
  if (device == "cpu") {
    p.device = TridiagDevice::kCpu;
  } else if (device == "gpu") {
    p.device = TridiagDevice::kGpu;
  } else if (device != "auto") {
    return Status::invalid_argument("field 'device' must be 'auto', 'cpu' or 'gpu', got '" +
                                    device + "'");
  }
  return p;
}

Result<std::vector<int64_t>> parse_inline_sizes(const nlohmann::json& sizes) {
  if (!sizes.is_array()) {
    return Status::invalid_argument(
        fmt::format("field 'sizes' must be a list of integers or {{\"upload\": id}}, got {}",
                    sizes.type_name()));
  }
  std::vector<int64_t> out;
  out.reserve(sizes.size());
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    if (!sizes[j].is_number_integer()) {
      return Status::invalid_argument(
          fmt::format("sizes[{}] must be an integer, got {}", j, sizes[j].dump()));
    }
    out.push_back(sizes[j].is_number_unsigned() && sizes[j].get<uint64_t>() > INT64_MAX
                      ? INT64_MAX
                      : sizes[j].get<int64_t>());
  }
  return out;
}

tridiag::BatchShape TridiagPlan::shape() const {
  tridiag::BatchShape s;
  s.layout = layout;
  s.n = n;
  s.count = count;
  s.sizes = sizes;
  return s;
}

std::string TridiagPlan::describe() const {
  if (layout == tridiag::BatchLayout::kRagged) {
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    return fmt::format("{} system{} of {}{} (ragged)", count, count == 1 ? "" : "s", *lo,
                       *lo == *hi ? "" : fmt::format("..{}", *hi));
  }
  if (count == 1) return fmt::format("one system of {}", n);
  return fmt::format("{} systems of {} ({})", count, n,
                     layout == tridiag::BatchLayout::kInterleaved ? "interleaved" : "strided");
}

std::pair<std::size_t, std::size_t> TridiagPlan::locate(std::size_t flat) const {
  switch (layout) {
    case tridiag::BatchLayout::kStrided:
      return {flat / n, flat % n};
    case tridiag::BatchLayout::kInterleaved:
      return {flat % count, flat / count};
    case tridiag::BatchLayout::kRagged:
      break;
  }
  std::size_t j = 0;
  while (j + 1 < sizes.size() && flat >= sizes[j]) flat -= sizes[j++];
  return {j, flat};
}

Result<TridiagPlan> check_tridiag_batch(const std::vector<NamedHeader>& arrays,
                                        tridiag::BatchLayout layout,
                                        const std::optional<std::vector<int64_t>>& sizes,
                                        uint64_t max_bytes) {
  if (arrays.empty()) return Status::internal("check_tridiag_batch: no arrays");
  for (const NamedHeader& a : arrays) {
    if (!protocol::is_float(a.header.dtype)) {
      return Status::invalid_argument(
          fmt::format("{} has dtype {}; the arrays must be float64 or float32", a.name,
                      npy_dtype_name(a.header.dtype)));
    }
  }
  // The rhs (last) is the reference: its shape is the solution's.
  const NamedHeader& rhs = arrays.back();
  for (const NamedHeader& a : arrays) {
    if (a.header.shape != rhs.header.shape) {
      return Status::invalid_argument(fmt::format(
          "{} has shape {} but {} has shape {}; dl, d, du and rhs must all have the same shape",
          a.name, format_shape(a.header.shape), rhs.name, format_shape(rhs.header.shape)));
    }
    if (a.header.dtype != rhs.header.dtype) {
      return Status::invalid_argument(fmt::format(
          "{} is {} but {} is {}; dl, d, du and rhs must all have the same dtype", a.name,
          npy_dtype_name(a.header.dtype), rhs.name, npy_dtype_name(rhs.header.dtype)));
    }
  }
  TridiagPlan plan;
  plan.array_shape = rhs.header.shape;
  plan.dtype = rhs.header.dtype;
  const std::string shape_text = format_shape(plan.array_shape);
  const bool two_d = plan.array_shape.size() == 2;
  if (sizes.has_value()) {
    if (layout == tridiag::BatchLayout::kInterleaved) {
      return Status::invalid_argument(
          "layout 'interleaved' cannot be combined with sizes (a ragged batch stores its systems "
          "one after another)");
    }
    if (two_d) {
      return Status::invalid_argument(fmt::format(
          "with sizes the arrays must be 1-D (the systems one after another), {} has shape {}",
          rhs.name, shape_text));
    }
    if (sizes->empty())
      return Status::invalid_argument("sizes is empty (a ragged batch needs at least one system)");
    const uint64_t length = static_cast<uint64_t>(plan.array_shape[0]);
    uint64_t sum = 0;  // saturates at UINT64_MAX
    for (std::size_t j = 0; j < sizes->size(); ++j) {
      const int64_t s = (*sizes)[j];
      if (s < 1) {
        return Status::invalid_argument(
            fmt::format("sizes[{}] is {}; every system needs at least one unknown", j, s));
      }
      sum =
          static_cast<uint64_t>(s) > UINT64_MAX - sum ? UINT64_MAX : sum + static_cast<uint64_t>(s);
    }
    if (sum != length) {
      return Status::invalid_argument(fmt::format(
          "the sizes add up to {} unknowns but {} has {} elements",
          sum == UINT64_MAX ? "more than 2^64" : std::to_string(sum), rhs.name, length));
    }
    plan.layout = tridiag::BatchLayout::kRagged;
    plan.sizes.assign(sizes->begin(), sizes->end());
    plan.count = plan.sizes.size();
  } else if (!two_d) {
    plan.n = static_cast<std::size_t>(plan.array_shape[0]);
    plan.count = 1;
  } else {
    plan.layout = layout;
    const bool interleaved = layout == tridiag::BatchLayout::kInterleaved;
    plan.count = static_cast<std::size_t>(plan.array_shape[interleaved ? 1 : 0]);
    plan.n = static_cast<std::size_t>(plan.array_shape[interleaved ? 0 : 1]);
    if (plan.count == 0)
      return Status::invalid_argument(
          fmt::format("{} has shape {}: the batch has no systems", rhs.name, shape_text));
  }
  if (plan.layout != tridiag::BatchLayout::kRagged && plan.n == 0) {
    return Status::invalid_argument(fmt::format(
        "{} has shape {}: a system needs at least one unknown (n >= 1)", rhs.name, shape_text));
  }
  plan.unknowns = static_cast<std::size_t>(rhs.header.elements());
  STRIPESOLVE_RETURN_IF_ERROR(check_batch_bytes(plan.unknowns, max_bytes));
  return plan;
}

Status check_batch_bytes(uint64_t unknowns, uint64_t max_bytes) {
  if (unknowns > max_bytes / kInputBytesPerUnknown) {
    const uint64_t bytes = unknowns > UINT64_MAX / kInputBytesPerUnknown
                               ? UINT64_MAX
                               : unknowns * kInputBytesPerUnknown;
    return Status::resource_exhausted(fmt::format(
        "the batch has {} unknowns, {} as four float64 arrays, over tridiag.max_bytes ({}); "
        "split it into smaller batches or raise tridiag.max_bytes",
        unknowns, format_bytes(bytes), format_bytes(max_bytes)));
  }
  return Status::ok();
}

Status check_finite(std::string_view name, std::span<const double> values, const TridiagPlan& plan,
                    unsigned threads) {
  // parallel_for returns the error of the lowest failing chunk: the first value, as in order.
  return tridiag::parallel_for(values.size(), threads, std::size_t{1} << 20,
                               [&](std::size_t begin, std::size_t end, unsigned) -> Status {
                                 for (std::size_t k = begin; k < end; ++k) {
                                   if (std::isfinite(values[k])) continue;
                                   std::string msg = fmt::format("{}[{}] is not finite ({})", name,
                                                                 k, describe_value(values[k]));
                                   if (plan.count > 1) {
                                     const auto [system, row] = plan.locate(k);
                                     msg += fmt::format(": system {}, row {}", system, row);
                                   }
                                   return Status::invalid_argument(std::move(msg));
                                 }
                                 return Status::ok();
                               });
}

namespace {

// Folds system j (its n values at dl, d, du, f, x) into `out`.
void record_system(ResidualSummary& out, std::size_t j, std::size_t n, const double* dl,
                   const double* d, const double* du, const double* f, const double* x) {
  const tridiag::SolutionQuality q = tridiag::solution_quality(dl, d, du, x, f, n);
  const double r = q.relative_residual;
  // A NaN residual must win too: std::max would keep the old value.
  if (!(r <= out.max_relative)) {
    out.max_relative = std::isnan(r) ? INFINITY : r;
    out.worst_system = j;
  }
  const double eta = q.backward_error;
  const double tol = tridiag::backward_error_tolerance(n);
  out.tolerance = std::max(out.tolerance, tol);
  if (!(eta <= tol)) ++out.above_tolerance;
  if (eta > out.max_backward_error) {
    out.max_backward_error = eta;
    out.worst_backward_system = j;
  }
}

}  // namespace

ResidualSummary max_relative_residual(const TridiagPlan& plan, const double* dl, const double* d,
                                      const double* du, const double* f, const double* x,
                                      unsigned threads) {
  // Each chunk of systems keeps its own maximum; merged in system order, so the result does not
  // depend on the threads.
  // About 64 Ki unknowns a chunk.
  const std::size_t per_system =
      std::max<std::size_t>(1, plan.unknowns / std::max<std::size_t>(1, plan.count));
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / per_system);
  const std::size_t chunks = (plan.count + grain - 1) / grain;
  std::vector<ResidualSummary> partial(chunks);
  std::vector<std::size_t> offsets;  // ragged: where each system starts
  if (plan.layout == tridiag::BatchLayout::kRagged) {
    offsets.resize(plan.count);
    std::size_t o = 0;
    for (std::size_t j = 0; j < plan.count; ++j) {
      offsets[j] = o;
      o += plan.sizes[j];
    }
  }
  // Each worker's gathered rows of interleaved systems, kept from chunk to chunk.
  std::vector<std::array<std::vector<double>, 5>> gathered(tridiag::resolve_threads(threads));
  (void)tridiag::parallel_for(
      plan.count, threads, grain, [&](std::size_t begin, std::size_t end, unsigned worker) {
        ResidualSummary& out = partial[begin / grain];
        if (plan.layout == tridiag::BatchLayout::kInterleaved) {
          // Gathered into contiguous rows a run of systems at a time (interleaved_runs.h: 3.1x
          // faster than one at a time on the dev VM, 2^24 unknowns of 1024 a system).
          const std::size_t n = plan.n, run = tridiag::interleaved_run(n);
          std::array<std::vector<double>, 5>& g = gathered[worker];
          for (std::size_t j0 = begin; j0 < end; j0 += run) {
            const std::size_t count = std::min(run, end - j0);
            tridiag::gather_run(n, plan.count, {dl, d, du, f, x}, j0, count, g);
            for (std::size_t b = 0; b < count; ++b) {
              const std::size_t o = b * n;
              record_system(out, j0 + b, n, &g[0][o], &g[1][o], &g[2][o], &g[3][o], &g[4][o]);
            }
          }
          return Status::ok();
        }
        for (std::size_t j = begin; j < end; ++j) {
          const bool ragged = plan.layout == tridiag::BatchLayout::kRagged;
          const std::size_t n = ragged ? plan.sizes[j] : plan.n;
          const std::size_t offset = ragged ? offsets[j] : j * plan.n;
          record_system(out, j, n, dl + offset, d + offset, du + offset, f + offset, x + offset);
        }
        return Status::ok();
      });
  ResidualSummary out;
  for (const ResidualSummary& p : partial) {
    if (!(p.max_relative <= out.max_relative)) {
      out.max_relative = p.max_relative;
      out.worst_system = p.worst_system;
    }
    if (p.max_backward_error > out.max_backward_error) {
      out.max_backward_error = p.max_backward_error;
      out.worst_backward_system = p.worst_backward_system;
    }
    out.tolerance = std::max(out.tolerance, p.tolerance);
    out.above_tolerance += p.above_tolerance;
  }
  return out;
}

}  // namespace stripesolve::daemon
