// One client connection of the server (private to daemon/; includes Asio).
//
// Reads frames through a protocol::FrameParser, checks the handshake, dispatches requests as
// the peer's uid, and writes replies with one write in flight. Result streams are pulled: a chunk
// frame is built only when the write queue is empty, so a slow reader throttles the stream.
// Watches and result streams listen to their job; job threads only post a wake-up to the I/O
// thread (at most one pending at a time).
//
// Threading: everything runs on the server's I/O thread except wake(), which any thread may call.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp needs std::exchange

#include <boost/asio.hpp>

#include "daemon/job_manager.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/server_config.h"
#include "daemon/uploads.h"
#include "protocol/descriptors.h"
#include "protocol/frame.h"

namespace stripesolve::daemon {

struct ConnectionEnv {
  const ServerConfig& config;
  JobManager& jobs;
  UploadStore& uploads;
  Metrics& metrics;
  const ServerHooks& hooks;
  boost::asio::io_context& io;
  const std::atomic<bool>& draining;  // uploads and submits are refused (Server::drain)
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::local::stream_protocol::socket socket, uid_t uid, pid_t pid,
             ConnectionEnv env);
  ~Connection();

  // Starts reading, with the handshake timeout running.
  void start();
  // Sends one error frame and closes (a connection limit was reached).
  void refuse(const Status& status, std::string_view hint);
  uid_t uid() const { return uid_; }
  // Still receiving something a drain must wait for: a watch or result stream, bytes to write,
  // or a job submitted here whose end this connection was not yet told (cancelled ones aside).
  bool delivering() const;
  void close();
  void set_on_close(std::function<void(Connection*)> fn) { on_close_ = std::move(fn); }
  // Any thread: something changed in a job this connection follows.
  void wake();

 private:
  struct Watch {  // watch or submit-with-wait
    std::shared_ptr<Job> job;
    uint64_t listener = 0;
    bool progress = true;  // send progress frames (watch) or only the end (submit wait)
    std::string last_progress;
  };
  struct ResultStream {
    std::shared_ptr<Job> job;
    uint64_t listener = 0;
    std::shared_ptr<const std::vector<double>> buffer;
    std::deque<Job::RowRange> ranges;
    size_t consumed = 0;  // ranges taken from the job
    int64_t rows_sent = 0;
    int64_t n = 0, nrhs = 0;
    bool header_sent = false;
  };

  // The handshake and idle timeouts (daemon.limits): one timer, re-armed as needed.
  void arm_timer(double seconds);
  void on_timer();
  // Following a job (watch, result stream) or writing: not idle, however quiet the client.
  bool busy() const;
  void read();
  // Reads what the socket holds (recvmsg: bytes and passed descriptors) and handles the frames.
  void read_available();
  void on_frame(protocol::Frame frame, std::vector<UniqueFd> files);
  void handle_request(protocol::Frame& frame);
  void handle_upload(protocol::Frame& frame);
  void drop_upload(uint64_t request_id);
  // Frees the unfinished uploads and the unclaimed finished ones of this connection.
  void free_uploads();
  void handle_submit(protocol::Frame& frame, std::vector<UniqueFd> files);
  void start_watch(uint64_t request_id, const std::shared_ptr<Job>& job, bool progress);
  void start_result(uint64_t request_id, const std::shared_ptr<Job>& job);
  void on_wake();
  void update_watches();
  // Produces at most one frame of one result stream; false if none could produce.
  bool pump_one_stream();
  bool produce(uint64_t request_id, ResultStream& s, bool* finished);

  void reply(uint64_t request_id, nlohmann::json header);
  void send_error(uint64_t request_id, const Status& status, std::string_view hint = {});
  // Queues a frame. Droppable frames (progress) are dropped when over the queue limit; others
  // close the connection (the client is not reading).
  void send(const protocol::Frame& frame, bool droppable = false);
  void write_next();
  void fail_protocol(const Status& status);
  uint64_t listen_to(const std::shared_ptr<Job>& job);
  // This connection was told that job `j` ended (its terminal state went out in a reply).
  void reported(const nlohmann::json& j);

  boost::asio::local::stream_protocol::socket socket_;
  const uid_t uid_;
  const pid_t pid_;
  ConnectionEnv env_;
  std::shared_ptr<spdlog::logger> log_;
  protocol::FrameParser parser_;
  protocol::DescriptorQueue descriptors_;  // passed descriptors waiting for their frame
  std::array<char, 64 * 1024> read_buf_{};
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point last_activity_;  // last frame received
  bool handshaken_ = false;
  bool closing_ = false;  // stop reading; close once the queue is written
  bool closed_ = false;
  bool writing_ = false;
  // A frame to write: its encoded bytes, plus (for result chunks) a payload that is written
  // straight from the job's solution buffer, kept alive by `owner` (no copy).
  struct Outgoing {
    std::string bytes;
    std::shared_ptr<const std::vector<double>> owner;
    const char* payload = nullptr;
    size_t payload_len = 0;
    size_t size() const { return bytes.size() + payload_len; }
  };
  void enqueue(Outgoing out, bool droppable);
  std::deque<Outgoing> queue_;
  uint64_t queued_bytes_ = 0;
  std::map<uint64_t, Watch> watches_;         // by request id
  std::map<uint64_t, ResultStream> streams_;  // by request id
  // Unfinished uploads by request id: at most kMaxUnfinishedUploads, together at most
  // max_upload_bytes, every byte reserve()d in env_.uploads (issue 15).
  std::map<uint64_t, std::string> uploads_;
  uint64_t unfinished_upload_bytes_ = 0;
  const uint64_t id_;  // unique per connection: who sent an upload
  std::map<uint64_t, std::shared_ptr<Job>> unreported_;  // submitted here, end not yet told, by id
  std::atomic<bool> wake_pending_{false};
  std::function<void(Connection*)> on_close_;
};

}  // namespace stripesolve::daemon
