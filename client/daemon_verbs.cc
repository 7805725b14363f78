// daemon status and daemon stop (client/cli.h).
#include <cstdio>
#include <memory>
#include <string>

#include "base/units.h"
#include "client/cli.h"
#include "client/human_output.h"
#include "client/progress.h"

namespace stripesolve::client {
namespace {

using protocol::MessageType;

// What tridiagonal batches' device auto measured (daemon/tridiag_auto_device.h), on a daemon
// with a GPU once a job has asked.
void print_tridiag_device_auto(const nlohmann::json& a) {
  if (!a.value("measured", false)) return;
  if (a.contains("error")) {
    std::printf("tridiagonal device auto: the CPU (%s)\n", a.value("error", std::string()).c_str());
    return;
  }
  auto rate = [&a](const char* path) {
    return a.value(path, nlohmann::json::object()).value("unknowns_per_second", 0.0) / 1e6;
  };
  std::printf(
      "tridiagonal device auto: CPU %.0f M unknowns/s, GPU with the copies %.0f M unknowns/s "
      "(measured at the first job)\n",
      rate("cpu"), rate("gpu"));
}

void print_daemon_status(const nlohmann::json& r) {
  std::printf("%s running, pid %s, uptime %s, socket %s\njobs: %s\n",
              r.value("daemon", std::string()).c_str(),
              r.value("pid", nlohmann::json(0)).dump().c_str(),
              format_duration(r.value("uptime_seconds", 0.0)).c_str(),
              r.value("socket", std::string()).c_str(),
              job_counts(r.value("jobs", nlohmann::json::object())).c_str());
  std::printf("dense backend: %s, RAM cache %s\n", r.value("backend", std::string("cpu")).c_str(),
              format_bytes(r.value("ram_budget", uint64_t{0})).c_str());
  if (const std::string url = r.value("metrics_url", std::string()); !url.empty()) {
    std::printf("metrics for Prometheus: %s\n", url.c_str());
  }
  for (const auto& d : r.value("devices", nlohmann::json::array())) {
    if (const std::string failed = d.value("failed", std::string()); !failed.empty()) {
      std::printf("GPU %d: %s, FAILED, out of use until the daemon restarts: %s\n",
                  d.value("index", 0), d.value("name", std::string()).c_str(), failed.c_str());
      continue;
    }
    if (!d.value("used", true)) {
      std::printf("GPU %d: %s, not used (engine.devices / engine.gpus)\n", d.value("index", 0),
                  d.value("name", std::string()).c_str());
      continue;
    }
    const uint64_t dense = d.value("dense_gpu_memory", uint64_t{0});
    std::printf("GPU %d: %s, %s (%s free), dense solves may use %s, %s held by jobs now\n",
                d.value("index", 0), d.value("name", std::string()).c_str(),
                format_bytes(d.value("total_memory", uint64_t{0})).c_str(),
                format_bytes(d.value("free_memory", uint64_t{0})).c_str(),
                dense > 0 ? format_bytes(dense).c_str() : "90% of the free memory",
                format_bytes(d.value("reserved_by_jobs", uint64_t{0})).c_str());
  }
  print_tridiag_device_auto(r.value("tridiag_device_auto", nlohmann::json::object()));
}

}  // namespace

void add_daemon_verbs(CLI::App& app, const Globals& g, int& code) {
  auto* daemon = app.add_subcommand("daemon", "the daemon itself");
  daemon->require_subcommand(1);
  daemon->add_subcommand("status", "is the daemon up, and what is it doing")->callback([&g, &code] {
    code = simple_call(g, MessageType::kDaemonStatus, {}, print_daemon_status);
  });
  auto cancel = std::make_shared<bool>(false);
  auto* stop = daemon->add_subcommand(
      "stop", "stop the daemon after its jobs finish (--cancel: cancel them)");
  stop->add_flag("--cancel", *cancel, "cancel running and queued jobs instead of finishing them");
  stop->callback([cancel, &g, &code] {
    code = simple_call(g, MessageType::kDaemonStop, {{"policy", *cancel ? "cancel" : "drain"}},
                       [](const nlohmann::json& r) {
                         std::printf("daemon stopping (%s)\n",
                                     r.value("policy", std::string()).c_str());
                       });
  });
}

}  // namespace stripesolve::client
