#include "scheduler/planner.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/units.h"

namespace stripesolve::scheduler {

namespace {

int64_t stripe_count(int64_t n, int64_t s) {
  return (n + s - 1) / s;
}

// Device bytes of the GPU tier's working set (8b) out of a budget of `budget`: the meta-stripe's
// U block and its stripes, a J part per elim.J worker plus one (the pool, in whole stripes:
// cache/device_tier.h), elim.I's transposed stripe and solver workspace (~2 stripes) and the
// libraries' own memory.
uint64_t device_bytes_needed(const Plan& p, int64_t meta_stripes, int64_t workers,
                             uint64_t budget) {
  const uint64_t block = u_block_bytes_bound(p.n, meta_stripes * p.stripe_rows);
  const uint64_t block_stripes = (block + p.stripe_bytes - 1) / p.stripe_bytes;
  return (block_stripes + static_cast<uint64_t>(meta_stripes + workers + 1 + 2)) * p.stripe_bytes +
         device_library_slack(budget);
}
uint64_t full_stripe_bytes(int64_t n, int64_t s) {
  return 8ull * static_cast<uint64_t>(s) * n;
}

// Stripe heights are n/N rounded (002 Eq 3): the largest is ceil(n/N).
int64_t largest_stripe_rows(const Plan& p) {
  return (p.n + p.stripes - 1) / p.stripes;
}

// S: the stored matrix decides; else pinned; else 1024 reduced until 4 stripes fit (Eq 17,
// S^m=2). Then N and the bytes of the largest stripe.
void choose_stripe_rows(Plan& p, int64_t stored_stripe_rows, const EngineConfig& config,
                        const Machine& m) {
  if (stored_stripe_rows > 0) {
    p.stripe_rows = std::min(stored_stripe_rows, p.n);
    p.notes.push_back("S taken from the stored matrix");
  } else {
    p.stripe_rows = new_matrix_stripe_rows(p.n, config, m);
    if (config.stripe_rows > 0) p.notes.push_back("S pinned by engine.stripe_rows");
  }
  p.stripes = stripe_count(p.n, p.stripe_rows);
  p.stripe_bytes = full_stripe_bytes(p.n, largest_stripe_rows(p));
}

// Full stripes the cache holds, with one 4 KiB slack per cached part (alignment of extents and of
// O_DIRECT buffers).
uint64_t parts_in_cache(const Plan& p, const Machine& m) {
  const uint64_t per_part = p.stripe_bytes + 2 * 4096;
  return m.ram_budget / per_part;
}

// S': pinned, else S/8 within [32, 256]; never above the largest stripe.
void choose_substripe_rows(Plan& p, const EngineConfig& config) {
  const int64_t max_rows = largest_stripe_rows(p);
  if (config.substripe_rows > 0) {
    p.substripe_rows = std::min(config.substripe_rows, max_rows);
    p.notes.push_back("S' pinned by engine.substripe_rows");
  } else {
    p.substripe_rows = std::min<int64_t>(max_rows, std::clamp<int64_t>(p.stripe_rows / 8, 32, 256));
  }
}

// k, the elim.J workers, and the GPU tier's look-ahead lanes.
void choose_workers(Plan& p, const EngineConfig& config, const Machine& m) {
  if (config.elim_j_workers > 0) {
    p.elim_j_workers = config.elim_j_workers;
    p.notes.push_back("k pinned by engine.elim_j_workers");
  } else {
    p.elim_j_workers = m.gpus > 0 ? 2 * m.gpus : std::clamp<int64_t>(m.cores, 1, 16);
  }
  // The GPU tier adds one look-ahead lane: the next meta-stripe's updates run beside the sweep.
  // Its J parts are that meta-stripe's stripes, which the device keeps anyway (the S^m term of
  // device_bytes_needed): it needs no J slot of its own.
  // engine.lookahead_lanes gives each device more: a critical update by a whole meta-stripe
  // (tens of ms beside the sweep) then no longer holds up one by a single stripe behind it.
  const int64_t lanes = config.lookahead_lanes > 0 ? config.lookahead_lanes : 1;
  if (config.lookahead_lanes > 0 && m.gpus > 0) {
    p.notes.push_back("look-ahead lanes pinned by engine.lookahead_lanes");
  }
  p.lookahead_workers = m.gpus > 0 ? lanes * m.gpus : 0;  // `lanes` per device

  // The CPU tier splits elim.I's block updates and the critical updates over helpers
  // (backend/cpu/critical_helpers.h): half the cores, which the sweep lanes leave idle about half
  // the time. With few cores the chain is short beside the sweeps: none below 4.
  if (config.critical_threads >= 0) {
    p.critical_threads = config.critical_threads;
    p.notes.push_back("critical-path helpers pinned by engine.critical_threads");
  } else {
    p.critical_threads = m.gpus == 0 && m.cores >= 4 ? m.cores / 2 : 0;
  }
}

// The devices the work is shared by (1 on the CPU backend).
int64_t devices_in_use(const Machine& m) {
  return std::max<int64_t>(1, m.gpus);
}

// The elim.J workers each device runs.
int64_t workers_per_device(const Plan& p, const Machine& m) {
  const int64_t devices = devices_in_use(m);
  return std::max<int64_t>(1, (p.elim_j_workers + devices - 1) / devices);
}

// S^m from the cache: pinned, else as many as the cache allows.
void choose_meta_stripes(Plan& p, const EngineConfig& config, uint64_t cached_parts) {
  if (config.meta_stripes > 0) {
    p.meta_stripes = std::min(config.meta_stripes, p.stripes);
    p.notes.push_back("S^m pinned by engine.meta_stripes");
    return;
  }
  // The whole matrix fits: one meta-stripe, whose inner order is the basic strategy's with
  // its full look-ahead (002 §8.1) and no zigzag sweep boundaries. Otherwise Eq 18: the
  // largest S^m for which the cache holds 2 S^m + 2 full stripes (fewest SSD passes).
  if (cached_parts >= static_cast<uint64_t>(p.stripes)) {
    p.meta_stripes = p.stripes;
  } else {
    const int64_t peak = cached_parts >= 4 ? static_cast<int64_t>((cached_parts - 2) / 2) : 1;
    p.meta_stripes = std::clamp<int64_t>(peak, 1, p.stripes);
  }
}

// The CPU tier out of core (several meta-stripes): the cache holds 2 S^m + 2 stripes, so only a
// few J parts fit beside the two meta-stripes, and one core per J update left most cores idle
// with the disk half busy (n = 16384 on 16 cores, a quarter cached: 2-5 updates in flight,
// 19-21 s). A few workers (cores / 4, unless pinned) then split every J update over the
// helpers (the other cores), OpenBLAS one thread per call: 10.2-10.6 s on the same host.
void choose_sweep_split(Plan& p, const EngineConfig& config, const Machine& m) {
  if (m.gpus > 0 || m.cores < 4 || p.meta_stripes >= p.stripes) return;
  if (config.elim_j_workers <= 0) p.elim_j_workers = std::max<int64_t>(2, m.cores / 4);
  if (config.critical_threads < 0) p.critical_threads = m.cores - p.elim_j_workers;
  p.split_sweeps = p.critical_threads > 0;
}

// How many of the next meta-stripe's first stripes the chain updates (strategy.h early_next),
// unless pinned: one on the GPU tier when the RAM cache holds A (the RAM tier and the fitting
// case, where the chain of eliminations bounds the run on several GPUs), none out of core (the
// disk bounds it there, and the stripe would be held in the cache for the whole chain) and on
// the CPU tier.
void choose_early_next(Plan& p, const EngineConfig& config, const Machine& m,
                       uint64_t cached_parts) {
  if (m.gpus <= 0) return;
  if (config.early_next >= 0) {
    p.early_next = config.early_next;
    p.notes.push_back("early updates of the next meta-stripe pinned by engine.early_next");
  } else {
    p.early_next = cached_parts >= static_cast<uint64_t>(p.stripes) ? 1 : 0;
  }
}

// Where meta_zigzag's upward sweeps take the next meta-stripe (strategy.h), unless pinned. The
// CPU tier out of core: right after the stripes the downward sweep before left cached (the cache
// holds about 2 S^m + 2 stripes: S^m stuck, S^m of the next meta-stripe spared, the rest the
// sweep's last J stripes; the cache model reads no more bytes from one stripe past them on), so
// that its eliminations overlap the rest of the sweep (n = 16384 on 16 cores, a quarter cached:
// the disk had been half idle 0.5-1 s at the end of each upward sweep, the chain running alone).
// The GPU tier keeps 002's order (its look-ahead lanes take the next meta-stripe's updates).
void choose_upward_lead(Plan& p, const EngineConfig& config, const Machine& m,
                        uint64_t cached_parts) {
  if (config.upward_lead >= 0) {
    p.upward_lead = config.upward_lead;
    p.notes.push_back("upward sweeps' lead pinned by engine.upward_lead");
  } else if (m.gpus <= 0 && p.meta_stripes < p.stripes) {
    const uint64_t held = 2 * static_cast<uint64_t>(p.meta_stripes);
    p.upward_lead = cached_parts > held ? static_cast<int64_t>(cached_parts - held) + 1 : 1;
  }
}

// S^m on the GPU tier, unless pinned: no more than the device budget holds.
void fit_meta_stripes_to_device(Plan& p, const EngineConfig& config, const Machine& m) {
  if (m.gpus <= 0 || config.meta_stripes != 0) return;
  // 8b: a J update by K = S^m S eliminated rows moves 8 bytes each way per 2K flops per
  // element; K of about 8192 keeps the device at its DGEMM rate while J streams over PCIe.
  // The device must hold the meta-stripe's U block (K x n), its stripes, a J part per
  // elim.J worker plus one, and elim.I's transposed stripe and solver workspace.
  const int64_t workers = workers_per_device(p, m);
  int64_t dev = std::max<int64_t>(1, (8192 + p.stripe_rows - 1) / p.stripe_rows);
  while (dev > 1 && device_bytes_needed(p, dev, workers, m.gpu_memory) > m.gpu_memory) {
    --dev;
  }
  if (dev < p.meta_stripes) {
    p.meta_stripes = dev;
    p.notes.push_back(
        fmt::format("S^m = {} from the device budget (K = {} rows)", dev, dev * p.stripe_rows));
  }
}

// The GPU tier's working set, and whether the whole matrix stays on the devices beside it.
void size_device_working_set(Plan& p, const Machine& m) {
  if (m.gpus <= 0) return;
  const uint64_t need =
      device_bytes_needed(p, p.meta_stripes, workers_per_device(p, m), m.gpu_memory);
  p.device_bytes_needed = need;
  // Each device keeps its own stripes (stripe j on device j mod gpus).
  const int64_t devices = devices_in_use(m);
  const uint64_t own = static_cast<uint64_t>((p.stripes + devices - 1) / devices);
  p.device_resident = need + own * p.stripe_bytes <= m.gpu_memory;
  // The copy is made as the load brings A into the RAM cache where the cache holds A, else as
  // the factorization first reads each stripe (GpuElimination::keep_read).
  p.device_keeps_original = devices == 1 && need + 2 * own * p.stripe_bytes <= m.gpu_memory;
  p.gpu_memory = m.gpu_memory;
  if (need > m.gpu_memory) {
    p.notes.push_back(fmt::format("device budget {} below the GPU working set {}",
                                  format_bytes(m.gpu_memory), format_bytes(need)));
  }
}

// Where the residual reads A (ram_original.h): a RAM cache that holds A twice keeps a copy
// beside A's cells (the rest of the budget would idle: the cells never take more than A),
// unless the device keeps one.
void choose_copy_of_a(Plan& p, const Machine& m) {
  const uint64_t matrix = static_cast<uint64_t>(p.stripes) * p.stripe_bytes;
  p.ram_keeps_original = !p.device_keeps_original && 2 * matrix <= m.ram_budget;
}

void note_small_cache(Plan& p, uint64_t cached_parts) {
  if (cached_parts < static_cast<uint64_t>(p.meta_stripes) + 2 && p.stripes > 1) {
    p.notes.push_back(
        fmt::format("cache holds {} full stripes, fewer than S^m + 2 = {} (002 Eq 17): I/O bound",
                    cached_parts, p.meta_stripes + 2));
  }
}

// S^s: pinned; on the GPU tier Eq 15; else whole parts (0).
void choose_segment_columns(Plan& p, const EngineConfig& config, const Machine& m) {
  if (config.segment_columns > 0) {
    p.segment_columns = config.segment_columns;
    p.notes.push_back("S^s pinned by engine.segment_columns");
  } else if (m.gpus > 0) {  // Eq 15, at most 8192 columns so that copies overlap the GEMMs
    p.segment_columns =
        static_cast<int64_t>(m.gpu_memory / 8 / static_cast<uint64_t>(1 + 2 * p.elim_j_workers) /
                             static_cast<uint64_t>(p.stripe_rows));
    p.segment_columns = std::clamp<int64_t>(p.segment_columns, 1024, 8192);
  }
}

void choose_round_robin_levels(Plan& p, const EngineConfig& config, const Machine& m) {
  if (config.round_robin_levels > 0) {
    p.round_robin_levels = config.round_robin_levels;
    p.notes.push_back("N_RRlevel pinned by engine.round_robin_levels");
  } else {  // Eqs 19-20 with NV_LPC the cache capacity in values, Q = 4
    const double root = std::sqrt(static_cast<double>(m.ram_budget) / 8.0);
    const double eq19 = std::ceil(static_cast<double>(p.n) / root);
    p.round_robin_levels = static_cast<int64_t>(std::max(eq19, std::ceil(4.0 * p.n / root)));
    p.round_robin_levels = std::clamp<int64_t>(p.round_robin_levels, 1, 64);
  }
}

void forecast_pcie_bytes(Plan& p, const Machine& m) {
  if (m.gpus <= 0) return;
  // 8b: a sweep streams each J after the meta-stripe through the device once, from the
  // meta-stripe's first column on (left of it J is final)
  const int64_t n = p.n;
  const uint64_t matrix = 8ull * static_cast<uint64_t>(n) * static_cast<uint64_t>(n);
  if (p.device_resident) {
    // A once; twice where the copy for the residual rides the factorization's reads (a RAM
    // cache that does not hold A, so no load before it).
    const bool copy_in_factorization =
        p.device_keeps_original && static_cast<uint64_t>(p.stripes) * p.stripe_bytes > m.ram_budget;
    p.pcie_bytes = copy_in_factorization ? 2 * matrix : matrix;
    return;
  }
  const int64_t metas = (p.stripes + p.meta_stripes - 1) / p.meta_stripes;
  for (int64_t im = 0; im < metas; ++im) {
    const int64_t from = std::min(p.stripes, im * p.meta_stripes);
    const uint64_t columns = static_cast<uint64_t>(n - std::min(n, from * p.stripe_rows));
    p.pcie_bytes += static_cast<uint64_t>(p.stripes - from) * 8ull *
                    static_cast<uint64_t>(p.stripe_rows) * columns;
  }
}

// The most tasks a solve's bookkeeping may hold: a quarter of the RAM budget
// (check_schedule_fits).
int64_t schedule_limit(const Plan& p) {
  return static_cast<int64_t>(p.ram_budget / 4 / kScheduleBytesPerTask);
}

// Each strategy's SSD traffic and the time bound of compute, disk and PCIe it implies.
void forecast_strategies(Plan& p, const Machine& m, bool factors_kept) {
  // Forecasts: cache model with the budget net of per-part slack. Where the devices keep the
  // whole matrix, the parts between their updates wait there whatever RAM holds (their RAM goes
  // back to the cache, cache::UpdatedJ): A is read once and the factors written once.
  uint64_t budget = m.ram_budget > 2 * 4096 * 8 ? m.ram_budget - 2 * 4096 * 8 : 0;
  if (p.device_resident) {
    budget = std::max(budget, static_cast<uint64_t>(p.stripes) * p.stripe_bytes);
  }
  TrafficModel model{p.n, p.stripes, budget, m.gpus <= 0, factors_kept};
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    StrategyForecast f;
    f.strategy = s;
    Result<Traffic> t = Status::unavailable("not forecast");
    if (!schedule_fits(p, s, m.gpus > 0 ? p.early_next : 0)) {
      f.why = "its schedule is over the bound on tasks (a solve refuses it)";
    } else if (t = predict_traffic(s, p.meta_stripes, model, p.upward_lead, p.early_next);
               !t.is_ok()) {
      f.why = "cache too small for the working set";
    } else {
      f.feasible = true;
      f.traffic = *t;
      const double compute = p.flops / (m.gflops * 1e9);
      const double io =
          static_cast<double>(t->bytes_read + t->bytes_written) / m.ssd_bytes_per_second;
      const double pcie = m.pcie_bytes_per_second > 0
                              ? static_cast<double>(p.pcie_bytes) / m.pcie_bytes_per_second
                              : 0.0;
      f.time_bound_seconds = std::max({compute, io, pcie});
      f.limited_by = f.time_bound_seconds == compute ? "compute"
                     : f.time_bound_seconds == io    ? "disk"
                                                     : "PCIe";
    }
    p.forecasts.push_back(f);
  }
}

}  // namespace

int64_t new_matrix_stripe_rows(int64_t n, const EngineConfig& config, const Machine& m) {
  int64_t s = config.stripe_rows;
  if (s <= 0) {
    // 1024 on the GPU tier too: at n = 57344 (RAM tier, 12 GiB, H200) S = 1024 factored at 39.7
    // TFLOP/s on one GPU and 68.9 on two, against 38.5 / 59.1 for S = 2048 and 35.8 / 65.5 for
    // 512; the fitting n = 32768 ran alike (docs/performance.md, tenth session). Narrower stripes
    // shorten each elimination on the critical path; K = S^m S stays about 8192.
    s = 1024;
    while (s > 64 && 4 * full_stripe_bytes(n, s) > m.ram_budget) s /= 2;
  }
  return std::clamp<int64_t>(s, 1, std::max<int64_t>(1, n));
}

Result<Plan> plan_dense(int64_t n, int64_t stored_stripe_rows, const EngineConfig& config,
                        const Machine& m, bool factors_kept) {
  if (n < 1)
    return Status::invalid_argument("plan: matrix order must be >= 1, got " + std::to_string(n));
  Plan p;
  p.n = n;
  p.ram_budget = m.ram_budget;
  p.flops = 2.0 / 3.0 * std::pow(static_cast<double>(n), 3);
  choose_stripe_rows(p, stored_stripe_rows, config, m);
  const uint64_t cached_parts = parts_in_cache(p, m);
  choose_substripe_rows(p, config);
  choose_workers(p, config, m);
  choose_meta_stripes(p, config, cached_parts);
  choose_sweep_split(p, config, m);
  fit_meta_stripes_to_device(p, config, m);
  choose_upward_lead(p, config, m, cached_parts);
  choose_early_next(p, config, m, cached_parts);
  size_device_working_set(p, m);
  choose_copy_of_a(p, m);
  note_small_cache(p, cached_parts);
  choose_segment_columns(p, config, m);
  choose_round_robin_levels(p, config, m);
  forecast_pcie_bytes(p, m);
  forecast_strategies(p, m, factors_kept);
  return p;
}

bool schedule_fits(const Plan& p, Strategy strategy, int64_t early_next) {
  const int64_t limit = schedule_limit(p);
  if (p.stripes * (p.stripes + 1) / 2 <= limit) return true;  // N <= 2^30: no overflow
  return count_tasks(strategy, p.stripes, p.meta_stripes, limit, p.upward_lead, early_next) <=
         limit;
}

Status check_schedule_fits(const Plan& p, Strategy strategy, int64_t early_next,
                           std::string_view what) {
  if (schedule_fits(p, strategy, early_next)) return Status::ok();
  const int64_t limit = schedule_limit(p);
  // The fewest stripes whose most tasks fit, and the height that gives them.
  const auto fitting =
      static_cast<int64_t>((std::sqrt(8.0 * static_cast<double>(limit) + 1.0) - 1.0) / 2.0);
  const int64_t height = fitting < 1 ? p.n : (p.n + fitting - 1) / fitting;
  return Status::resource_exhausted(fmt::format(
      "{} is stored in {} stripes of {} row{}: a factorization by the {} strategy schedules more "
      "than {} tasks ({} of bookkeeping beside the RAM cache), over a quarter of the RAM budget "
      "({}); store it in taller stripes (create or import it again with --stripe-rows {} or "
      "more) or give the engine a larger RAM budget",
      what, p.stripes, p.stripe_rows, p.stripe_rows == 1 ? "" : "s", strategy_name(strategy), limit,
      format_bytes(static_cast<uint64_t>(limit) * kScheduleBytesPerTask),
      format_bytes(p.ram_budget), height));
}

std::string plan_to_text(const Plan& p) {
  std::string out = fmt::format(
      "n={} S={} N={} S'={} S^s={} S^m={} N_RRlevel={} k={}{} stripe={} cache={} ({:.1f} "
      "stripes)\n",
      p.n, p.stripe_rows, p.stripes, p.substripe_rows,
      p.segment_columns == 0 ? std::string("whole") : std::to_string(p.segment_columns),
      p.meta_stripes, p.round_robin_levels, p.elim_j_workers,
      p.critical_threads > 0 ? fmt::format(" (+{} critical-path helpers{})", p.critical_threads,
                                           p.split_sweeps ? ", every update split over them" : "")
                             : std::string(),
      format_bytes(p.stripe_bytes), format_bytes(p.ram_budget),
      static_cast<double>(p.ram_budget) /
          static_cast<double>(std::max<uint64_t>(1, p.stripe_bytes)));
  if (p.upward_lead >= 0 && p.meta_stripes < p.stripes) {
    out += fmt::format(
        "  meta_zigzag's upward sweeps: the next meta-stripe after the first {} stripes\n",
        p.upward_lead);
  }
  if (p.gpu_memory > 0) {
    out += fmt::format(
        "  GPU tier: device budget {}, working set {} ({}), J segments of {} columns, "
        "{} look-ahead lane, {} to the device\n",
        format_bytes(p.gpu_memory), format_bytes(p.device_bytes_needed),
        p.device_keeps_original
            ? "the whole matrix stays on the device, and a copy of A for the residual"
        : p.device_resident ? "the whole matrix stays on the device"
                            : "J stripes stream through the device",
        p.segment_columns, p.lookahead_workers, format_bytes(p.pcie_bytes));
  }
  if (p.ram_keeps_original) out += "  a copy of A in the RAM cache for the residual\n";
  for (const auto& f : p.forecasts) {
    if (!f.feasible) {
      out += fmt::format("  {:<12} infeasible: {}\n", strategy_name(f.strategy), f.why);
      continue;
    }
    const double mb = static_cast<double>(f.traffic.matrix_bytes);
    out += fmt::format(
        "  {:<12} SSD read {} ({:.2f}x A) written {} ({:.2f}x A), time >= {:.1f} s ({}-bound)\n",
        strategy_name(f.strategy), format_bytes(f.traffic.bytes_read),
        static_cast<double>(f.traffic.bytes_read) / mb, format_bytes(f.traffic.bytes_written),
        static_cast<double>(f.traffic.bytes_written) / mb, f.time_bound_seconds, f.limited_by);
  }
  for (const auto& note : p.notes) out += "  note: " + note + "\n";
  return out;
}

std::string plan_to_json(const Plan& p) {
  nlohmann::json j = {{"n", p.n},
                      {"stripe_rows", p.stripe_rows},
                      {"stripes", p.stripes},
                      {"substripe_rows", p.substripe_rows},
                      {"segment_columns", p.segment_columns},
                      {"meta_stripes", p.meta_stripes},
                      {"round_robin_levels", p.round_robin_levels},
                      {"elim_j_workers", p.elim_j_workers},
                      {"lookahead_workers", p.lookahead_workers},
                      {"early_next", p.early_next},
                      {"critical_threads", p.critical_threads},
                      {"split_sweeps", p.split_sweeps},
                      {"upward_lead", p.upward_lead},
                      {"stripe_bytes", p.stripe_bytes},
                      {"ram_budget", p.ram_budget},
                      {"flops", p.flops},
                      {"gpu_memory", p.gpu_memory},
                      {"device_bytes_needed", p.device_bytes_needed},
                      {"device_resident", p.device_resident},
                      {"device_keeps_original", p.device_keeps_original},
                      {"ram_keeps_original", p.ram_keeps_original},
                      {"pcie_bytes", p.pcie_bytes},
                      {"notes", p.notes}};
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : p.forecasts) {
    nlohmann::json e = {{"strategy", std::string(strategy_name(f.strategy))},
                        {"feasible", f.feasible}};
    if (!f.feasible) e["why"] = f.why;
    if (f.feasible) {
      e["bytes_read"] = f.traffic.bytes_read;
      e["bytes_written"] = f.traffic.bytes_written;
      e["read_over_matrix"] =
          static_cast<double>(f.traffic.bytes_read) / static_cast<double>(f.traffic.matrix_bytes);
      e["time_bound_seconds"] = f.time_bound_seconds;
      e["limited_by"] = f.limited_by;
    }
    fs.push_back(e);
  }
  j["forecasts"] = fs;
  return j.dump();
}

}  // namespace stripesolve::scheduler
