// daemon_bench: (1) round trip of a trivial request (ping) through a real in-process daemon,
// p50/p99, beside the peer "raw echo over a Unix socketpair"; (2) result streaming throughput of
// a solution of `--stream-mib` MiB over the socket (client receives and discards, and receives
// into an .npy on --out-dir), beside the peer "raw Unix socket of 4 MiB writes".
// Output: one JSON object on stdout.
//
//   daemon_bench [--pings N] [--stream-mib M] [--out-dir DIR]
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "client/commands.h"
#include "client/connection.h"
#include "daemon/daemon.h"

namespace {

using namespace stripesolve;
using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

std::vector<double> raw_echo_round_trips(int n) {
  int sv[2];
  ::socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  std::thread echo([fd = sv[1]] {
    char buf[64];
    while (true) {
      ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0) break;
      ::send(fd, buf, r, MSG_NOSIGNAL);
    }
  });
  std::vector<double> us;
  char msg[48] = {}, back[48];
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    ::send(sv[0], msg, sizeof msg, MSG_NOSIGNAL);
    size_t got = 0;
    while (got < sizeof back) got += ::recv(sv[0], back + got, sizeof back - got, 0);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  ::shutdown(sv[0], SHUT_RDWR);
  echo.join();
  ::close(sv[0]);
  ::close(sv[1]);
  return us;
}

double raw_stream_gbps(uint64_t bytes) {
  int sv[2];
  ::socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  std::string block(4 << 20, 'x');
  auto t0 = Clock::now();
  std::thread writer([&] {
    uint64_t sent = 0;
    while (sent < bytes) {
      ssize_t w =
          ::send(sv[1], block.data(), std::min<uint64_t>(block.size(), bytes - sent), MSG_NOSIGNAL);
      if (w <= 0) break;
      sent += w;
    }
  });
  std::vector<char> buf(1 << 20);
  uint64_t got = 0;
  while (got < bytes) {
    ssize_t r = ::recv(sv[0], buf.data(), buf.size(), 0);
    if (r <= 0) break;
    got += r;
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  writer.join();
  ::close(sv[0]);
  ::close(sv[1]);
  return bytes / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int pings = 20000;
  int64_t stream_mib = 1024;
  std::string out_dir = "/dev/shm";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--pings")) pings = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--stream-mib")) stream_mib = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--out-dir")) out_dir = argv[i + 1];
  }
  LogConfig quiet;
  quiet.level = "warn";
  (void)set_up_logging(quiet);

  char tmpl[] = "/tmp/ss-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  daemon::DaemonConfig config = daemon::parse_daemon_config("", "<bench>");
  config.server.socket = dir + "/d.sock";
  config.store.paths = {dir + "/store"};
  const int64_t n = stream_mib * (1 << 20) / 8;
  // The benchmark's workload: a solution of n rows published in stripes of 1 Mi rows, last first.
  daemon::Daemon d(config, [](daemon::JobRegistry& r) {
    r.add("bench_rows", daemon::Lane::kDense,
          [](daemon::JobContext& ctx) -> Result<nlohmann::json> {
            const int64_t rows_total = ctx.params().at("n").get<int64_t>();
            const int64_t stripe = 1 << 20;
            STRIPESOLVE_RETURN_IF_ERROR(ctx.job().begin_solution(rows_total, 1));
            std::vector<double> x(stripe);
            for (int64_t end = rows_total; end > 0; end -= stripe) {
              const int64_t begin = std::max<int64_t>(0, end - stripe);
              for (int64_t i = begin; i < end; ++i) x[i - begin] = static_cast<double>(i);
              STRIPESOLVE_RETURN_IF_ERROR(ctx.job().publish_rows(begin, end - begin, x.data()));
            }
            return nlohmann::json::object();
          });
  });
  if (Status st = d.start(); !st.is_ok()) {
    std::fprintf(stderr, "daemon_bench: %s\n", st.to_string().c_str());
    return 1;
  }
  std::thread server([&] { d.run(); });

  auto conn = client::Connection::connect(config.server.socket, "daemon_bench");
  if (!conn.is_ok()) return 1;
  for (int i = 0; i < 1000; ++i) (void)(*conn)->call(protocol::MessageType::kPing);  // warm up
  std::vector<double> us;
  us.reserve(pings);
  for (int i = 0; i < pings; ++i) {
    auto t0 = Clock::now();
    auto r = (*conn)->call(protocol::MessageType::kPing);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!r.is_ok()) return 1;
  }
  const auto raw = raw_echo_round_trips(pings);

  // Streaming: the job completes first, so the figure is the socket path alone.
  auto stream_once = [&](const std::string& out) -> double {
    auto id = client::run_job(**conn, {{"type", "bench_rows"}, {"n", n}});
    if (!id.is_ok()) return -1;
    const uint64_t job = (*id)["job"].get<uint64_t>();
    auto t0 = Clock::now();
    if (out.empty()) {
      uint64_t bytes = 0;
      Status st = (*conn)->stream(protocol::MessageType::kResult, {{"job", job}},
                                  [&](const protocol::Frame& f) {
                                    bytes += f.payload.size();
                                    return Status::ok();
                                  });
      if (!st.is_ok() || bytes != static_cast<uint64_t>(n) * 8) return -1;
    } else {
      auto rows = client::fetch_result(**conn, job, out);
      if (!rows.is_ok() || *rows != n) return -1;
    }
    return n * 8.0 / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
  };
  // One stream to warm up (the first one pays the page faults of fresh frame buffers on both
  // sides), then the best of three of each kind.
  (void)stream_once("");
  const std::string npy = out_dir + "/daemon_bench_" + std::to_string(::getpid()) + ".npy";
  double gbps_discard = 0, gbps_npy = 0;
  for (int rep = 0; rep < 3; ++rep) {
    gbps_discard = std::max(gbps_discard, stream_once(""));
    gbps_npy = std::max(gbps_npy, stream_once(npy));
    std::filesystem::remove(npy);
  }
  const double gbps_raw = raw_stream_gbps(static_cast<uint64_t>(n) * 8);

  d.request_stop("cancel");
  server.join();
  std::filesystem::remove_all(dir);

  nlohmann::json out = {{"benchmark", "daemon"},
                        {"round_trip",
                         {{"requests", pings},
                          {"p50_us", percentile(us, 0.50)},
                          {"p99_us", percentile(us, 0.99)},
                          {"peer", "raw 48-byte echo over a Unix socketpair"},
                          {"peer_p50_us", percentile(raw, 0.50)},
                          {"peer_p99_us", percentile(raw, 0.99)},
                          {"p99_target_us", 5000},
                          {"p99_meets_target", percentile(us, 0.99) < 5000}}},
                        {"result_streaming",
                         {{"bytes", n * 8},
                          {"gb_per_s_received", gbps_discard},
                          {"gb_per_s_into_npy", gbps_npy},
                          {"npy_dir", out_dir},
                          {"peer", "raw Unix socketpair, 4 MiB writes"},
                          {"peer_gb_per_s", gbps_raw},
                          {"ratio_to_peer", gbps_discard / gbps_raw},
                          {"target_gb_per_s", 1.0},
                          {"meets_target", gbps_discard >= 1.0}}}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
