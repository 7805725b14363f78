// The client's view of a daemon that dies in the middle of a streamed reply: a clear error, and
// no half-written result file.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "protocol/messages.h"

namespace stripesolve::testing {
namespace {

using protocol::MessageType;

// A peer that speaks the protocol up to the first result chunk, then exits abruptly (closes).
class DyingDaemon {
 public:
  explicit DyingDaemon(std::string path) : path_(std::move(path)) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ::unlink(path_.c_str());
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_fd_, 1), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~DyingDaemon() {
    thread_.join();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }

 private:
  void send_frame(int fd, const protocol::Frame& f) {
    std::string b = *protocol::encode_frame(f);
    ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
  }
  void serve() {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    protocol::FrameParser parser;
    char buf[4096];
    int seen = 0;
    while (seen < 2) {  // hello, then the result request
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      (void)parser.feed(std::string_view(buf, n));
      while (auto f = parser.next()) {
        ++seen;
        if (f->type == static_cast<uint16_t>(MessageType::kHello)) {
          send_frame(fd, protocol::make_frame(MessageType::kWelcome, 0, {{"version", 1}},
                                              protocol::kFlagFinal));
        } else {
          send_frame(fd,
                     protocol::make_frame(MessageType::kOk, f->request_id, {{"shape", {100, 1}}}));
          protocol::Frame chunk =
              protocol::make_frame(MessageType::kResultChunk, f->request_id,
                                   {{"row_begin", 90}, {"rows", 10}, {"nrhs", 1}});
          chunk.payload.assign(80, '\0');
          send_frame(fd, chunk);
        }
      }
    }
    ::close(fd);  // dies mid-stream
  }
  std::string path_;
  int listen_fd_ = -1;
  std::thread thread_;
};

TEST(DeadDaemonIntegration, ClientReportsAClearErrorAndLeavesNoPartialFile) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("ss-dead-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  DyingDaemon peer(dir + "/d.sock");
  auto c = client::Connection::connect(dir + "/d.sock");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const std::string out = dir + "/x.npy";
  auto rows = client::fetch_result(**c, 1, out);
  ASSERT_FALSE(rows.is_ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      rows.status().message(),
      "the daemon closed the connection in the middle of a reply (it may have stopped or crashed); "
      "check 'stripesolve daemon status' and the daemon log");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripesolve::testing
