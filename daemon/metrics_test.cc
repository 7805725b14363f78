#include "daemon/metrics.h"

#include <gtest/gtest.h>

#include "daemon/metrics_http.h"
#include "gpu/devices.h"

namespace stripesolve::daemon {
namespace {

TEST(MetricsTest, PrometheusTextFormat) {
  JobRegistry r;
  r.add("noop", Lane::kSmall,
        [](JobContext&) -> Result<nlohmann::json> { return nlohmann::json::object(); });
  JobManager jobs({}, std::move(r));
  Metrics m;
  m.connections_total += 3;
  m.bytes_out += 1024;
  const std::string text = m.render(jobs, 12.5, 0);
  EXPECT_NE(
      text.find("# TYPE stripesolve_connections_total counter\nstripesolve_connections_total 3\n"),
      std::string::npos);
  EXPECT_NE(text.find("stripesolve_bytes_sent_total 1024\n"), std::string::npos);
  EXPECT_NE(text.find("stripesolve_jobs{state=\"RUNNING\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("stripesolve_uptime_seconds 12.5\n"), std::string::npos);
  EXPECT_NE(text.find("stripesolve_gpu_failed_devices 0\n"), std::string::npos);
  EXPECT_EQ(text.find("stripesolve_gpu_failed{"), std::string::npos);
  // Every non-comment line is "name[{labels}] value".
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    if (line[0] != '#') {
      EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 1) << line;
    }
    pos = end + 1;
  }
}

}  // namespace
}  // namespace stripesolve::daemon

namespace stripesolve::daemon {
namespace {

TEST(MetricsTest, BuildInfoAndProcessFigures) {
  JobManager jobs({}, JobRegistry{});
  const std::string text = Metrics().render(jobs, 1.0, 0);
  EXPECT_NE(text.find("stripesolve_build_info{version=\""), std::string::npos) << text;
  const size_t rss = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(rss, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(rss + 31)), 1e6);  // this test process holds megabytes
  EXPECT_NE(text.find("\nprocess_cpu_seconds_total "), std::string::npos);
  EXPECT_NE(text.find("\nprocess_open_fds "), std::string::npos);
  EXPECT_NE(text.find("\nprocess_start_time_seconds "), std::string::npos);
}

TEST(MetricsTest, FailedGpusAreCountedAndNamed) {
  const gpu::ScopedDeviceFailuresForTesting clean;
  gpu::note_device_failure(1, "cudaStreamSynchronize: cudaErrorIllegalAddress");
  JobManager jobs({}, JobRegistry{});
  const std::string text = Metrics().render(jobs, 1.0, 0);
  EXPECT_NE(text.find("stripesolve_gpu_failed_devices 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stripesolve_gpu_failed{device=\"1\"} 1\n"), std::string::npos) << text;
}

TEST(MetricsTest, ListenAddressesAreLoopbackOnly) {
  auto v4 = parse_listen_address("127.0.0.1:9464");
  ASSERT_TRUE(v4.is_ok()) << v4.status().to_string();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  EXPECT_EQ(parse_listen_address("localhost:0")->host, "127.0.0.1");
  EXPECT_EQ(parse_listen_address("[::1]:9")->host, "::1");
  EXPECT_EQ(
      parse_listen_address("0.0.0.0:9464").status().message(),
      "metrics_listen '0.0.0.0:9464': only a loopback address may serve the metrics (expected "
      "127.0.0.1:PORT, localhost:PORT or [::1]:PORT)");
  EXPECT_FALSE(parse_listen_address("10.1.2.3:80").is_ok());
  EXPECT_FALSE(parse_listen_address("127.0.0.1:99999").is_ok());
  EXPECT_FALSE(parse_listen_address("127.0.0.1").is_ok());
  EXPECT_FALSE(parse_listen_address("example.org:80").is_ok());
  EXPECT_FALSE(parse_listen_address(":80").is_ok());
}

}  // namespace
}  // namespace stripesolve::daemon
