// The dense solve on the GPU tier (scheduler/dense_solve.h, engine.backend cuda) beside its peers
// on the same matrices, in one process: cuSOLVER getrf + getrs with A already on the device,
// cuBLAS DGEMM at the J update's shape (m = S, k = K = S^m S, n = n - K), at k = 8192 and square
// 8192^3, and, for the SSD tier, the raw O_DIRECT bandwidth of the store's disk. JSON on stdout,
// progress on stderr (bench/dense_gpu/README.md).
//
//   bench_dense_gpu [--mode fits|ram|ssd] [--n 32768,57344] [--nrhs 1]
//                   [--pivot row|local|none|gepp] [--ram-budget BYTES] [--gpu-memory BYTES]
//                   [--gpus 0] [--panel-sms 0]
//                   [--update-k 0] [--panel-blocks B[,B2..]] [--reps 2] [--dgemm-reps 5]
//                   [--persist-factors [--no-records]] [--stream-a] [--stripe-rows 0]
//                   [--meta-stripes 0] [--elim-j-workers 0] [--lookahead-lanes 0] [--early-next -1]
//                   [--upward-lead -1] [--io-threads 1]
//                   [--dir /var/tmp/stripesolve-bench-gpu] [--trace PREFIX]
//                   [--backend cuda|auto|cpu] [--cusolver-api legacy|64] [--disk-bytes 4GiB]
//                   [--queue-depth Q] [--request-bytes BYTES] [--skip engine,cusolver,dgemm,disk]
//
// Modes (issue 16's targets): fits = RAM budget 1.25 x the matrix, device budget the engine's
// default (90% of free); ram = the same with --gpu-memory 12GiB unless given, so J stripes stream
// through the device; ssd = --ram-budget 4GiB --gpu-memory 8GiB unless given, plus the disk's raw
// bandwidth and the SSD traffic against the planner's meta_zigzag forecast.
//
// --panel-blocks B,C..: each rep also solves with engine.gpu_panel_blocks C.., right after B's
// solve (JSON "paired_panel_blocks"), so that the comparison is not the drift between runs.
// The engine: best of --reps solves (by factor + substitution seconds), factors not persisted
// unless --persist-factors; persisted factors record their durable progress (issue 18) unless
// --no-records, which is there to measure what the records cost. A RAM cache that holds A is
// loaded before the factorization (host-resident A, the targets' measure) unless --stream-a:
// then where one device keeps the matrix A is read as the factorization needs it, the daemon's
// way (DenseSolveOptions::load_first). TFLOP/s use 2/3 n^3 (factor) and
// 2/3 n^3 + 2 n^2 nrhs (factor + solve). cuSOLVER: A copied to the device before each rep
// (untimed), getrf + getrs timed with events, best of --reps after a small warm-up. Both solutions'
// scaled residuals
// ||A x - b||_inf / (||A||_inf ||x||_inf + ||b||_inf) are computed again on the device by the same
// routine (dgemv), beside the engine's own. Without a CUDA device the run prints a note and a JSON
// document with "skipped": true and exits 0 (unless --backend cpu: then the engine runs alone).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <nlohmann/json.hpp>

#include "base/units.h"
#include "bench/common/disk_bandwidth.h"
#include "bench/dense_gpu/bench_args.h"
#include "bench/dense_gpu/bench_util.h"
#include "bench/dense_gpu/cuda_peers.h"
#include "bench/dense_gpu/engine_report.h"
#include "bench/dense_gpu/trace_summary.h"
#include "scheduler/dense_solve.h"
#include "scheduler/planner.h"
#include "scheduler/report_json.h"
#include "storage/generators.h"
#include "stripe/dense_reference.h"

namespace {

using namespace dense_gpu_bench;
using nlohmann::json;
namespace ss = stripesolve;
namespace sch = stripesolve::scheduler;

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  json out;
  out["benchmark"] = "dense_gpu";
  out["mode"] = args.mode;
  out["args"] = args_json(args);
  out["host"] = host_json();

  int devices = 0;
  const cudaError_t dev_err = cudaGetDeviceCount(&devices);
  const bool have_device = dev_err == cudaSuccess && devices > 0;
  if (!have_device) {
    const std::string why = std::string("no CUDA device (cudaGetDeviceCount: ") +
                            (dev_err == cudaSuccess ? "0 devices" : cudaGetErrorString(dev_err)) +
                            ")";
    if (args.backend != "cpu") {
      std::fprintf(stderr, "bench_dense_gpu: %s: skipped (--backend cpu runs the engine alone)\n",
                   why.c_str());
      out["skipped"] = true;
      out["reason"] = why;
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    note("%s: the engine runs on the CPU, the peers are skipped", why.c_str());
    out["device"] = {{"skipped", why}};
  }
  out["skipped"] = false;

  std::unique_ptr<Cuda> cu;
  if (have_device) {
    try {
      CK(cudaSetDevice(0));
      out["device"] = device_json();
      cu = std::make_unique<Cuda>();
    } catch (const CudaError& e) {
      std::fprintf(stderr, "bench_dense_gpu: CUDA initialisation failed: %s\n", e.what());
      out["skipped"] = true;
      out["reason"] = std::string("CUDA initialisation failed: ") + e.what();
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    note("device: %s", out["device"]["name"].get<std::string>().c_str());
  }
  const bool peers = cu != nullptr;
  const auto pivot_mode = ss::backend::parse_pivot_mode(args.pivot);
  if (!pivot_mode.is_ok()) usage("--pivot: " + pivot_mode.status().to_string());

  // Raw disk bandwidth of the store's directory (the SSD tier's bound).
  std::filesystem::create_directories(args.dir);
  double disk_read_bw = 0;
  if (args.disk_bytes && *args.disk_bytes > 0 && !args.skip.count("disk")) {
    note("disk: writing and reading %s in %s with O_DIRECT", gib(double(*args.disk_bytes)).c_str(),
         args.dir.c_str());
    out["disk"] = stripesolve::bench::disk_bandwidth(args.dir, *args.disk_bytes);
    if (out["disk"].contains("read_bytes_per_second")) {
      disk_read_bw = out["disk"]["read_bytes_per_second"].get<double>();
      note("disk: read %.2f GB/s, write %.2f GB/s", disk_read_bw * 1e-9,
           out["disk"]["write_bytes_per_second"].get<double>() * 1e-9);
    } else {
      note("disk: %s", out["disk"].value("error", std::string("?")).c_str());
    }
  }

  // The square DGEMM line, once.
  if (peers && !args.skip.count("dgemm")) {
    out["dgemm_square"] = dgemm_or_error(cu.get(), "square", 8192, 8192, 8192, args.dgemm_reps);
  }

  // The store (one path under --dir, O_DIRECT where the filesystem allows it).
  const std::string store_dir = args.dir + "/store";
  std::filesystem::remove_all(store_dir);
  std::unique_ptr<ss::storage::MatrixStore> store;
  if (!args.skip.count("engine")) {
    ss::storage::StoreConfig sc;
    sc.paths = {store_dir + "/ssd0"};
    sc.free_space_reserve = 0;
    if (args.queue_depth > 0) sc.queue_depth = args.queue_depth;
    if (args.request_bytes > 0) sc.request_bytes = args.request_bytes;
    auto opened = ss::storage::MatrixStore::open(sc);
    if (!opened.is_ok()) {
      std::fprintf(stderr, "bench_dense_gpu: store: %s\n", opened.status().to_string().c_str());
      return 1;
    }
    store = std::move(*opened);
    out["io_engine"] = std::string(store->engine_name());
  }

  const ss::storage::GeneratorSpec spec{"uniform", 42};
  if (store) {
    // One untimed solve of a small matrix first, as cuSOLVER gets its warm-up below: the first
    // use of cuBLAS and cuSOLVER in a process loads their kernels (CUDA's lazy loading), which
    // would otherwise land in the first rep of the first n.
    const auto t_warm = Clock::now();
    const int64_t wn = 4096;
    sch::EngineConfig warm;
    warm.backend = backend_of(args.backend);
    warm.ram_budget = 256 * ss::kMiB;
    warm.progress_interval_seconds = 10;
    sch::DenseSolveOptions wo;
    wo.pivot = *pivot_mode;
    wo.reuse_factors = false;
    wo.store_factors = false;
    std::vector<double> wb = ss::stripe::uniform_matrix(wn, 1, 7);
    ss::Status st = store->create_generated("W", wn, spec, 1024).status();
    if (st.is_ok()) {
      sch::CancelToken cancel;
      st = sch::solve_dense(*store, "W", wb.data(), 1, wo, warm, cancel, {}, nullptr).status();
    }
    (void)store->remove_with_factors("W");
    out["engine_warmup"] = {{"n", wn},
                            {"seconds", seconds_since(t_warm)},
                            {"status", st.is_ok() ? std::string("ok") : st.to_string()}};
    note("engine warm-up (n = %lld): %.1f s%s", (long long)wn, seconds_since(t_warm),
         st.is_ok() ? "" : (" (" + st.to_string() + ")").c_str());
  }
  json runs = json::array();
  for (const int64_t n : args.ns) {
    const int64_t nrhs = args.nrhs;
    const double matrix_bytes = 8.0 * double(n) * double(n);
    json run = {{"n", n},
                {"nrhs", nrhs},
                {"matrix_bytes", matrix_bytes},
                {"flops_factor", factor_flops(n)},
                {"flops_factor_solve", solve_flops(n, nrhs)}};
    note("n = %lld (A %s)", (long long)n, gib(matrix_bytes).c_str());

    sch::EngineConfig config;
    config.backend = backend_of(args.backend);
    config.ram_budget =
        args.ram_budget ? *args.ram_budget
                        : (static_cast<uint64_t>(1.25 * matrix_bytes) / ss::kMiB + 1) * ss::kMiB;
    config.gpu_memory = args.gpu_memory.value_or(0);
    config.meta_stripes = args.meta_stripes;
    config.elim_j_workers = args.elim_j_workers;
    config.lookahead_lanes = args.lookahead_lanes;
    config.early_next = args.early_next;
    config.upward_lead = args.upward_lead;
    config.io_threads = args.io_threads;
    config.gpus = args.gpus;
    config.gpu_panel_sms = args.panel_sms;
    config.gpu_update_k = args.update_k;
    config.gpu_panel_blocks = args.panel_blocks;
    config.segment_columns = args.segment_columns;
    config.progress_interval_seconds = 10;
    run["ram_budget"] = config.ram_budget;
    run["gpu_memory"] = config.gpu_memory;

    // S: pinned, else the planner's for this config (the daemon's rule for new matrices), with
    // the engine's default device budget (90% of free) standing in for gpu_memory 0.
    sch::EngineConfig planning = config;
    if (peers && planning.gpu_memory == 0 && config.backend != sch::ComputeBackend::kCpu) {
      planning.gpu_memory = static_cast<uint64_t>(0.9 * double(device_free_bytes()));
    }
    int64_t stripe_rows = args.stripe_rows;
    std::optional<sch::Plan> pre_plan;
    {
      auto p = sch::plan_dense(n, args.stripe_rows, planning, sch::describe_machine(planning, 1));
      if (p.is_ok()) pre_plan = *p;
      if (stripe_rows == 0) stripe_rows = pre_plan ? pre_plan->stripe_rows : 2048;
    }
    run["stripe_rows"] = stripe_rows;

    // 1. stripesolve through the real engine.
    std::vector<double> b = ss::stripe::uniform_matrix(n, nrhs, 43);
    std::vector<double> engine_x;
    std::optional<sch::Plan> plan;
    double engine_fs = 0, engine_tflops_factor = 0, engine_residual = -1;
    if (store) {
      json eng;
      const auto t_create = Clock::now();
      auto created = store->create_generated("A", n, spec, stripe_rows);
      if (!created.is_ok()) {
        eng["error"] = "create A: " + created.status().to_string();
      } else {
        eng["create_seconds"] = seconds_since(t_create);
        note("  created A (S = %lld) in %.1f s", (long long)stripe_rows, seconds_since(t_create));
        sch::DenseSolveOptions options;
        options.pivot = *pivot_mode;
        options.reuse_factors = false;
        options.store_factors = args.persist_factors;
        options.record_progress = args.records;
        options.load_first = !args.stream_a;
        // Every phase change emits a snapshot, so the SSD bytes at the first snapshot of each phase
        // split the solve's traffic by phase (the planner's forecast covers the factorization).
        PhaseIo phase_io;
        sch::SolveCallbacks callbacks;
        callbacks.on_progress = [&phase_io](const sch::Progress& p) {
          phase_io.record(p);
          if (p.fraction <= 0) return;  // the start of a phase: nothing to say yet
          note("    %-9s %5.1f%%  %8.1f GFLOP/s  read %s  written %s", p.phase.c_str(),
               100 * p.fraction, p.gflops, gib(double(p.io_read_bytes)).c_str(),
               gib(double(p.io_written_bytes)).c_str());
        };
        json reps = json::array();
        json paired = json::object();  // --panel-blocks B,C..: C.. after B in every rep
        std::optional<sch::SolveReport> best;
        json best_phase_io;
        std::string best_trace;
        for (int rep = 0; rep < args.reps; ++rep) {
          sch::CancelToken cancel;
          phase_io.clear();
          std::optional<sch::TraceRecorder> trace;
          // Every span: the file has no reply limit, and the analyses read the whole run.
          if (!args.trace.empty()) trace.emplace(size_t{1} << 26);
          auto r = sch::solve_dense(*store, "A", b.data(), nrhs, options, config, cancel, callbacks,
                                    trace ? &*trace : nullptr);
          if (!r.is_ok()) {
            reps.push_back({{"error", r.status().to_string()}});
            note("  stripesolve rep %d: %s", rep + 1, r.status().to_string().c_str());
            continue;
          }
          const double fs = r->factor_seconds + r->substitution_seconds;
          reps.push_back({{"seconds", r->seconds},
                          {"load_seconds", r->load_seconds},
                          {"factor_seconds", r->factor_seconds},
                          {"persist_seconds", r->persist_seconds},
                          {"substitution_seconds", r->substitution_seconds},
                          {"residual_seconds", r->residual_seconds},
                          {"residual_from", sch::residual_source_name(r->residual_source)},
                          {"condition_seconds", r->condition_seconds},
                          {"io_read_bytes", r->io_read_bytes},
                          {"io_written_bytes", r->io_written_bytes}});
          note(
              "  stripesolve rep %d (%s): factor %.3f s (%.2f TFLOP/s) + substitution %.3f s, "
              "load %.3f s, residual pass %.3f s%s, condition %.3f s, total %.3f s, residual "
              "%.2e, rcond %.2e",
              rep + 1, r->backend.c_str(), r->factor_seconds,
              factor_flops(n) / std::max(1e-30, r->factor_seconds) * 1e-12, r->substitution_seconds,
              r->load_seconds, r->residual_seconds,
              r->residual_source == sch::ResidualSource::kStore    ? ""
              : r->residual_source == sch::ResidualSource::kDevice ? " (device)"
                                                                   : " (RAM)",
              r->condition_seconds, r->seconds, r->residual, r->rcond);
          reps.back()["io_by_phase"] = phase_io.to_json(r->io_read_bytes, r->io_written_bytes);
          for (const int64_t blocks : args.panel_blocks_paired) {
            sch::EngineConfig other = config;
            other.gpu_panel_blocks = blocks;
            auto o =
                sch::solve_dense(*store, "A", b.data(), nrhs, options, other, cancel, {}, nullptr);
            json& tried = paired[std::to_string(blocks)];
            if (!o.is_ok()) {
              tried.push_back({{"error", o.status().to_string()}});
              continue;
            }
            const double tflops = factor_flops(n) / std::max(1e-30, o->factor_seconds) * 1e-12;
            tried.push_back({{"factor_seconds", o->factor_seconds},
                             {"tflops_factor", tflops},
                             {"substitution_seconds", o->substitution_seconds},
                             {"residual", o->residual}});
            note("  paired rep %d, panel blocks %lld: factor %.3f s (%.2f TFLOP/s), residual %.2e",
                 rep + 1, static_cast<long long>(blocks), o->factor_seconds, tflops, o->residual);
          }
          if (!best || fs < best->factor_seconds + best->substitution_seconds) {
            best_phase_io = reps.back()["io_by_phase"];
            if (trace) best_trace = trace->to_json();
            best = std::move(*r);
          }
        }
        if (best) {
          eng.update(report_json(*best, n, nrhs));
          eng["io_by_phase"] = best_phase_io;
          if (!best_trace.empty()) {
            const std::string path = args.trace + "_n" + std::to_string(n) + ".json";
            std::ofstream(path) << best_trace;
            eng["trace"] = stripesolve::bench::summarize_trace(best_trace);
            eng["trace"]["file"] = path;
            note("%s", stripesolve::bench::format_trace_summary(eng["trace"]).c_str());
          }
          engine_fs = best->factor_seconds + best->substitution_seconds;
          engine_tflops_factor = eng["tflops_factor"].get<double>();
          engine_residual = best->residual;
          engine_x = std::move(best->x);
          plan = best->plan;
        } else {
          eng["error"] = "every rep failed";
        }
        eng["reps"] = reps;
        if (!paired.empty()) eng["paired_panel_blocks"] = paired;
        remove_objects(*store,
                       {"A", sch::factor_name_for("A", options), best ? best->factor_name : ""});
      }
      run["stripesolve"] = eng;
    } else {
      run["stripesolve"] = {{"skipped", "--skip engine"}};
    }
    if (!plan && pre_plan) run["plan_without_engine"] = plan_summary(*pre_plan);
    const sch::Plan* shape = plan ? &*plan : (pre_plan ? &*pre_plan : nullptr);

    // 2. Peers: cuSOLVER with A on the device, DGEMM at the J update's shape.
    json cmp = json::object();
    if (peers && !args.skip.count("cusolver")) {
      note("  cusolver: generating A on the host");
      std::vector<double> a(static_cast<size_t>(n * n));
      parallel_for(n, [&](int64_t c0, int64_t c1) {
        ss::storage::fill_generated(spec, n, 0, n, c0 * n, (c1 - c0) * n, a.data() + c0 * n);
      });
      const double norm_a = norm_inf(a, n);
      json cs;
      try {
        cs = run_cusolver(*cu, a, n, b, nrhs, args.reps, args.cusolver_api, norm_a, engine_x);
      } catch (const CudaError& e) {
        cs["error"] = e.what();
        (void)cudaGetLastError();
      }
      run["cusolver"] = cs;
      if (cs.contains("seconds") && engine_fs > 0) {
        cmp["stripesolve_speedup"] = cs["seconds"].get<double>() / engine_fs;
      }
      if (cs.contains("residual") && engine_residual >= 0) {
        cmp["residual_ratio_to_cusolver"] = engine_residual / cs["residual"].get<double>();
      }
      if (cs.contains("stripesolve_residual_same_routine")) {
        cmp["residual_ratio_to_cusolver_same_routine"] =
            cs["stripesolve_residual_same_routine"].get<double>() / cs["residual"].get<double>();
      }
    } else {
      run["cusolver"] = {{"skipped", peers ? "--skip cusolver" : "no CUDA device"}};
    }

    double dgemm_rate = 0;  // FLOP/s at the update shape
    if (peers && !args.skip.count("dgemm")) {
      const int64_t s = shape ? shape->stripe_rows : stripe_rows;
      const int64_t k = shape ? shape->meta_stripes * shape->stripe_rows : 8192;
      json lines = json::array();
      if (k < n) {
        lines.push_back(dgemm_or_error(cu.get(), "update_shape", s, n - k, k, args.dgemm_reps));
      } else {
        lines.push_back({{"role", "update_shape"},
                         {"m", s},
                         {"k", k},
                         {"skipped", "K = S^m S covers the matrix: no J update"}});
      }
      if (k != 8192 && 8192 < n) {
        lines.push_back(dgemm_or_error(cu.get(), "k8192", s, n - 8192, 8192, args.dgemm_reps));
      }
      // The update shape's rate; k = 8192's when the plan has no J update (K covers the matrix).
      std::string rate_role;
      for (const auto& l : lines) {
        if (l.contains("tflops") && dgemm_rate == 0) {
          dgemm_rate = l["tflops"].get<double>() * 1e12;
          rate_role = l["role"].get<std::string>();
        }
      }
      run["dgemm"] = lines;
      if (dgemm_rate > 0) {
        cmp["dgemm_tflops_at_update_shape"] = dgemm_rate * 1e-12;
        cmp["dgemm_rate_from"] = rate_role;
        if (engine_tflops_factor > 0)
          cmp["ratio_to_dgemm"] = engine_tflops_factor * 1e12 / dgemm_rate;
      }
    }
    run["comparison"] = cmp;

    // 3. The SSD tier: traffic against the planner's meta_zigzag forecast, time against the bound.
    if (plan && run["stripesolve"].contains("io_read_bytes") &&
        (args.mode == "ssd" || disk_read_bw > 0)) {
      const auto& eng = run["stripesolve"];
      const double ssd_bytes =
          eng["io_read_bytes"].get<double>() + eng["io_written_bytes"].get<double>();
      json ssd = {{"ssd_bytes", ssd_bytes}, {"ssd_bytes_over_matrix", ssd_bytes / matrix_bytes}};
      // The forecast covers the factorization (with its final flush where the factors are kept:
      // --persist-factors); the solve's total adds the substitution's reads of the factors and
      // the residual's read of A.
      double factorization_bytes = -1;
      if (eng.contains("io_by_phase") && eng["io_by_phase"].contains("factorization")) {
        const auto& f = eng["io_by_phase"]["factorization"];
        factorization_bytes = f["read"].get<double>() + f["written"].get<double>();
        ssd["factorization_ssd_bytes"] = factorization_bytes;
      }
      for (const auto& f : plan->forecasts) {
        if (f.strategy != sch::Strategy::kMetaZigzag) continue;
        const double predicted = double(f.traffic.bytes_read) + double(f.traffic.bytes_written);
        ssd["predicted_meta_zigzag_bytes"] = predicted;
        ssd["predicted_feasible"] = f.feasible;
        if (predicted > 0) {
          ssd["ssd_bytes_over_predicted"] = ssd_bytes / predicted;
          if (factorization_bytes >= 0) {
            ssd["factorization_ssd_bytes_over_predicted"] = factorization_bytes / predicted;
          }
        }
      }
      if (dgemm_rate > 0 && disk_read_bw > 0) {
        const double compute_bound = solve_flops(n, nrhs) / dgemm_rate;
        const double io_bound = ssd_bytes / disk_read_bw;
        const double bound = std::max(compute_bound, io_bound);
        const double t = eng["seconds"].get<double>();
        ssd["compute_bound_seconds"] = compute_bound;
        ssd["io_bound_seconds"] = io_bound;
        ssd["time_bound_seconds"] = bound;
        ssd["time_seconds"] = t;  // the whole solve, whose SSD bytes are all counted above
        ssd["time_over_bound"] = t / bound;
        if (factorization_bytes >= 0) {  // the factorization alone against its own bound
          const double fbound =
              std::max(factor_flops(n) / dgemm_rate, factorization_bytes / disk_read_bw);
          const double ft = eng["factor_seconds"].get<double>() +
                            eng["load_seconds"].get<double>() +
                            eng["persist_seconds"].get<double>();
          ssd["factorization_time_bound_seconds"] = fbound;
          ssd["factorization_seconds"] = ft;
          ssd["factorization_time_over_bound"] = ft / fbound;
        }
      }
      run["ssd"] = ssd;
    }
    std::cerr << run["comparison"].dump() << "\n";
    runs.push_back(run);
  }
  out["runs"] = runs;
  std::cout << out.dump(2) << "\n";
  store.reset();
  std::filesystem::remove_all(store_dir);
  return 0;
}
