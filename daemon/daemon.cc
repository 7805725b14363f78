#include "daemon/daemon.h"

#include <unistd.h>

#include <csignal>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/build_info.h"
#include "base/config.h"
#include "base/logging.h"
#include "base/units.h"
#include "daemon/dense_jobs.h"
#include "daemon/matrix_jobs.h"
#include "daemon/sd_notify.h"
#include "daemon/tridiag_jobs.h"
#include "gpu/devices.h"
#include "scheduler/planner.h"

namespace stripesolve::daemon {

Daemon::Daemon(DaemonConfig config, std::function<void(JobRegistry&)> register_jobs)
    : config_(std::move(config)),
      register_jobs_(std::move(register_jobs)),
      uploads_(config_.server.limits.max_upload_total) {
  resolve_defaults(config_);
}

Daemon::~Daemon() {
  if (config_.server.on_gpu_failure == "restart") gpu::set_device_failure_listener({});
  {
    MutexLock lock(drain_mu_);
    if (drain_thread_.joinable()) drain_thread_.join();
  }
  server_.reset();
  jobs_.reset();
}

void Daemon::register_builtin_jobs(JobRegistry& registry) {
  // New matrices get the planner's stripe height (the same on the CPU and the GPU tier).
  register_matrix_jobs(registry, *store_, config_.engine);
  register_dense_jobs(registry, *store_, uploads_, config_.engine,
                      DenseJobLimits{config_.server.limits.max_rhs_bytes, available_memory_bytes});
  register_tridiag_jobs(registry, uploads_, config_.tridiag, tridiag_auto_device_);
}

Status Daemon::start() {
  const ServerConfig& s = config_.server;
  // engine.backend: cuda without a device is a start-up error; GPU keys on a CPU host a warning.
  std::vector<std::string> warnings;
  auto backend = scheduler::resolve_backend(config_.engine, &warnings);
  if (!backend.is_ok()) return backend.status();
  for (const auto& w : warnings) logger("daemon")->warn("{}", w);
  backend_ = std::string(scheduler::compute_backend_name(*backend));
  const std::vector<gpu::DeviceInfo> all = gpu::list_devices();
  auto used = gpu::choose_devices(config_.engine.devices, config_.engine.gpus,
                                  static_cast<int>(all.size()));
  if (!used.is_ok()) return used.status();
  used_devices_ = std::move(used).value();
  if (s.on_gpu_failure == "restart") {
    gpu::set_device_failure_listener([this](int device, const std::string&) {
      logger("daemon")->error(
          "GPU {} failed: stopping to be restarted (daemon.shutdown.on_gpu_failure: restart); "
          "running dense solves resume after the restart",
          device);
      exit_code_ = kExitGpuFailed;
      request_stop("cancel");
    });
  }
  for (const auto& d : all) {
    // The device memory the daemon's GPU jobs (dense solves, tridiagonal batches) hold together:
    // 90% of what is free at start; a job that would pass it fails or falls back to the CPU.
    gpu::DeviceBudget::of(d.index).set_limit(d.free_memory / 10 * 9);
    const bool in_use = is_used(d.index);
    logger("daemon")->info("GPU {}: {}, {}", d.index, gpu::describe(d),
                           in_use ? "jobs' budget " + format_bytes(d.free_memory / 10 * 9)
                                  : std::string("not used (engine.devices / engine.gpus)"));
  }
  auto store = storage::MatrixStore::open(config_.store);
  if (!store.is_ok())
    return store.status().with_context("cannot open the matrix store (store.paths)");
  store_ = std::move(store).value();
  logger("daemon")->info("store at {} ({} path(s), {} I/O), engine RAM budget {}",
                         config_.store.paths[0], config_.store.paths.size(), store_->engine_name(),
                         format_bytes(config_.engine.ram_budget));
  auto journal = JobJournal::open(s.state_dir);
  if (!journal.is_ok())
    return journal.status().with_context("cannot open the job journal (daemon.state_dir)");
  journal_ = std::move(journal).value();
  JobRegistry registry;
  register_builtin_jobs(registry);
  if (register_jobs_) register_jobs_(registry);
  JobManagerConfig jc;
  jc.small_concurrency = static_cast<int>(s.small_concurrency);
  jc.dense_concurrency = static_cast<int>(s.dense_concurrency);
  jc.tridiag_concurrency = static_cast<int>(s.tridiag_concurrency);
  jc.max_jobs = s.limits.max_jobs;
  jc.max_files_per_uid = s.limits.max_job_files_per_uid;
  jc.result_ttl = std::chrono::seconds(s.result_ttl_seconds);
  jobs_ = std::make_unique<JobManager>(jc, std::move(registry), journal_.get());
  auto restored = jobs_->restore();
  if (!restored.is_ok()) return restored.status().with_context("cannot read the job journal");
  logger("daemon")->info(
      "job journal {}/state.db: {} finished job(s) kept, {} queued again, {} failed by the "
      "restart; next job id {}",
      s.state_dir, restored->finished, restored->requeued, restored->failed, journal_->next_id());
  remove_unclaimed_factors();

  ServerHooks hooks;
  hooks.daemon_status = [this] { return status_json(); };
  hooks.matrices = [this](const nlohmann::json& request) {
    return request.contains("plan") ? matrix_plan_query(*store_, request, config_.engine)
                                    : matrices_query(*store_, request);
  };
  hooks.metrics_text = [this] {
    const double up =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    return metrics_.render(*jobs_, up, uploads_.bytes_held());
  };
  hooks.request_stop = [this](uid_t uid, std::string policy) {
    logger("daemon")->info("stop requested by uid {} (policy {})", uid, policy);
    request_stop(policy);
  };
  hooks.on_signal = [this](int signo) {
    if (signo == SIGHUP) {
      reload_logging();
    } else {
      logger("daemon")->info("{} received: draining (policy {})",
                             signo == SIGTERM ? "SIGTERM" : "SIGINT",
                             config_.server.shutdown_policy);
      request_stop(config_.server.shutdown_policy == "cancel" ? "cancel" : "drain");
    }
  };
  hooks.on_tick = [this] { on_tick(); };
  server_ = std::make_unique<Server>(s, s.socket, *jobs_, uploads_, metrics_, std::move(hooks));
  STRIPESOLVE_RETURN_IF_ERROR(server_->listen());
  logger("daemon")->info("stripesolved ready (pid {}, uid {}, config {})", ::getpid(), ::getuid(),
                         config_.source);
  Status st =
      sd_notify(fmt::format("READY=1\nSTATUS=listening on {}\nMAINPID={}", s.socket, ::getpid()));
  if (!st.is_ok()) logger("daemon")->warn("sd_notify: {}", st.message());
  return Status::ok();
}

int Daemon::run() {
  server_->run();
  {
    MutexLock lock(drain_mu_);
    if (drain_thread_.joinable()) drain_thread_.join();
  }
  logger("daemon")->info("stripesolved stopped");
  return exit_code_.load();
}

void Daemon::request_stop(const std::string& policy) {
  if (stopping_.exchange(true)) return;
  (void)sd_notify("STOPPING=1");
  // The socket stays open through the drain (issue 15 point 8): clients follow, fetch and cancel
  // their jobs; only new work is refused.
  server_->drain();
  jobs_->stop_accepting();
  if (policy == "cancel") jobs_->cancel_all();
  const auto timeout = std::chrono::seconds(config_.server.drain_timeout_seconds);
  const auto delivery = std::chrono::seconds(config_.server.delivery_timeout_seconds);
  // The drain thread may end the I/O loop before this assignment completes; run() joins it under
  // the same mutex.
  MutexLock lock(drain_mu_);
  drain_thread_ = std::thread([this, timeout, delivery] {
    auto log = logger("daemon");
    if (!jobs_->wait_idle(std::chrono::steady_clock::now() + timeout)) {
      log->warn("drain timeout ({} s) passed; cancelling the jobs still running", timeout.count());
      jobs_->cancel_all();
      jobs_->wait_idle(std::chrono::steady_clock::time_point::max());
    }
    log->info("all jobs ended; closing once their results are delivered (at most {} s)",
              delivery.count());
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
    server_->finish_when_delivered(std::chrono::steady_clock::now() + delivery);
  });
}

void Daemon::reload_logging() {
  auto log = logger("daemon");
  LogConfig next = config_.log;
  if (config_.source != "<embedded defaults>") {
    try {
      next = load_daemon_config(config_.source).log;
    } catch (const ConfigError& e) {
      log->error("SIGHUP: keeping the old log settings: {}", e.what());
    }
  }
  Status st = set_up_logging(next);
  if (st.is_ok()) st = reopen_log_file();
  if (!st.is_ok()) {
    log->error("SIGHUP: reopening logs failed: {}", st.to_string());
    return;
  }
  config_.log = next;
  log->info("SIGHUP: logs reopened, level {}", next.level);
  log->flush();
}

void Daemon::on_tick() {
  auto log = logger("progress");
  for (const auto& job : jobs_->running_jobs()) {
    const nlohmann::json p = job->progress();
    LogJobScope scope(static_cast<int64_t>(job->id()));  // "job N: " / the JSON field
    std::string line =
        fmt::format("{} uid {}: {} {:.1f}%", job->type(), job->owner(),
                    p.value("phase", std::string("running")), 100.0 * p.value("fraction", 0.0));
    if (p.contains("gflops")) line += fmt::format(" {:.1f} GFLOP/s", p.value("gflops", 0.0));
    if (p.contains("io_bytes_per_second")) {
      line += fmt::format(" I/O {:.2f} GB/s", p.value("io_bytes_per_second", 0.0) / 1e9);
    }
    if (p.contains("eta_seconds"))
      line += fmt::format(" ETA {:.0f} s", p.value("eta_seconds", 0.0));
    log->info("{}", line);
    job->append_log(line);
  }
  jobs_->expire(Clock::now());
  uploads_.expire(std::chrono::steady_clock::now(),
                  std::chrono::seconds(config_.server.upload_ttl_seconds));
}

nlohmann::json Daemon::status_json() const {
  const auto c = jobs_->counts();
  return {{"daemon", std::string("stripesolved ") + kVersion},
          {"commit", kGitCommit},
          {"pid", ::getpid()},
          {"uid", ::getuid()},
          {"socket", config_.server.socket},
          {"config", config_.source},
          {"uptime_seconds",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
          {"stopping", stopping_.load()},
          {"connections", metrics_.connections_open.load()},
          {"jobs",
           {{"pending", c.pending},
            {"running", c.running},
            {"completed", c.completed},
            {"completed_with_warning", c.completed_with_warning},
            {"failed", c.failed},
            {"cancelled", c.cancelled},
            {"submitted_total", c.submitted_total}}},
          {"lanes",
           {{"small", config_.server.small_concurrency},
            {"dense", config_.server.dense_concurrency},
            {"tridiag", config_.server.tridiag_concurrency}}},
          {"backend", dense_backend()},
          {"ram_budget", config_.engine.ram_budget},
          {"devices", devices_json()},
          {"tridiag_device_auto", tridiag_auto_device_.to_json()},
          {"metrics_url", server_ ? server_->metrics_url() : std::string()}};
}

std::string Daemon::dense_backend() const {
  // Once every GPU the jobs use has failed (gpu/devices.h), dense solves run on the CPU under
  // engine.backend auto and are refused under cuda (scheduler::resolve_backend).
  if (backend_ != "cuda" || used_devices_.empty() || !gpu::without_failed(used_devices_).empty())
    return backend_;
  return config_.engine.backend == scheduler::ComputeBackend::kAuto
             ? "cpu (every GPU failed)"
             : "none (every GPU failed; engine.backend is cuda)";
}

nlohmann::json Daemon::devices_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : gpu::list_devices()) {
    const gpu::DeviceBudget& budget = gpu::DeviceBudget::of(d.index);
    out.push_back({{"index", d.index},
                   {"used", is_used(d.index)},
                   {"name", d.name},
                   {"total_memory", d.total_memory},
                   {"free_memory", d.free_memory},
                   {"dense_gpu_memory", config_.engine.gpu_memory},  // 0: 90% of the free memory
                   {"reserved_by_jobs", budget.reserved()},
                   // The sticky CUDA error that put it out of use until a restart, or "".
                   {"failed", gpu::device_failure(d.index)}});
  }
  return out;
}

void Daemon::remove_unclaimed_factors() {
  auto log = logger("daemon");
  auto kept = store_->resumable_factors();
  if (!kept.is_ok()) {
    log->warn("cannot list the half-made factors to resume: {}", kept.status().to_string());
    return;
  }
  if (kept->empty()) return;
  std::set<std::string> claimed;
  for (const auto& job : jobs_->list(0, true)) {
    // Running too: the workers may already have taken a re-queued job.
    if (is_terminal(job->state())) continue;
    if (auto name = factor_to_resume(job->type(), job->params())) claimed.insert(*name);
  }
  for (const std::string& name : *kept) {
    if (claimed.count(name) != 0) {
      log->info("factor '{}' is kept for a queued solve to resume", name);
      continue;
    }
    const Status st = store_->remove_resumable(name);
    log->warn("removing the half-made factor '{}': no queued job resumes it{}", name,
              st.is_ok() ? "" : " (" + st.to_string() + ")");
  }
}

}  // namespace stripesolve::daemon
