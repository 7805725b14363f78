// Issue 15, point 8: a drain (SIGTERM, `daemon stop`) keeps its promises. The socket stays open
// for status, watch, result and cancel; new work is refused with "draining"; the daemon exits
// only once finished results were delivered (a slow reader gets all of its stream, a client
// that submitted a job is told how it ended) or their clients left, within
// daemon.shutdown.delivery_timeout_seconds.
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "daemon/daemon.h"
#include "gpu/devices.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

// Waits until the daemon removed its socket (it exits right after); false after `limit`.
bool gone_within(const DaemonFixture& d, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (!std::filesystem::exists(d.socket())) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// daemon.shutdown.on_gpu_failure: restart. A GPU that hits a sticky CUDA error stops the daemon
// as the cancel policy does, with a job running, and run() returns kExitGpuFailed, so that
// systemd starts it again; keep_serving (the default) does not stop it.
TEST(Drain, AFailedGpuStopsTheDaemonForARestartWhenAskedTo) {
  const gpu::ScopedDeviceFailuresForTesting clean;
  {
    DaemonFixture serving;
    gpu::note_device_failure(7, "kernel: cudaErrorIllegalAddress: an illegal memory access");
    EXPECT_FALSE(gone_within(serving, 200ms)) << "keep_serving stopped the daemon";
    serving.stop();
    EXPECT_EQ(serving.exit_code(), 0);
  }
  gpu::clear_device_failures_for_testing();
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.on_gpu_failure = "restart"; });
  auto c = d.connect();
  auto gated = client::submit_job(*c, {{"type", "gated"}});
  ASSERT_TRUE(gated.is_ok());
  while (d.jobs().gated_running.load() == 0) std::this_thread::sleep_for(1ms);
  gpu::note_device_failure(7, "kernel: cudaErrorIllegalAddress: an illegal memory access");
  EXPECT_TRUE(gone_within(d, 10s)) << "the daemon did not stop for the failed GPU";
  d.stop();
  EXPECT_EQ(d.exit_code(), daemon::kExitGpuFailed);
}

TEST(Drain, TheSocketStaysOpenForFollowingAndNewWorkIsRefused) {
  DaemonFixture d;
  auto c = d.connect();
  auto gated = client::submit_job(*c, {{"type", "gated"}});
  ASSERT_TRUE(gated.is_ok());
  while (d.jobs().gated_running.load() == 0) std::this_thread::sleep_for(1ms);
  d.daemon().request_stop("drain");  // what SIGTERM does with the default policy

  // A new client reaches the draining daemon.
  auto late = client::Connection::connect(d.socket());
  ASSERT_TRUE(late.is_ok()) << late.status().to_string();
  auto status = (*late)->call(MessageType::kStatus, {{"job", *gated}});
  ASSERT_TRUE(status.is_ok()) << status.status().to_string();
  EXPECT_EQ((*status)["state"], "RUNNING");
  auto daemon_status = (*late)->call(MessageType::kDaemonStatus);
  ASSERT_TRUE(daemon_status.is_ok());
  EXPECT_EQ((*daemon_status)["stopping"], true);
  const std::string draining =
      "the daemon is draining (it stops once its jobs have ended) and accepts no new work; "
      "status, watch, result and cancel still work";
  EXPECT_EQ(client::submit_job(**late, {{"type", "echo"}}).status().message(), draining);
  EXPECT_EQ((*late)->upload("x").status().message(), draining);

  // Watching and then ending the job still works; the daemon exits once that is delivered.
  const uint64_t watch = (*late)->next_request_id();
  ASSERT_TRUE(
      (*late)->send(protocol::make_frame(MessageType::kWatch, watch, {{"job", *gated}})).is_ok());
  EXPECT_FALSE(gone_within(d, 300ms));  // the job is still running
  d.jobs().release = true;
  nlohmann::json final_job;
  while (true) {
    auto f = (*late)->receive();
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    if (f->request_id == watch && (f->flags & protocol::kFlagFinal)) {
      final_job = f->header;
      break;
    }
  }
  EXPECT_EQ(final_job["state"], "COMPLETED");
  // `c` submitted the job and was not told how it ended: the daemon waits for it.
  EXPECT_FALSE(gone_within(d, 300ms));
  auto told = c->call(MessageType::kStatus, {{"job", *gated}});
  ASSERT_TRUE(told.is_ok());
  EXPECT_EQ((*told)["state"], "COMPLETED");
  EXPECT_TRUE(gone_within(d, 5000ms));
}

TEST(Drain, ASlowReaderReceivesItsWholeResult) {
  DaemonFixture d;
  auto c = d.connect();
  // 2 M rows (16 MB, four chunk frames) published while the client reads one frame every 100 ms.
  constexpr int64_t kRows = 2 << 20;
  auto id = client::submit_job(
      *c, {{"type", "rows"}, {"n", kRows}, {"stripe", 1 << 18}, {"delay_ms", 5}});
  ASSERT_TRUE(id.is_ok());
  const uint64_t result = c->next_request_id();
  ASSERT_TRUE(c->send(protocol::make_frame(MessageType::kResult, result, {{"job", *id}})).is_ok());
  std::this_thread::sleep_for(20ms);
  d.daemon().request_stop("drain");  // SIGTERM while the solve finishes
  int64_t rows = 0;
  std::vector<double> x(kRows, -1.0);
  while (true) {
    auto f = c->receive();
    ASSERT_TRUE(f.is_ok()) << "after " << rows << " rows: " << f.status().to_string();
    std::this_thread::sleep_for(100ms);  // the slow reader
    if (f->type == static_cast<uint16_t>(MessageType::kResultChunk)) {
      const int64_t begin = f->header["row_begin"], k = f->header["rows"];
      std::memcpy(x.data() + begin, f->payload.data(), static_cast<size_t>(k) * 8);
      rows += k;
    }
    if (f->flags & protocol::kFlagFinal) {
      EXPECT_EQ(f->type, static_cast<uint16_t>(MessageType::kOk));
      break;
    }
  }
  EXPECT_EQ(rows, kRows);
  for (int64_t i = 0; i < kRows; i += 4099) ASSERT_EQ(x[i], expected_row_value(i, 0)) << i;
  EXPECT_TRUE(gone_within(d, 5000ms));
}

TEST(Drain, DeliveryWaitsAtMostTheDeliveryTimeout) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.delivery_timeout_seconds = 1; });
  auto c = d.connect();
  auto id = client::run_job(*c, {{"type", "rows"}, {"n", 4 << 20}, {"stripe", 1 << 20}});
  ASSERT_TRUE(id.is_ok());
  // A stream of 32 MB nobody reads, and a job submitted by a client that never asks about it.
  ASSERT_TRUE(c->send(protocol::make_frame(MessageType::kResult, c->next_request_id(),
                                           {{"job", (*id)["job"]}}))
                  .is_ok());
  auto silent = d.connect();
  ASSERT_TRUE(client::submit_job(*silent, {{"type", "echo"}}).is_ok());
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  d.daemon().request_stop("drain");
  EXPECT_FALSE(gone_within(d, 500ms));
  EXPECT_TRUE(gone_within(d, 5000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
}

}  // namespace
}  // namespace stripesolve::testing
