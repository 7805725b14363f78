// stripesolved as an object: config, job manager, uploads, metrics and the socket server, plus
// the drain logic (SIGTERM / daemon_stop), SIGHUP log reload, periodic progress log lines and
// expiry. main.cc is a thin wrapper; integration tests run a Daemon in-process.
//
// Threading: run() blocks on the I/O thread; request_stop() may be called from any thread and
// is idempotent; the drain waits on its own thread.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "daemon/daemon_config.h"
#include "daemon/job_manager.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/tridiag_auto_device.h"
#include "daemon/uploads.h"
#include "storage/matrix_store.h"

namespace stripesolve::daemon {

// run()'s exit code when daemon.shutdown.on_gpu_failure is restart and a GPU failed (EX_TEMPFAIL:
// not 0, so that systemd's Restart=on-failure starts the daemon again).
inline constexpr int kExitGpuFailed = 75;

class Daemon {
 public:
  // `register_jobs` adds job types beyond the built-in ones (tests); may be empty.
  Daemon(DaemonConfig config, std::function<void(JobRegistry&)> register_jobs = {});
  ~Daemon();

  // Opens what the daemon needs and starts listening; then sends READY=1 to systemd.
  Status start();
  // Serves until stopped; returns the process exit code (0 after a clean drain).
  int run();
  // "drain" finishes queued and running jobs (up to the drain timeout), "cancel" cancels them.
  void request_stop(const std::string& policy);
  // SIGHUP: reopens the log file and reloads the log level from the config file.
  void reload_logging();

  const std::string& socket_path() const { return config_.server.socket; }
  JobManager& jobs() { return *jobs_; }
  storage::MatrixStore& store() { return *store_; }
  Metrics& metrics() { return metrics_; }
  UploadStore& uploads() { return uploads_; }
  nlohmann::json status_json() const;
  nlohmann::json devices_json() const;

 private:
  void on_tick();
  void register_builtin_jobs(JobRegistry& registry);
  // After the journal is restored: removes the half-made factors (kept by the store for their
  // factorization to resume) that no queued dense solve will resume.
  void remove_unclaimed_factors();
  // Whether the daemon's jobs use GPU `index` (engine.devices / engine.gpus).
  // The dense backend as status shows it: backend_, unless every GPU has failed since.
  std::string dense_backend() const;
  bool is_used(int index) const {
    return std::find(used_devices_.begin(), used_devices_.end(), index) != used_devices_.end();
  }

  DaemonConfig config_;
  std::string backend_ = "cpu";    // the dense engine's resolved backend (set by start())
  std::vector<int> used_devices_;  // the GPUs the jobs use (set by start())
  std::function<void(JobRegistry&)> register_jobs_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  Metrics metrics_;
  UploadStore uploads_;
  AutoDevice tridiag_auto_device_;  // device auto's measurement of the two paths (outlives jobs_)
  std::unique_ptr<storage::MatrixStore> store_;  // outlives jobs_ (declared before it)
  std::unique_ptr<JobJournal> journal_;          // outlives jobs_ (declared before it)
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> exit_code_{0};  // run()'s: kExitGpuFailed after a restart for a failed GPU
  Mutex drain_mu_;
  std::thread drain_thread_ GUARDED_BY(drain_mu_);  // (set by request_stop, joined by run)
};

}  // namespace stripesolve::daemon
