// stripesolved: the stripesolve daemon. `stripesolved [--config FILE] [--check-config] [--socket
// PATH]`. Exit codes: 0 clean stop, 1 runtime failure (socket busy, store unusable), 2 bad
// configuration.
#include <csignal>
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "backend/device_engine.h"
#include "base/build_info.h"
#include "base/config.h"
#include "base/logging.h"
#include "base/units.h"
#include "daemon/daemon.h"
#include "gpu/devices.h"

namespace {

// `stripesolved --version`: the build and the GPUs this host shows the daemon.
std::string version_text() {
  using namespace stripesolve;
  std::string out = std::string("stripesolved ") + kVersion + " (commit " + kGitCommit + ", " +
                    kBuildType + ")\n";
  out += std::string("CUDA backend: ") + (gpu::built_with_cuda() ? "built in" : "not built") + "\n";
  const auto devices = gpu::list_devices();
  if (devices.empty()) out += "GPUs: none found (dense and tridiagonal jobs run on the CPU)";
  for (size_t i = 0; i < devices.size(); ++i) {
    out += (i == 0 ? "GPUs: " : "\n      ") + std::to_string(devices[i].index) + ": " +
           gpu::describe(devices[i]);
  }
  if (!devices.empty()) {  // opened at run time (backend/cuda/libraries.h)
    const Status libraries = backend::DeviceEngine::libraries_ready();
    out += "\ncuBLAS and cuSOLVER: " + (libraries.is_ok()
                                            ? std::string("found")
                                            : libraries.message() + " (dense jobs run on the CPU)");
  }
  return out;
}

int run(int argc, char** argv) {
  using namespace stripesolve;
  CLI::App app{"stripesolved: out-of-core dense and tridiagonal solver daemon"};
  std::string config_path, socket;
  bool check = false;
  app.add_option("--config", config_path,
                 "YAML configuration file (docs/config.md); default: embedded defaults");
  app.add_flag("--check-config", check,
               "validate the configuration, print the effective values, exit");
  app.add_option("--socket", socket,
                 "socket path (overrides daemon.socket and $STRIPESOLVE_SOCKET)");
  std::string ram_budget;
  app.add_option("--ram-budget", ram_budget,
                 "RAM stripe cache size, e.g. 2GiB (overrides engine.ram_budget)");
  app.set_version_flag("--version", version_text,
                       "print the version, git commit, CUDA support and GPUs, exit");
  app.footer(
      "Exit codes: 0 stopped cleanly (or --check-config passed), 1 failed at start-up or while "
      "running, 2 usage or configuration error.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints the help, the version or the error
    return rc == 0 ? 0 : 2;      // CLI11's own codes (106, 109, ...) mean nothing to a caller
  }

  daemon::DaemonConfig config;
  try {
    config = daemon::load_daemon_config(config_path);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "stripesolved: configuration error: %s\n", e.what());
    return 2;
  }
  if (!socket.empty()) config.server.socket = socket;
  if (!ram_budget.empty()) {
    const auto bytes = parse_bytes(ram_budget);
    if (!bytes || *bytes < 64 * kKiB) {
      std::fprintf(stderr,
                   "stripesolved: --ram-budget: expected a byte size such as 2GiB, got '%s'\n",
                   ram_budget.c_str());
      return 2;
    }
    config.engine.ram_budget = *bytes;
    config.engine_ram_budget_set = true;
  }
  daemon::resolve_defaults(config);
  if (check) {
    std::fputs(daemon::describe_config(config).c_str(), stdout);
    std::fprintf(stderr, "stripesolved: configuration OK (%s)\n", config.source.c_str());
    return 0;
  }
  if (Status st = set_up_logging(config.log); !st.is_ok()) {
    std::fprintf(stderr, "stripesolved: %s\n", st.to_string().c_str());
    return 2;
  }
  // Log lines (progress lines included) reach the file within a second: users follow long jobs
  // there.
  spdlog::flush_every(std::chrono::seconds(1));
  // Signals are handled by the server's signal_set; block SIGPIPE (writes report EPIPE instead).
  std::signal(SIGPIPE, SIG_IGN);
  daemon::Daemon d(std::move(config));
  if (Status st = d.start(); !st.is_ok()) {
    logger("daemon")->error("cannot start: {}", st.to_string());
    return 1;
  }
  return d.run();
}

}  // namespace

// An exception that escapes the start-up code (out of memory, a library's) ends the process with
// its message and 1, not with std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stripesolved: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "stripesolved: an unknown exception\n");
  }
  return 1;
}
