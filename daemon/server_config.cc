#include "daemon/server_config.h"

#include "base/config.h"
#include "daemon/metrics_http.h"

namespace stripesolve::daemon {

int parse_mode(const std::string& text) {
  if (text.empty() || text.size() > 4) return -1;
  int mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return -1;
    mode = mode * 8 + (c - '0');
  }
  return mode <= 0777 ? mode : -1;
}

void parse_server_config(ConfigMap& map, ServerConfig& config) {
  map.get("socket", config.socket);
  map.get("socket_mode", config.socket_mode);
  if (parse_mode(config.socket_mode) < 0) {
    throw ConfigError(map.where("socket_mode") +
                      ": expected octal permission bits such as 0600, got '" + config.socket_mode +
                      "'");
  }
  map.get("socket_group", config.socket_group);
  map.get("state_dir", config.state_dir);
  {
    ConfigMap limits = map.section("limits");
    ServerLimits& l = config.limits;
    limits.get("max_connections", l.max_connections, 1, 1 << 20);
    limits.get("max_connections_per_uid", l.max_connections_per_uid, 1, 1 << 20);
    limits.get("handshake_timeout_seconds", l.handshake_timeout_seconds, 0.01, 3600.0);
    limits.get("idle_timeout_seconds", l.idle_timeout_seconds, 0.0, 30.0 * 86400);
    limits.get("max_job_files_per_uid", l.max_job_files_per_uid, 1, 1 << 20);
    limits.get_bytes("max_queued_bytes", l.max_queued_bytes, 64 * kKiB);
    limits.get_bytes("max_header_bytes", l.max_header_bytes, 1 * kKiB, 16 * kMiB);
    limits.get_bytes("max_payload_bytes", l.max_payload_bytes, 64 * kKiB, 4 * kMiB);
    limits.get_bytes("max_upload_bytes", l.max_upload_bytes, 1 * kKiB);
    limits.get_bytes("max_upload_total", l.max_upload_total, 1 * kKiB);
    limits.get_bytes("max_rhs_bytes", l.max_rhs_bytes, 8);
    limits.get("max_jobs", l.max_jobs, 1, 100000000);
    limits.finish();
  }
  {
    ConfigMap c = map.section("concurrency");
    c.get("small", config.small_concurrency, 1, 1024);
    c.get("dense", config.dense_concurrency, 1, 64);
    c.get("tridiag", config.tridiag_concurrency, 1, 64);
    c.finish();
  }
  map.get("result_ttl_seconds", config.result_ttl_seconds, 1, INT64_MAX / 1000000000);
  map.get("upload_ttl_seconds", config.upload_ttl_seconds, 1, INT64_MAX / 1000000000);
  map.get("progress_log_seconds", config.progress_log_seconds, 0.1, 86400.0);
  map.get("ram_budget_fraction", config.ram_budget_fraction, 0.01, 0.95);
  map.get("metrics_listen", config.metrics_listen);
  if (!config.metrics_listen.empty()) {
    if (auto address = parse_listen_address(config.metrics_listen); !address.is_ok()) {
      throw ConfigError(map.where("metrics_listen") + ": " + address.status().message());
    }
  }
  {
    ConfigMap s = map.section("shutdown");
    s.get_choice("policy", config.shutdown_policy, {"drain", "cancel", "finish"});
    if (config.shutdown_policy == "finish") config.shutdown_policy = "drain";  // its old name
    s.get("drain_timeout_seconds", config.drain_timeout_seconds, 0, 30 * 86400);
    s.get("delivery_timeout_seconds", config.delivery_timeout_seconds, 0, 86400);
    s.get_choice("on_gpu_failure", config.on_gpu_failure, {"keep_serving", "restart"});
    s.finish();
  }
  map.finish();
}

}  // namespace stripesolve::daemon
