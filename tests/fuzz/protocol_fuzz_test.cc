// Fuzz test of the socket protocol (issue 15): random and mutated valid frames against a real
// stripesolved (the built binary, spawned with its own configuration, store and socket in a
// temporary directory).
//
// Each session connects, says hello, sends a burst of frames, then a ping, and reads until the
// ping is answered or the daemon closes the connection. The frames are templates of every request
// (jobs of every type with plausible and implausible fields, uploads, queries), mutated in their
// JSON (values of other types, huge numbers, deep nesting, missing and extra keys), in their frame
// fields (type, flags, request id) or in their bytes (flips, truncation, lengths), or plain random
// bytes (fuzz_frames.h). A mirror of the daemon's frame parser tells whether the stream ends inside
// a frame (or holds no ping of its own); then the session half-closes, and the daemon must close.
// Checked throughout:
//   - every connection is answered or closed (a session waiting 20 s for either fails);
//   - the daemon stays alive, and its peak RSS (VmHWM) stays below a bound;
//   - at the end a plain client is still served, and SIGTERM stops the daemon with exit code 0
//     (no crash; under ASan, no leak and no memory error).
// daemon_stop (type 20) is never sent: the fuzzer runs as the daemon's uid, which may stop it.
// Nor are matrix_import / matrix_export: they name files of the machine.
//
// Environment (all optional):
//   STRIPESOLVE_FUZZ_FRAMES       frames to send (default 100000, what CI runs in release; 30000
//                                 under sanitizers, where a frame costs 15-60 times as much:
//                                 about 110 s under the asan preset's clang -O0)
//   STRIPESOLVE_FUZZ_SEED         seed of the first session thread (default 1; printed)
//   STRIPESOLVE_FUZZ_THREADS      sessions in parallel (default 4)
//   STRIPESOLVE_FUZZ_MAX_RSS_MIB  bound on the daemon's peak RSS (default 256, 1536 under ASan;
//                                 1 GiB more on a machine with a CUDA device, where the daemon's
//                                 first GPU job maps the CUDA runtime and libraries: its RSS
//                                 reached 518 MiB within 3 s on a host of two H200s)
// The long run (docs/protocol.md, "Fuzz test"), about 10^7 frames:
//   STRIPESOLVE_FUZZ_FRAMES=10000000 build/release/tests/fuzz/protocol_fuzz_test
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu/devices.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "tests/fuzz/fuzz_frames.h"

namespace stripesolve::testing {
namespace {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

// gcc says ASan with __SANITIZE_ADDRESS__, clang (the asan preset's compiler) with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define STRIPESOLVE_FUZZ_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRIPESOLVE_FUZZ_UNDER_ASAN 1
#endif
#endif

#if defined(STRIPESOLVE_FUZZ_UNDER_ASAN)
constexpr uint64_t kDefaultMaxRssMiB = 1536;
#else
// The daemon starts at 12 MiB on a host without a GPU (cuBLAS and cuSOLVER are opened only by a
// GPU solve: 200 MiB before) and peaked at 80 MiB over 10^6 frames (seed 46).
constexpr uint64_t kDefaultMaxRssMiB = 256;
#endif
// The CUDA runtime's and libraries' host memory, added to the bound where a device is present.
constexpr uint64_t kCudaRuntimeRssMiB = 1024;
#if defined(STRIPESOLVE_FUZZ_UNDER_ASAN) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kDefaultFrames = 30000;
#else
constexpr uint64_t kDefaultFrames = 100000;
#endif
constexpr auto kSessionTimeout = std::chrono::seconds(20);

uint64_t env_u64(const char* name, uint64_t fallback) {
  // Read before any thread starts; nothing in the test sets the environment.
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// ---------------------------------------------------------------------------------------------
// The daemon under test.

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint64_t status_kib(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10);
  }
  return 0;
}

class DaemonProcess {
 public:
  DaemonProcess() {
    char tmpl[] = "/tmp/ss-fuzz-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    socket_ = dir_ + "/run/stripesolved.sock";
    log_ = dir_ + "/daemon.log";
  }
  ~DaemonProcess() {
    if (pid_ > 0 && alive()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Small limits, so that what the fuzzer can make the daemon hold stays small; creates only of
  // matrices up to a few hundred MiB fit the free space.
  bool start() {
    std::filesystem::create_directories(dir_ + "/store");
    struct statvfs vfs {};
    ::statvfs(dir_.c_str(), &vfs);
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    const uint64_t reserve = avail > (256ull << 20) ? avail - (256ull << 20) : 0;
    const std::string config = dir_ + "/stripesolved.yaml";
    std::ofstream(config) << "log:\n  level: error\n"
                          << "daemon:\n  socket: " << socket_ << "\n"
                          << "  limits:\n    max_connections: 64\n    max_queued_bytes: 2MiB\n"
                          << "    max_upload_bytes: 4MiB\n    max_upload_total: 32MiB\n"
                          << "    max_rhs_bytes: 8MiB\n    max_jobs: 200\n"
                          << "  concurrency:\n    small: 2\n    dense: 1\n    tridiag: 1\n"
                          << "  result_ttl_seconds: 2\n  upload_ttl_seconds: 5\n"
                          << "  progress_log_seconds: 0.5\n"
                          << "  shutdown:\n    policy: cancel\n    drain_timeout_seconds: 20\n"
                          << "store:\n  paths: [" << dir_ << "/store]\n  direct_io: false\n"
                          << "  import_buffer: 4MiB\n  free_space_reserve: " << reserve << "\n"
                          << "engine:\n  ram_budget: 32MiB\n  cores: 1\n"
                          << "tridiag:\n  max_bytes: 16MiB\n  threads: 1\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(STRIPESOLVE_DAEMON_BINARY, "stripesolved", "--config", config.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 1000; ++i) {  // up to 20 s for the socket (sanitizers start slowly)
      if (!alive()) return false;
      const int fd = connect_socket();
      if (fd >= 0) {
        ::close(fd);
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  int connect_socket() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Only the main thread reaps.
  bool alive() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
      return false;
    }
    return true;
  }
  // SIGTERM, then the exit status (waits up to 60 s).
  int stop() {
    if (!exited_) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 600 && alive(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return exited_ ? status_ : -1;
  }
  pid_t pid() const { return pid_; }
  std::string log_tail() const {
    const std::string text = read_text(log_);
    return text.size() > 6000 ? text.substr(text.size() - 6000) : text;
  }

 private:
  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Sessions.

struct Counters {
  std::atomic<uint64_t> frames{0}, sessions{0}, answered{0}, closed{0}, half_closed{0};
  std::atomic<uint64_t> upload_guess{1};  // highest upload id seen in a reply
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string failure;  // guarded by mu
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed.exchange(true)) failure = why;
  }
};

// Runs one session; false (with counters.fail) when the daemon neither answered nor closed.
bool run_session(const DaemonProcess& daemon, Rng& r, Counters& counters, uint64_t ping_id,
                 bool clean = false) {
  const int fd = daemon.connect_socket();
  if (fd < 0) {
    // The daemon refuses nobody below max_connections; a failed connect is a daemon gone.
    counters.fail("connect failed: " + std::generic_category().message(errno));
    return false;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string out;
  uint64_t frames = 0;
  const protocol::Frame hello = protocol::make_hello("fuzz");
  std::string hello_bytes = raw_frame(hello.type, 0, 0, hello.header.dump(), "");
  if (!clean && r.chance(0.05)) mutate_bytes(hello_bytes, r);
  out += hello_bytes;
  ++frames;
  if (!clean) {
    const uint64_t guess = counters.upload_guess.load();
    const bool gentle = r.chance(0.6);
    for (uint64_t k = 1 + r.below(48); k > 0; --k, ++frames) out += fuzz_frame(r, guess, gentle);
  }
  out += raw_frame(static_cast<uint16_t>(MessageType::kPing), 0, ping_id, "{}", "");
  ++frames;
  counters.frames += frames;
  // Mirror of the daemon's parser: does the stream end inside a frame, and is the ping a frame
  // of its own? A mutated length can take the ping's bytes into an earlier frame's payload
  // (once in about 3 x 10^6 frames, seed 4802), the stream still ending at a frame boundary:
  // nothing is left to answer, so the session ends the stream as for a partial frame.
  protocol::FrameParser mirror;
  const bool mirror_ok = mirror.feed(out).is_ok();
  bool ping_sent = false;
  while (auto f = mirror.next()) {
    ping_sent = ping_sent ||
                (f->request_id == ping_id && f->type == static_cast<uint16_t>(MessageType::kPing));
  }
  const bool end_stream = mirror_ok && (!mirror.at_frame_boundary() || !ping_sent);

  protocol::FrameParser in({16u << 20, protocol::kDefaultMaxPayloadBytes});
  size_t sent = 0;
  bool answered = false, closed = false, half_closed = false;
  const auto deadline = Clock::now() + kSessionTimeout;
  char buf[65536];
  while (!answered && !closed && Clock::now() < deadline) {
    if (sent == out.size() && end_stream && !half_closed) {
      ::shutdown(fd, SHUT_WR);  // the daemon waits for the rest of a frame, or no ping: end it
      half_closed = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (sent < out.size() ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 100) < 0 && errno != EINTR) break;
    if ((p.revents & POLLOUT) != 0 && sent < out.size()) {
      const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) sent = out.size();  // EPIPE: it closed
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        closed = true;
        break;
      }
      if (n > 0) {
        if (!in.feed(std::string_view(buf, static_cast<size_t>(n))).is_ok()) {
          counters.fail("the daemon sent a malformed frame: " + in.error().message());
          ::close(fd);
          return false;
        }
        while (auto f = in.next()) {
          if (f->request_id == ping_id && f->type == static_cast<uint16_t>(MessageType::kOk))
            answered = true;
          if (f->type == static_cast<uint16_t>(MessageType::kOk) && f->header.contains("upload") &&
              f->header["upload"].is_number_unsigned()) {
            const uint64_t id = f->header["upload"].get<uint64_t>();
            uint64_t seen = counters.upload_guess.load();
            while (id > seen && !counters.upload_guess.compare_exchange_weak(seen, id)) {
            }
          }
        }
      }
    }
  }
  ::close(fd);
  counters.sessions++;
  if (answered) counters.answered++;
  if (closed) counters.closed++;
  if (half_closed) counters.half_closed++;
  if (!answered && !closed) {
    counters.fail("a connection was neither answered nor closed within 20 s (sent " +
                  std::to_string(sent) + " of " + std::to_string(out.size()) + " bytes, " +
                  (half_closed ? "half-closed" : "open") + "); what it sent:\n" +
                  describe_frames(out));
    return false;
  }
  if (clean && !answered) {
    counters.fail("a plain client's ping was not answered");
    return false;
  }
  return true;
}

TEST(ProtocolFuzz, RandomAndMutatedFramesNeverHangKillOrBloatTheDaemon) {
  const uint64_t frames = env_u64("STRIPESOLVE_FUZZ_FRAMES", kDefaultFrames);
  const uint64_t seed = env_u64("STRIPESOLVE_FUZZ_SEED", 1);
  const uint64_t threads = std::max<uint64_t>(1, env_u64("STRIPESOLVE_FUZZ_THREADS", 4));
  const uint64_t default_rss =
      kDefaultMaxRssMiB + (gpu::device_count() > 0 ? kCudaRuntimeRssMiB : 0);
  const uint64_t max_rss = env_u64("STRIPESOLVE_FUZZ_MAX_RSS_MIB", default_rss) << 20;
  std::printf("protocol fuzz: %llu frames, seed %llu, %llu threads, RSS bound %llu MiB\n",
              static_cast<unsigned long long>(frames), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(threads),
              static_cast<unsigned long long>(max_rss >> 20));
  std::fflush(stdout);
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.start()) << "the daemon did not start:\n" << daemon.log_tail();
  const uint64_t rss_start = status_kib(daemon.pid(), "VmRSS:") << 10;
  Counters counters;
  std::atomic<uint64_t> next_ping{kPingIdBase};
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (uint64_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Rng r(seed + 7919 * t);
      while (!counters.failed.load() && counters.frames.load() < frames) {
        run_session(daemon, r, counters, next_ping++);
      }
    });
  }
  uint64_t last_report = 0;
  while (counters.frames.load() < frames && !counters.failed.load()) {
    if (!daemon.alive()) counters.fail("the daemon exited");
    const uint64_t rss = status_kib(daemon.pid(), "VmRSS:") << 10;
    if (rss > max_rss)
      counters.fail("the daemon's RSS reached " + std::to_string(rss >> 20) + " MiB");
    if (counters.frames.load() >= last_report + std::max<uint64_t>(frames / 10, 100000)) {
      last_report = counters.frames.load();
      std::printf("  %llu frames, RSS %llu MiB\n", static_cast<unsigned long long>(last_report),
                  static_cast<unsigned long long>(rss >> 20));
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(counters.failed.load()) << counters.failure << "\ndaemon log:\n"
                                       << daemon.log_tail();
  ASSERT_TRUE(daemon.alive()) << "the daemon exited\n" << daemon.log_tail();
  // Still serving a plain client.
  Rng r(seed);
  EXPECT_TRUE(run_session(daemon, r, counters, next_ping++, /*clean=*/true)) << counters.failure;
  const uint64_t peak = status_kib(daemon.pid(), "VmHWM:") << 10;
  const uint64_t rss_end = status_kib(daemon.pid(), "VmRSS:") << 10;
  std::printf(
      "protocol fuzz: %llu frames in %llu sessions (%llu answered, %llu closed by the daemon, "
      "%llu half-closed first) in %.1f s (%.0f frames/s); daemon RSS %llu MiB at start, "
      "peak %llu MiB, %llu MiB at the end\n",
      static_cast<unsigned long long>(counters.frames.load()),
      static_cast<unsigned long long>(counters.sessions.load()),
      static_cast<unsigned long long>(counters.answered.load()),
      static_cast<unsigned long long>(counters.closed.load()),
      static_cast<unsigned long long>(counters.half_closed.load()), seconds,
      static_cast<double>(counters.frames.load()) / seconds,
      static_cast<unsigned long long>(rss_start >> 20), static_cast<unsigned long long>(peak >> 20),
      static_cast<unsigned long long>(rss_end >> 20));
  EXPECT_LT(peak, max_rss);
  const int status = daemon.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the daemon did not stop cleanly on SIGTERM (status " << status << ")\n"
      << daemon.log_tail();
}

}  // namespace
}  // namespace stripesolve::testing
