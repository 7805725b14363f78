#include "scheduler/report_json.h"

namespace stripesolve::scheduler {

std::string_view residual_source_name(ResidualSource source) {
  switch (source) {
    case ResidualSource::kDevice:
      return "device";
    case ResidualSource::kRam:
      return "ram";
    case ResidualSource::kStore:
      break;
  }
  return "store";
}

nlohmann::json io_counters_json(const SolveReport& report) {
  return {{"io_read_bytes", report.io_read_bytes},
          {"io_written_bytes", report.io_written_bytes},
          {"cache_hits", report.cache_hits},
          {"cache_misses", report.cache_misses},
          {"cache_peak_bytes", report.cache_peak_bytes},
          {"cache_budget", report.cache_budget},
          {"pinned_bytes", report.pinned_bytes}};
}

}  // namespace stripesolve::scheduler
