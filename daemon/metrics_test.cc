#include "daemon/metrics.h"

#include <gtest/gtest.h>

namespace stripesolve::daemon {
namespace {

TEST(MetricsTest, PrometheusTextFormat) {
  JobRegistry r;
  r.add("noop", Lane::kSmall, [](JobContext&) -> Result<nlohmann::json> { return nlohmann::json::object(); });
  JobManager jobs({}, std::move(r));
  Metrics m;
  m.connections_total += 3;
  m.bytes_out += 1024;
  const std::string text = m.render(jobs, 12.5, 0);
  EXPECT_NE(text.find("# TYPE stripesolve_connections_total counter\nstripesolve_connections_total 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("stripesolve_bytes_sent_total 1024\n"), std::string::npos);
  EXPECT_NE(text.find("stripesolve_jobs{state=\"RUNNING\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("stripesolve_uptime_seconds 12.5\n"), std::string::npos);
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
