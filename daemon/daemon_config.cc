#include "daemon/daemon_config.h"

#include <fmt/format.h>

#include "base/config.h"
#include "base/units.h"
#include "protocol/socket_path.h"

namespace stripesolve::daemon {

DaemonConfig parse_daemon_config(std::string_view text, std::string source_name) {
  DaemonConfig c;
  c.source = source_name;
  ConfigMap root = ConfigMap::parse(text, std::move(source_name));
  ConfigMap log = root.section("log");
  parse_log_config(log, c.log);
  ConfigMap server = root.section("daemon");
  parse_server_config(server, c.server);
  root.finish();
  return c;
}

DaemonConfig load_daemon_config(const std::string& path) {
  if (path.empty()) return parse_daemon_config("", "<embedded defaults>");
  DaemonConfig c;
  c.source = path;
  ConfigMap root = ConfigMap::load_file(path);
  ConfigMap log = root.section("log");
  parse_log_config(log, c.log);
  ConfigMap server = root.section("daemon");
  parse_server_config(server, c.server);
  root.finish();
  return c;
}

void resolve_defaults(DaemonConfig& config) {
  config.server.socket = protocol::resolve_socket_path(config.server.socket);
}

std::string describe_config(const DaemonConfig& c) {
  const ServerConfig& s = c.server;
  std::string out = fmt::format("# effective configuration (from {})\n", c.source);
  out += fmt::format("log:\n  level: {}\n  file: \"{}\"\n  file_level: {}\n  stderr_format: {}\n",
                     c.log.level, c.log.file, c.log.file_level, c.log.stderr_format);
  out += fmt::format("daemon:\n  socket: \"{}\"\n  socket_mode: \"{}\"\n  socket_group: \"{}\"\n",
                     s.socket, s.socket_mode, s.socket_group);
  out += fmt::format(
      "  limits:\n    max_connections: {}\n    max_queued_bytes: {}\n    max_header_bytes: {}\n"
      "    max_payload_bytes: {}\n    max_upload_bytes: {}\n    max_jobs: {}\n",
      s.limits.max_connections, format_bytes(s.limits.max_queued_bytes).c_str(),
      format_bytes(s.limits.max_header_bytes), format_bytes(s.limits.max_payload_bytes),
      format_bytes(s.limits.max_upload_bytes), s.limits.max_jobs);
  out += fmt::format("  concurrency:\n    small: {}\n    dense: {}\n", s.small_concurrency, s.dense_concurrency);
  out += fmt::format("  result_ttl_seconds: {}\n  upload_ttl_seconds: {}\n  progress_log_seconds: {}\n",
                     s.result_ttl_seconds, s.upload_ttl_seconds, s.progress_log_seconds);
  out += fmt::format("  shutdown:\n    policy: {}\n    drain_timeout_seconds: {}\n", s.shutdown_policy,
                     s.drain_timeout_seconds);
  return out;
}

}  // namespace stripesolve::daemon
