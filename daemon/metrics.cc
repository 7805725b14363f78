#include "daemon/metrics.h"

#include <fmt/format.h>

namespace stripesolve::daemon {
namespace {
void metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            double value, std::string_view labels = {}) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  out += fmt::format("{}{} {}\n", name, labels, value);
}
}  // namespace

std::string Metrics::render(const JobManager& jobs, double uptime_seconds, uint64_t upload_bytes) const {
  std::string out;
  metric(out, "stripesolve_uptime_seconds", "gauge", "Seconds since the daemon started.", uptime_seconds);
  metric(out, "stripesolve_connections_total", "counter", "Connections accepted.", static_cast<double>(connections_total.load()));
  metric(out, "stripesolve_connections_open", "gauge", "Connections open now.", static_cast<double>(connections_open.load()));
  metric(out, "stripesolve_connections_refused_total", "counter", "Connections refused at the limit.", static_cast<double>(connections_refused.load()));
  metric(out, "stripesolve_connections_timed_out_total", "counter", "Connections closed for sending no hello in time or for being idle.", static_cast<double>(connections_timed_out.load()));
  metric(out, "stripesolve_frames_received_total", "counter", "Frames received.", static_cast<double>(frames_in.load()));
  metric(out, "stripesolve_frames_sent_total", "counter", "Frames sent.", static_cast<double>(frames_out.load()));
  metric(out, "stripesolve_bytes_received_total", "counter", "Bytes received on the socket.", static_cast<double>(bytes_in.load()));
  metric(out, "stripesolve_bytes_sent_total", "counter", "Bytes sent on the socket.", static_cast<double>(bytes_out.load()));
  metric(out, "stripesolve_protocol_errors_total", "counter", "Connections closed for malformed input.", static_cast<double>(protocol_errors.load()));
  metric(out, "stripesolve_progress_frames_dropped_total", "counter", "Progress frames dropped for slow readers.", static_cast<double>(progress_frames_dropped.load()));
  metric(out, "stripesolve_result_bytes_streamed_total", "counter", "Solution bytes streamed to clients.", static_cast<double>(result_bytes_streamed.load()));
  metric(out, "stripesolve_requests_total", "counter", "Requests handled.", static_cast<double>(requests_total.load()));
  metric(out, "stripesolve_upload_bytes", "gauge", "Bytes of uploads waiting for a job.", static_cast<double>(upload_bytes));
  const JobManager::Counts c = jobs.counts();
  out += "# HELP stripesolve_jobs Jobs kept by the daemon, by state.\n# TYPE stripesolve_jobs gauge\n";
  out += fmt::format("stripesolve_jobs{{state=\"PENDING\"}} {}\n", c.pending);
  out += fmt::format("stripesolve_jobs{{state=\"RUNNING\"}} {}\n", c.running);
  out += fmt::format("stripesolve_jobs{{state=\"COMPLETED\"}} {}\n", c.completed);
  out += fmt::format("stripesolve_jobs{{state=\"COMPLETED_WITH_WARNING\"}} {}\n",
                     c.completed_with_warning);
  out += fmt::format("stripesolve_jobs{{state=\"FAILED\"}} {}\n", c.failed);
  out += fmt::format("stripesolve_jobs{{state=\"CANCELLED\"}} {}\n", c.cancelled);
  metric(out, "stripesolve_jobs_submitted_total", "counter", "Jobs submitted.", static_cast<double>(c.submitted_total));
  out += "# HELP stripesolve_job_progress_fraction Progress of running jobs (0..1).\n"
         "# TYPE stripesolve_job_progress_fraction gauge\n";
  std::string gflops = "# HELP stripesolve_job_gflops Current GFLOP/s of running jobs.\n"
                       "# TYPE stripesolve_job_gflops gauge\n";
  for (const auto& job : jobs.running_jobs()) {
    const nlohmann::json p = job->progress();
    const std::string labels = fmt::format("{{job=\"{}\",type=\"{}\"}}", job->id(), job->type());
    out += fmt::format("stripesolve_job_progress_fraction{} {}\n", labels, p.value("fraction", 0.0));
    gflops += fmt::format("stripesolve_job_gflops{} {}\n", labels, p.value("gflops", 0.0));
  }
  out += gflops;
  return out;
}

}  // namespace stripesolve::daemon
