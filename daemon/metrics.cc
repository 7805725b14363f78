#include "daemon/metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/build_info.h"
#include "gpu/devices.h"

namespace stripesolve::daemon {
namespace {
void metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            double value, std::string_view labels = {}) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  out += fmt::format("{}{} {}\n", name, labels, value);
}
// The process figures Prometheus's client libraries export under the same names, from /proc.
void process_metrics(std::string& out) {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string v; fields >> v;) f.push_back(v);
    // Fields from the 3rd (state): utime, stime are the 14th and 15th, starttime the 22nd, rss the
    // 24th.
    if (f.size() > 21) {
      const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
      const double cpu = (std::stod(f[11]) + std::stod(f[12])) / tick;
      metric(out, "process_cpu_seconds_total", "counter",
             "User and system CPU time spent in seconds.", cpu);
      const double rss = std::stod(f[21]) * static_cast<double>(::sysconf(_SC_PAGESIZE));
      metric(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", rss);
      std::ifstream uptime_file("/proc/uptime");
      double uptime = 0;
      if (uptime_file >> uptime) {
        const double boot = static_cast<double>(::time(nullptr)) - uptime;
        metric(out, "process_start_time_seconds", "gauge",
               "Start time of the process since unix epoch in seconds.",
               boot + std::stod(f[19]) / tick);
      }
    }
  }
  std::error_code ec;
  int64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  metric(out, "process_open_fds", "gauge", "Number of open file descriptors.",
         static_cast<double>(fds));
}

}  // namespace

std::string Metrics::render(const JobManager& jobs, double uptime_seconds,
                            uint64_t upload_bytes) const {
  std::string out;
  out +=
      "# HELP stripesolve_build_info The daemon's version and build; the value is always 1.\n"
      "# TYPE stripesolve_build_info gauge\n";
  out += fmt::format(
      "stripesolve_build_info{{version=\"{}\",commit=\"{}\",build_type=\"{}\",cuda=\"{}\"}} 1\n",
      kVersion, kGitCommit, kBuildType, gpu::built_with_cuda() ? "on" : "off");
  process_metrics(out);
  metric(out, "stripesolve_uptime_seconds", "gauge", "Seconds since the daemon started.",
         uptime_seconds);
  metric(out, "stripesolve_connections_total", "counter", "Connections accepted.",
         static_cast<double>(connections_total.load()));
  metric(out, "stripesolve_connections_open", "gauge", "Connections open now.",
         static_cast<double>(connections_open.load()));
  metric(out, "stripesolve_connections_refused_total", "counter",
         "Connections refused at the limit.", static_cast<double>(connections_refused.load()));
  metric(out, "stripesolve_connections_timed_out_total", "counter",
         "Connections closed for sending no hello in time or for being idle.",
         static_cast<double>(connections_timed_out.load()));
  metric(out, "stripesolve_frames_received_total", "counter", "Frames received.",
         static_cast<double>(frames_in.load()));
  metric(out, "stripesolve_frames_sent_total", "counter", "Frames sent.",
         static_cast<double>(frames_out.load()));
  metric(out, "stripesolve_bytes_received_total", "counter", "Bytes received on the socket.",
         static_cast<double>(bytes_in.load()));
  metric(out, "stripesolve_bytes_sent_total", "counter", "Bytes sent on the socket.",
         static_cast<double>(bytes_out.load()));
  metric(out, "stripesolve_protocol_errors_total", "counter",
         "Connections closed for malformed input.", static_cast<double>(protocol_errors.load()));
  metric(out, "stripesolve_progress_frames_dropped_total", "counter",
         "Progress frames dropped for slow readers.",
         static_cast<double>(progress_frames_dropped.load()));
  metric(out, "stripesolve_result_bytes_streamed_total", "counter",
         "Solution bytes streamed to clients.", static_cast<double>(result_bytes_streamed.load()));
  metric(out, "stripesolve_requests_total", "counter", "Requests handled.",
         static_cast<double>(requests_total.load()));
  metric(out, "stripesolve_upload_bytes", "gauge", "Bytes of uploads waiting for a job.",
         static_cast<double>(upload_bytes));
  const std::vector<gpu::DeviceFailure> failed = gpu::device_failures();
  metric(out, "stripesolve_gpu_failed_devices", "gauge",
         "GPUs out of use after a sticky CUDA error, until the daemon restarts.",
         static_cast<double>(failed.size()));
  for (const gpu::DeviceFailure& f : failed) {
    out += fmt::format("stripesolve_gpu_failed{{device=\"{}\"}} 1\n", f.device);
  }
  const JobManager::Counts c = jobs.counts();
  out +=
      "# HELP stripesolve_jobs Jobs kept by the daemon, by state.\n# TYPE stripesolve_jobs gauge\n";
  out += fmt::format("stripesolve_jobs{{state=\"PENDING\"}} {}\n", c.pending);
  out += fmt::format("stripesolve_jobs{{state=\"RUNNING\"}} {}\n", c.running);
  out += fmt::format("stripesolve_jobs{{state=\"COMPLETED\"}} {}\n", c.completed);
  out += fmt::format("stripesolve_jobs{{state=\"COMPLETED_WITH_WARNING\"}} {}\n",
                     c.completed_with_warning);
  out += fmt::format("stripesolve_jobs{{state=\"FAILED\"}} {}\n", c.failed);
  out += fmt::format("stripesolve_jobs{{state=\"CANCELLED\"}} {}\n", c.cancelled);
  metric(out, "stripesolve_jobs_submitted_total", "counter", "Jobs submitted.",
         static_cast<double>(c.submitted_total));
  out +=
      "# HELP stripesolve_job_progress_fraction Progress of running jobs (0..1).\n"
      "# TYPE stripesolve_job_progress_fraction gauge\n";
  std::string gflops =
      "# HELP stripesolve_job_gflops Current GFLOP/s of running jobs.\n"
      "# TYPE stripesolve_job_gflops gauge\n";
  for (const auto& job : jobs.running_jobs()) {
    const nlohmann::json p = job->progress();
    const std::string labels = fmt::format("{{job=\"{}\",type=\"{}\"}}", job->id(), job->type());
    out +=
        fmt::format("stripesolve_job_progress_fraction{} {}\n", labels, p.value("fraction", 0.0));
    gflops += fmt::format("stripesolve_job_gflops{} {}\n", labels, p.value("gflops", 0.0));
  }
  out += gflops;
  return out;
}

}  // namespace stripesolve::daemon
