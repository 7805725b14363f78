#include "tests/integration/daemon_fixture.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <new>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::testing {

using namespace std::chrono_literals;

double expected_row_value(int64_t row, int64_t col) {
  return static_cast<double>(row + 1000 * col);
}

Cli::Cli(const DaemonFixture& d)
    : prefix_(std::string(STRIPESOLVE_CLIENT_BINARY) + " --socket " + d.socket() + " "),
      file_(d.dir() + "/cli-output.txt") {}

int Cli::run(const std::string& args) {
  // One test thread runs the client at a time: std::system's shared state is not raced.
  // NOLINTNEXTLINE(concurrency-mt-unsafe)
  const int status = std::system((prefix_ + args + " > " + file_ + " 2>&1").c_str());
  std::ifstream in(file_);
  out_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void TestJobs::register_into(daemon::JobRegistry& r) {
  r.add("echo", daemon::Lane::kSmall,
        [](daemon::JobContext& ctx) -> Result<nlohmann::json> { return ctx.params(); });
  r.add("throw", daemon::Lane::kSmall, [](daemon::JobContext& ctx) -> Result<nlohmann::json> {
    if (ctx.params().value("what", std::string()) == "bad_alloc") throw std::bad_alloc();
    throw std::runtime_error("thrown on purpose");
  });
  auto gated = [this](daemon::JobContext& ctx) -> Result<nlohmann::json> {
    gated_running++;
    int ticks = 0;
    while (!ctx.cancelled() && !release.load()) {
      ctx.job().set_progress({{"phase", "waiting"}, {"fraction", 0.01 * (++ticks % 100)}});
      std::this_thread::sleep_for(2ms);
    }
    gated_running--;
    if (ctx.cancelled()) return Status::cancelled("cancelled while waiting at the gate");
    return nlohmann::json{{"released", true}};
  };
  r.add("gated", daemon::Lane::kDense, gated);
  r.add("gated_tridiag", daemon::Lane::kTridiag, gated);
  r.add("rows", daemon::Lane::kDense, [](daemon::JobContext& ctx) -> Result<nlohmann::json> {
    const int64_t n = ctx.params().value("n", int64_t{1000});
    const int64_t nrhs = ctx.params().value("nrhs", int64_t{1});
    const int64_t stripe = ctx.params().value("stripe", int64_t{100});
    const int delay_ms = ctx.params().value("delay_ms", 0);
    STRIPESOLVE_RETURN_IF_ERROR(ctx.job().begin_solution(n, nrhs));
    for (int64_t end = n; end > 0; end -= stripe) {
      if (ctx.cancelled()) return Status::cancelled("cancelled while producing rows");
      const int64_t begin = std::max<int64_t>(0, end - stripe), rows = end - begin;
      std::vector<double> x(static_cast<size_t>(rows * nrhs));
      for (int64_t j = 0; j < nrhs; ++j) {
        for (int64_t i = 0; i < rows; ++i) x[j * rows + i] = expected_row_value(begin + i, j);
      }
      STRIPESOLVE_RETURN_IF_ERROR(ctx.job().publish_rows(begin, rows, x.data()));
      ctx.job().set_progress({{"phase", "substitute"}, {"fraction", 1.0 - double(begin) / n}});
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    return nlohmann::json{{"rows", n}};
  });
}

DaemonFixture::DaemonFixture(const std::function<void(daemon::DaemonConfig&)>& tweak) {
  char tmpl[] = "/tmp/ss-it-XXXXXX";
  dir_ = ::mkdtemp(tmpl);
  socket_ = dir_ + "/run/stripesolved.sock";
  daemon::DaemonConfig config = daemon::parse_daemon_config("", "<test>");
  config.server.socket = socket_;
  config.server.progress_log_seconds = 0.2;
  config.server.drain_timeout_seconds = 30;
  config.store.paths = {dir_ + "/store"};
  config.store.direct_io = false;
  config.store.free_space_reserve = 0;
  config.engine.ram_budget = 16ull << 20;  // below the 1600-order test matrix (20 MB): out of core
  config.engine_ram_budget_set = true;
  // A device budget per daemon on a GPU machine (the default is 90% of the free memory), so
  // that the tests' daemons run side by side (ctest -j) on one card.
  config.engine.gpu_memory = 1ull << 30;
  if (tweak) tweak(config);
  socket_ = config.server.socket;
  daemon_ = std::make_unique<daemon::Daemon>(
      config, [this](daemon::JobRegistry& r) { jobs_.register_into(r); });
  Status st = daemon_->start();
  if (!st.is_ok()) {
    ADD_FAILURE() << "daemon did not start: " << st.to_string();
    return;
  }
  thread_ = std::thread([this] { exit_code_ = daemon_->run(); });
}

DaemonFixture::~DaemonFixture() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void DaemonFixture::stop(const std::string& policy) {
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    daemon_->request_stop(policy);
    thread_.join();
  }
  daemon_.reset();
}

std::unique_ptr<client::Connection> DaemonFixture::connect() {
  auto c = client::Connection::connect(socket_, "integration-test");
  if (!c.is_ok()) {
    ADD_FAILURE() << c.status().to_string();
    return nullptr;
  }
  return std::move(c).value();
}

}  // namespace stripesolve::testing
