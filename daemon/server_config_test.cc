#include <stdlib.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/config.h"
#include "daemon/daemon_config.h"

namespace stripesolve::daemon {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_daemon_config(text, "t.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DaemonConfigTest, DefaultsAndOverrides) {
  DaemonConfig d = parse_daemon_config("", "t.yaml");
  EXPECT_EQ(d.server.socket_mode, "0600");
  EXPECT_EQ(d.server.limits.max_payload_bytes, 4 * kMiB);
  EXPECT_EQ(d.server.dense_concurrency, 1);
  EXPECT_EQ(d.server.tridiag_concurrency, 2);
  EXPECT_EQ(d.tridiag.max_bytes, 2 * kGiB);
  DaemonConfig c = parse_daemon_config(
      "log:\n  level: debug\ndaemon:\n  socket: /tmp/x.sock\n  socket_mode: \"0660\"\n"
      "  limits:\n    max_connections: 8\n    max_queued_bytes: 1MiB\n"
      "  concurrency:\n    small: 3\n    tridiag: 5\n  shutdown:\n    policy: cancel\n"
      "    on_gpu_failure: restart\n"
      "tridiag:\n  max_bytes: 64MiB\n  threads: 2\nengine:\n  devices: [1, 0]\n",
      "t.yaml");
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.server.socket, "/tmp/x.sock");
  EXPECT_EQ(c.server.limits.max_connections, 8);
  EXPECT_EQ(c.server.limits.max_queued_bytes, kMiB);
  EXPECT_EQ(c.server.small_concurrency, 3);
  EXPECT_EQ(c.server.tridiag_concurrency, 5);
  EXPECT_EQ(c.tridiag.max_bytes, 64 * kMiB);
  EXPECT_EQ(c.tridiag.threads, 2);
  EXPECT_EQ(c.tridiag.gpu_memory, 0u);
  // engine.devices are the daemon's GPUs: the tridiagonal batches take them too.
  EXPECT_EQ(c.engine.devices, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(c.tridiag.devices, c.engine.devices);
  EXPECT_EQ(c.server.shutdown_policy, "cancel");
  EXPECT_EQ(c.server.on_gpu_failure, "restart");
  EXPECT_EQ(d.server.on_gpu_failure, "keep_serving");
  resolve_defaults(c);
  EXPECT_EQ(c.server.socket, "/tmp/x.sock");
  EXPECT_NE(describe_config(c).find("max_connections: 8"), std::string::npos);
  EXPECT_NE(describe_config(c).find("  devices: [1, 0]\n"), std::string::npos);
  EXPECT_NE(describe_config(c).find("tridiag:\n  max_bytes: 64.00 MiB"), std::string::npos)
      << describe_config(c);
}

TEST(DaemonConfigTest, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(
      error_of("daemon:\n  socket_mode: \"0999\"\n"),
      "t.yaml:2: daemon.socket_mode: expected octal permission bits such as 0600, got '0999'");
  EXPECT_NE(error_of("daemon:\n  sokcet: /x\n").find("daemon.sokcet: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("daemon:\n  limits:\n    max_payload_bytes: 8MiB\n")
                .find("daemon.limits.max_payload_bytes"),
            std::string::npos);
  EXPECT_NE(error_of("daemon:\n  shutdown:\n    policy: later\n").find("daemon.shutdown.policy"),
            std::string::npos);
  EXPECT_NE(error_of("daemon:\n  shutdown:\n    on_gpu_failure: reboot\n")
                .find("daemon.shutdown.on_gpu_failure"),
            std::string::npos);
  EXPECT_NE(error_of("tridiag:\n  max_bytez: 1GiB\n").find("tridiag.max_bytez: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("tridiag:\n  max_bytes: 12\n").find("tridiag.max_bytes"), std::string::npos);
}

TEST(DaemonConfigTest, ParseMode) {
  EXPECT_EQ(parse_mode("0600"), 0600);
  EXPECT_EQ(parse_mode("660"), 0660);
  EXPECT_EQ(parse_mode("0800"), -1);
  EXPECT_EQ(parse_mode(""), -1);
}

}  // namespace
}  // namespace stripesolve::daemon

namespace stripesolve::daemon {
namespace {

TEST(DaemonConfigTest, ExampleFileParses) {
  DaemonConfig c = load_daemon_config(STRIPESOLVE_EXAMPLE_CONFIG);
  EXPECT_EQ(c.server.limits.max_connections, 256);
  EXPECT_FALSE(c.engine_ram_budget_set);
  resolve_defaults(c);
  EXPECT_EQ(c.store.paths.size(), 1u);
  EXPECT_GE(c.engine.ram_budget, 64 * kMiB);
}

// --check-config prints every key docs/config.md documents (the `| `key` |` rows of its
// tables), as a path of nested YAML keys.
TEST(DaemonConfigTest, CheckConfigListsEveryDocumentedKey) {
  DaemonConfig c = load_daemon_config("");
  resolve_defaults(c);
  std::set<std::string> printed;
  std::vector<std::string> path;
  std::istringstream text(describe_config(c));
  for (std::string line; std::getline(text, line);) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#' || line[indent] == '-') continue;
    const size_t colon = line.find(':', indent);
    if (colon == std::string::npos) continue;
    path.resize(indent / 2);
    path.push_back(line.substr(indent, colon - indent));
    std::string key;
    for (const std::string& p : path) key += (key.empty() ? "" : ".") + p;
    printed.insert(key);
  }
  std::ifstream doc(STRIPESOLVE_CONFIG_DOC);
  ASSERT_TRUE(doc.good()) << STRIPESOLVE_CONFIG_DOC;
  int documented = 0;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string key = line.substr(3, line.find('`', 3) - 3);
    ++documented;
    EXPECT_TRUE(printed.count(key)) << key << " is documented but --check-config does not print it";
  }
  EXPECT_GT(documented, 50);
}

}  // namespace
}  // namespace stripesolve::daemon
