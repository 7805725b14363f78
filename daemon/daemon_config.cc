#include "daemon/daemon_config.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/config.h"
#include "base/units.h"
#include "protocol/socket_path.h"

namespace stripesolve::daemon {

namespace {
void parse_root(ConfigMap& root, DaemonConfig& c) {
  ConfigMap log = root.section("log");
  parse_log_config(log, c.log);
  ConfigMap server = root.section("daemon");
  parse_server_config(server, c.server);
  ConfigMap store = root.section("store");
  storage::parse_store_config(store, c.store);
  ConfigMap engine = root.section("engine");
  c.engine_ram_budget_set = engine.has("ram_budget");
  scheduler::parse_engine_config(engine, c.engine);
  ConfigMap tridiag = root.section("tridiag");
  parse_tridiag_job_config(tridiag, c.tridiag);
  c.tridiag.devices = c.engine.devices;  // the daemon's GPUs, for both kinds of job
  c.tridiag.gpus = c.engine.gpus;
  root.finish();
}
}  // namespace

DaemonConfig parse_daemon_config(std::string_view text, std::string source_name) {
  DaemonConfig c;
  c.source = source_name;
  ConfigMap root = ConfigMap::parse(text, std::move(source_name));
  parse_root(root, c);
  return c;
}

DaemonConfig load_daemon_config(const std::string& path) {
  if (path.empty()) return parse_daemon_config("", "<embedded defaults>");
  DaemonConfig c;
  c.source = path;
  ConfigMap root = ConfigMap::load_file(path);
  parse_root(root, c);
  return c;
}

std::string default_store_path() {
  // getenv is safe here: nothing in the daemon or client sets the environment.
  const char* xdg = std::getenv("XDG_DATA_HOME");  // NOLINT(concurrency-mt-unsafe)
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/stripesolve/store";
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe)
  return std::string(home != nullptr && *home != '\0' ? home : "/tmp") +
         "/.local/share/stripesolve/store";
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

void resolve_defaults(DaemonConfig& config) {
  config.server.socket = protocol::resolve_socket_path(config.server.socket);
  if (config.store.paths.empty()) config.store.paths = {default_store_path()};
  if (config.server.state_dir.empty()) {
    std::filesystem::path first(config.store.paths[0]);
    if (!first.has_filename()) first = first.parent_path();  // "/x/store/"
    config.server.state_dir = (first.parent_path() / "state").string();
  }
  if (!config.engine_ram_budget_set) {
    const uint64_t avail = available_memory_bytes();
    if (avail > 0) {
      config.engine.ram_budget = std::max<uint64_t>(
          64 * kMiB,
          static_cast<uint64_t>(config.server.ram_budget_fraction * static_cast<double>(avail)));
    }
  }
}

std::string describe_config(const DaemonConfig& c) {
  const ServerConfig& s = c.server;
  std::string out = fmt::format("# effective configuration (from {})\n", c.source);
  out += fmt::format("log:\n  level: {}\n  file: \"{}\"\n  file_level: {}\n  stderr_format: {}\n",
                     c.log.level, c.log.file, c.log.file_level, c.log.stderr_format);
  out += fmt::format(
      "daemon:\n  socket: \"{}\"\n  socket_mode: \"{}\"\n  socket_group: \"{}\"\n"
      "  state_dir: \"{}\"\n",
      s.socket, s.socket_mode, s.socket_group, s.state_dir);
  out += fmt::format(
      "  limits:\n    max_connections: {}\n    max_queued_bytes: {}\n    max_header_bytes: {}\n"
      "    max_payload_bytes: {}\n    max_upload_bytes: {}\n    max_upload_total: {}\n"
      "    max_rhs_bytes: {}\n    max_jobs: {}\n",
      s.limits.max_connections, format_bytes(s.limits.max_queued_bytes).c_str(),
      format_bytes(s.limits.max_header_bytes), format_bytes(s.limits.max_payload_bytes),
      format_bytes(s.limits.max_upload_bytes), format_bytes(s.limits.max_upload_total),
      format_bytes(s.limits.max_rhs_bytes), s.limits.max_jobs);
  out += fmt::format(
      "    max_connections_per_uid: {}\n    handshake_timeout_seconds: {}\n"
      "    idle_timeout_seconds: {}\n    max_job_files_per_uid: {}\n",
      s.limits.max_connections_per_uid, s.limits.handshake_timeout_seconds,
      s.limits.idle_timeout_seconds, s.limits.max_job_files_per_uid);
  out += fmt::format("  concurrency:\n    small: {}\n    dense: {}\n    tridiag: {}\n",
                     s.small_concurrency, s.dense_concurrency, s.tridiag_concurrency);
  out += fmt::format(
      "  result_ttl_seconds: {}\n  upload_ttl_seconds: {}\n  progress_log_seconds: {}\n",
      s.result_ttl_seconds, s.upload_ttl_seconds, s.progress_log_seconds);
  out += fmt::format(
      "  shutdown:\n    policy: {}\n    drain_timeout_seconds: {}\n    delivery_timeout_seconds: "
      "{}\n    on_gpu_failure: {}\n",
      s.shutdown_policy, s.drain_timeout_seconds, s.delivery_timeout_seconds, s.on_gpu_failure);
  out += fmt::format("  ram_budget_fraction: {}\n  metrics_listen: \"{}\"\n", s.ram_budget_fraction,
                     s.metrics_listen);
  const storage::StoreConfig& st = c.store;
  out += "store:\n  paths:\n";
  for (const auto& p : st.paths) out += fmt::format("    - \"{}\"\n", p);
  out += fmt::format(
      "  stripe_rows: {}\n  round_robin_levels: {}\n  levels_q: {}\n  levels_cache: {}\n"
      "  segment_bytes: {}\n  min_segment_bytes: {}\n  io_engine: {}\n  queue_depth: {}\n"
      "  request_bytes: {}\n  write_request_bytes: {}\n  direct_io: {}\n  verify_checksums: {}\n"
      "  import_buffer: {}\n  free_space_reserve: {}\n  group: \"{}\"\n",
      st.stripe_rows, st.round_robin_levels, st.levels_q, format_bytes(st.levels_cache),
      format_bytes(st.segment_bytes), format_bytes(st.min_segment_bytes), st.io_engine,
      st.queue_depth, format_bytes(st.request_bytes), format_bytes(st.write_request_bytes),
      st.direct_io, st.verify_checksums, format_bytes(st.import_buffer),
      format_bytes(st.free_space_reserve), st.group);
  const scheduler::EngineConfig& e = c.engine;
  out += fmt::format(
      "engine:\n  backend: {}\n  ram_budget: {}{}\n  stripe_rows: {}\n  substripe_rows: {}\n"
      "  segment_columns: {}\n  meta_stripes: {}\n  round_robin_levels: {}\n"
      "  elim_j_workers: {}\n  lookahead_lanes: {}\n  cores: {}\n  critical_threads: {}\n"
      "  io_threads: {}\n  huge_pages: {}\n"
      "  upward_lead: {}\n  early_next: {}\n  gpu_memory: {}\n  gpus: {}\n  devices: [{}]\n"
      "  gpu_panel_sms: {}\n  gpu_update_k: {}\n  gpu_panel_blocks: {}\n  assumed_gflops: {}\n"
      "  ssd_bytes_per_second: {}\n  pcie_bytes_per_second: {}\n"
      "  progress_interval_seconds: {}\n",
      scheduler::compute_backend_name(e.backend), format_bytes(e.ram_budget),
      c.engine_ram_budget_set ? "" : "  # daemon.ram_budget_fraction of available memory",
      e.stripe_rows, e.substripe_rows, e.segment_columns, e.meta_stripes, e.round_robin_levels,
      e.elim_j_workers, e.lookahead_lanes, e.cores, e.critical_threads, e.io_threads, e.huge_pages,
      e.upward_lead, e.early_next, format_bytes(e.gpu_memory), e.gpus, fmt::join(e.devices, ", "),
      e.gpu_panel_sms, e.gpu_update_k, e.gpu_panel_blocks, e.assumed_gflops, e.ssd_bytes_per_second,
      e.pcie_bytes_per_second, e.progress_interval_seconds);
  out += fmt::format("tridiag:\n  max_bytes: {}\n  threads: {}\n  gpu_memory: {}\n",
                     format_bytes(c.tridiag.max_bytes), c.tridiag.threads,
                     format_bytes(c.tridiag.gpu_memory));
  return out;
}

}  // namespace stripesolve::daemon
