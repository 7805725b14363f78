// engine_report.h: the engine's plan and report as JSON, and the clean-up of a run's objects.
#include "bench/dense_gpu/engine_report.h"

#include "bench/dense_gpu/bench_util.h"
#include "bench/dense_gpu/cuda_peers.h"
#include "scheduler/report_json.h"

namespace dense_gpu_bench {

using nlohmann::json;
namespace ss = stripesolve;
namespace sch = stripesolve::scheduler;

sch::ComputeBackend backend_of(const std::string& name) {
  if (name == "cpu") return sch::ComputeBackend::kCpu;
  if (name == "auto") return sch::ComputeBackend::kAuto;
  return sch::ComputeBackend::kCuda;
}

json plan_summary(const sch::Plan& p) {
  json forecasts = json::array();
  for (const auto& f : p.forecasts) {
    forecasts.push_back({{"strategy", std::string(sch::strategy_name(f.strategy))},
                         {"feasible", f.feasible},
                         {"bytes_read", f.traffic.bytes_read},
                         {"bytes_written", f.traffic.bytes_written},
                         {"time_bound_seconds", f.time_bound_seconds}});
  }
  return {{"stripe_rows", p.stripe_rows},
          {"stripes", p.stripes},
          {"substripe_rows", p.substripe_rows},
          {"segment_columns", p.segment_columns},
          {"meta_stripes", p.meta_stripes},
          {"update_k", p.meta_stripes * p.stripe_rows},
          {"elim_j_workers", p.elim_j_workers},
          {"ram_budget", p.ram_budget},
          {"gpu_memory", p.gpu_memory},
          {"device_bytes_needed", p.device_bytes_needed},
          {"device_resident", p.device_resident},
          {"notes", p.notes},
          {"forecasts", forecasts}};
}

json report_json(const sch::SolveReport& r, int64_t n, int64_t nrhs) {
  const double fs = r.factor_seconds + r.substitution_seconds;
  json j = {
      {"backend", r.backend},
      {"device", r.device},
      {"seconds", r.seconds},
      {"load_seconds", r.load_seconds},
      {"factor_seconds", r.factor_seconds},
      {"persist_seconds", r.persist_seconds},
      {"substitution_seconds", r.substitution_seconds},
      {"residual_seconds", r.residual_seconds},
      {"residual_from", std::string(sch::residual_source_name(r.residual_source))},
      {"condition_seconds", r.condition_seconds},
      {"factor_and_substitution_seconds", fs},
      {"tflops_factor", r.factor_seconds > 0 ? factor_flops(n) / r.factor_seconds * 1e-12 : 0},
      {"tflops_factor_solve", fs > 0 ? solve_flops(n, nrhs) / fs * 1e-12 : 0},
      {"residual", r.residual},
      {"rcond", r.rcond},
      {"growth", r.growth},
      {"warning", r.warning},
      {"factor_name", r.factor_name},
      {"plan", plan_summary(r.plan)}};
  j.update(sch::io_counters_json(r));
  return j;
}

void remove_objects(ss::storage::MatrixStore& store, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (!store.info(name).is_ok()) continue;
    const auto st = store.remove(name);
    if (!st.is_ok()) note("  could not remove %s: %s", name.c_str(), st.to_string().c_str());
  }
}

}  // namespace dense_gpu_bench
