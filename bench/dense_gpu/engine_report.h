// What bench_dense_gpu records of the engine's solves: the plan and the report as JSON, the SSD
// bytes of each phase from the progress snapshots, and the objects a run leaves in the store.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scheduler/dense_solve.h"
#include "scheduler/planner.h"
#include "storage/matrix_store.h"

namespace dense_gpu_bench {

// engine.backend from --backend: cpu, auto, else cuda.
stripesolve::scheduler::ComputeBackend backend_of(const std::string& name);
nlohmann::json plan_summary(const stripesolve::scheduler::Plan& p);
nlohmann::json report_json(const stripesolve::scheduler::SolveReport& r, int64_t n, int64_t nrhs);
// Removes the named objects that exist, noting (not failing on) what cannot be removed.
void remove_objects(stripesolve::storage::MatrixStore& store,
                    const std::vector<std::string>& names);

// SSD bytes per phase of one solve from the progress snapshots: the bytes at a phase's first
// snapshot start it; the report's totals end the last one.
class PhaseIo {
 public:
  void record(const stripesolve::scheduler::Progress& p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!starts_.empty() && starts_.back().phase == p.phase) return;
    starts_.push_back({p.phase, p.io_read_bytes, p.io_written_bytes});
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    starts_.clear();
  }
  // {"factor": {"read": R, "written": W}, "forward": ..., ..., "factorization": {...}} where
  // "factorization" is everything before the substitution starts (load, factor, flush, persist).
  nlohmann::json to_json(uint64_t total_read, uint64_t total_written) const {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json out = nlohmann::json::object();
    for (size_t i = 0; i < starts_.size(); ++i) {
      const uint64_t r1 = i + 1 < starts_.size() ? starts_[i + 1].read : total_read;
      const uint64_t w1 = i + 1 < starts_.size() ? starts_[i + 1].written : total_written;
      nlohmann::json& slot = out[starts_[i].phase];
      if (slot.is_null()) slot = {{"read", uint64_t{0}}, {"written", uint64_t{0}}};
      slot["read"] = slot["read"].get<uint64_t>() + (r1 - std::min(r1, starts_[i].read));
      slot["written"] = slot["written"].get<uint64_t>() + (w1 - std::min(w1, starts_[i].written));
    }
    for (const auto& st : starts_) {
      if (st.phase == "forward" || st.phase == "backward" || st.phase == "residual" ||
          st.phase == "done") {
        out["factorization"] = {{"read", st.read}, {"written", st.written}};
        break;
      }
    }
    return out;
  }

 private:
  struct Start {
    std::string phase;
    uint64_t read = 0, written = 0;
  };
  mutable std::mutex mu_;
  std::vector<Start> starts_;
};

}  // namespace dense_gpu_bench
