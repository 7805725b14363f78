#include "daemon/connection.h"

#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "base/build_info.h"
#include "base/logging.h"
#include "daemon/job_files.h"
#include "protocol/messages.h"

namespace stripesolve::daemon {

namespace asio = boost::asio;
using protocol::Frame;
using protocol::MessageType;

namespace {
constexpr std::string_view kJobsHint = "list your jobs with 'stripesolve jobs'";
// Unfinished uploads one connection may hold at once (a client sends one at a time).
constexpr size_t kMaxUnfinishedUploads = 16;
std::atomic<uint64_t> next_connection_id{1};
}  // namespace

Connection::Connection(asio::local::stream_protocol::socket socket, uid_t uid, pid_t pid,
                       ConnectionEnv env)
    : socket_(std::move(socket)),
      uid_(uid),
      pid_(pid),
      env_(env),
      log_(logger("server")),
      parser_({static_cast<uint32_t>(env.config.limits.max_header_bytes),
               static_cast<uint32_t>(env.config.limits.max_payload_bytes)}),
      timer_(env.io),
      last_activity_(std::chrono::steady_clock::now()),
      id_(next_connection_id++) {
  env_.metrics.connections_open++;
}

Connection::~Connection() {
  free_uploads();
  env_.metrics.connections_open--;
}

void Connection::start() {
  log_->debug("connection from uid {} pid {}", uid_, pid_);
  arm_timer(env_.config.limits.handshake_timeout_seconds);
  read();
}

void Connection::refuse(const Status& status, std::string_view hint) {
  log_->warn("refusing connection from uid {} pid {}: {}", uid_, pid_, status.message());
  send_error(0, status, hint);
  closing_ = true;
}

void Connection::arm_timer(double seconds) {
  if (seconds <= 0) return;
  timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds)));
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;  // cancelled: re-armed or closed
    if (auto self = weak.lock()) self->on_timer();
  });
}

bool Connection::busy() const {
  return !watches_.empty() || !streams_.empty() || writing_ || !queue_.empty();
}

bool Connection::delivering() const {
  if (closed_) return false;
  if (busy()) return true;
  for (const auto& [id, job] : unreported_) {
    if (job->state() != JobState::kCancelled) return true;
  }
  return false;
}

void Connection::reported(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_unsigned()) return;
  const std::string state = j.value("state", std::string());
  if (state == "COMPLETED" || state == "COMPLETED_WITH_WARNING" || state == "FAILED" ||
      state == "CANCELLED") {
    unreported_.erase(j["id"].get<uint64_t>());
  }
}

void Connection::on_timer() {
  if (closed_ || closing_) return;
  const ServerLimits& limits = env_.config.limits;
  if (!handshaken_) {
    env_.metrics.connections_timed_out++;
    log_->warn("closing connection of uid {} pid {}: no hello within {} s", uid_, pid_,
               limits.handshake_timeout_seconds);
    send_error(0, Status::unavailable(
                      fmt::format("no hello within {} s (daemon.limits.handshake_timeout_seconds)",
                                  limits.handshake_timeout_seconds)));
    closing_ = true;
    write_next();
    return;
  }
  const double idle = limits.idle_timeout_seconds;
  if (idle <= 0) return;
  const double quiet =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_activity_).count();
  if (busy() || quiet < idle) {
    arm_timer(busy() ? idle : idle - quiet);
    return;
  }
  env_.metrics.connections_timed_out++;
  log_->info("closing connection of uid {} pid {}: idle for {:.0f} s", uid_, pid_, quiet);
  send_error(
      0, Status::unavailable(fmt::format(
             "closed after {} s without a request (daemon.limits.idle_timeout_seconds)", idle)));
  closing_ = true;
  write_next();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  for (auto& [id, w] : watches_) w.job->remove_listener(w.listener);
  for (auto& [id, s] : streams_) s.job->remove_listener(s.listener);
  watches_.clear();
  streams_.clear();
  free_uploads();
  unreported_.clear();
  boost::system::error_code ec;
  socket_.shutdown(asio::socket_base::shutdown_both, ec);
  socket_.close(ec);
  if (on_close_) on_close_(this);
}

void Connection::wake() {
  if (wake_pending_.exchange(true)) return;
  asio::post(env_.io, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->on_wake();
  });
}

uint64_t Connection::listen_to(const std::shared_ptr<Job>& job) {
  return job->add_listener([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->wake();
  });
}

void Connection::read() {
  // Asio reads no ancillary data: wait for readability, then recvmsg() (read_available), which
  // also takes the descriptors a request passes (protocol/descriptors.h).
  socket_.async_wait(asio::socket_base::wait_read,
                     [self = shared_from_this()](boost::system::error_code ec) {
                       if (self->closed_) return;
                       if (ec) {
                         self->close();
                         return;
                       }
                       self->read_available();
                     });
}

void Connection::read_available() {
  std::vector<UniqueFd> fds;
  auto got = protocol::receive_with_descriptors(socket_.native_handle(), read_buf_.data(),
                                                read_buf_.size(), /*nonblocking=*/true, &fds);
  if (!got.is_ok()) {
    if (got.status().code() == StatusCode::kInvalidArgument) return fail_protocol(got.status());
    close();  // reset or another socket error: the client went away
    return;
  }
  if (got->would_block) return read();
  if (got->bytes == 0) {  // EOF: the client went away
    if (!parser_.at_frame_boundary()) log_->debug("uid {} closed mid-frame", uid_);
    close();
    return;
  }
  env_.metrics.bytes_in += got->bytes;
  Status st = descriptors_.add(std::move(fds));
  if (st.is_ok()) st = parser_.feed(std::string_view(read_buf_.data(), got->bytes));
  while (auto frame = parser_.next()) {
    if (closing_ || closed_) break;
    env_.metrics.frames_in++;
    last_activity_ = std::chrono::steady_clock::now();
    auto count = protocol::declared_descriptors(frame->header);
    auto files =
        count.is_ok() ? descriptors_.take(*count) : Result<std::vector<UniqueFd>>(count.status());
    if (!files.is_ok()) return fail_protocol(files.status());
    on_frame(std::move(*frame), std::move(files).value());
  }
  if (closing_ || closed_) return;
  if (st.is_ok()) st = descriptors_.check(parser_.at_frame_boundary());
  if (!st.is_ok()) return fail_protocol(st);
  read();
}

void Connection::fail_protocol(const Status& status) {
  descriptors_.clear();
  env_.metrics.protocol_errors++;
  log_->warn("closing connection of uid {} pid {}: malformed input: {}", uid_, pid_,
             status.message());
  send_error(0, status, "the client and daemon may be different versions; reinstall stripesolve");
  closing_ = true;
  write_next();
}

void Connection::on_frame(Frame frame, std::vector<UniqueFd> files) {
  if (!handshaken_) {
    if (!files.empty()) {
      fail_protocol(Status::invalid_argument("the hello frame carries no descriptors"));
      return;
    }
    auto version = protocol::negotiate_version(frame);
    if (!version.is_ok()) {
      fail_protocol(version.status());
      return;
    }
    handshaken_ = true;
    timer_.cancel();
    arm_timer(env_.config.limits.idle_timeout_seconds);
    send(protocol::make_frame(MessageType::kWelcome, frame.request_id,
                              {{"version", *version},
                               {"daemon", std::string("stripesolved ") + kVersion},
                               {"uid", uid_},
                               {"pid", ::getpid()},
                               {"limits",
                                {{"max_payload_bytes", env_.config.limits.max_payload_bytes},
                                 {"max_header_bytes", env_.config.limits.max_header_bytes},
                                 {"max_upload_bytes", env_.config.limits.max_upload_bytes},
                                 {"max_frame_descriptors", protocol::kMaxFrameDescriptors}}}},
                              protocol::kFlagFinal));
    return;
  }
  if (!protocol::is_request_type(frame.type) ||
      frame.type == static_cast<uint16_t>(MessageType::kHello)) {
    fail_protocol(
        Status::invalid_argument(fmt::format("frame type {} ({}) is not a request", frame.type,
                                             protocol::message_type_name(frame.type))));
    return;
  }
  env_.metrics.requests_total++;
  const uint64_t rid = frame.request_id;
  try {
    if (frame.type == static_cast<uint16_t>(MessageType::kSubmit)) {
      handle_submit(frame, std::move(files));
      return;
    }
    if (!files.empty()) {  // closed when `files` goes out of scope
      send_error(rid, Status::invalid_argument(
                          fmt::format("a {} request takes no descriptors ({} passed)",
                                      protocol::message_type_name(frame.type), files.size())));
      return;
    }
    handle_request(frame);
  } catch (const std::exception& e) {
    // A request the handlers did not foresee must cost its sender an error reply, never the
    // daemon: an exception leaving an Asio handler would end the I/O loop (issue 15).
    log_->error("request {} ({}) of uid {} pid {} failed: {}", rid,
                protocol::message_type_name(frame.type), uid_, pid_, e.what());
    send_error(rid, Status::internal(
                        fmt::format("the daemon could not handle this request: {}", e.what())));
  }
}

void Connection::handle_request(Frame& frame) {
  const uint64_t rid = frame.request_id;
  const auto& h = frame.header;
  switch (static_cast<MessageType>(frame.type)) {
    case MessageType::kPing:
      reply(rid, {{"pong", true}});
      return;
    case MessageType::kUpload:
      handle_upload(frame);
      return;
    case MessageType::kJobs: {
      auto all = protocol::get_bool(h, "all", false);
      if (!all.is_ok()) return send_error(rid, all.status());
      nlohmann::json list = nlohmann::json::array();
      for (auto& job : env_.jobs.list(uid_, *all)) list.push_back(job->to_json());
      reply(rid, {{"jobs", std::move(list)}});
      return;
    }
    case MessageType::kStatus:
    case MessageType::kWatch:
    case MessageType::kCancel:
    case MessageType::kResult:
    case MessageType::kLogs:
    case MessageType::kTrace: {
      auto id = protocol::get_job_id(h);
      if (!id.is_ok()) return send_error(rid, id.status());
      auto job = frame.type == static_cast<uint16_t>(MessageType::kCancel)
                     ? env_.jobs.cancel(uid_, *id)
                     : env_.jobs.find(uid_, *id);
      if (!job.is_ok()) return send_error(rid, job.status(), kJobsHint);
      switch (static_cast<MessageType>(frame.type)) {
        case MessageType::kWatch:
          return start_watch(rid, *job, true);
        case MessageType::kResult:
          return start_result(rid, *job);
        case MessageType::kLogs: {
          uint64_t from = 0;
          if (h.contains("from")) {
            auto f = protocol::get_int(h, "from", 0, INT64_MAX);
            if (!f.is_ok()) return send_error(rid, f.status());
            from = static_cast<uint64_t>(*f);
          }
          // The state before the lines: a job seen ended has all its lines in this reply.
          const std::string state(job_state_name((*job)->state()));
          auto slice = (*job)->log_since(from);
          reply(rid, {{"job", *id},
                      {"lines", std::move(slice.lines)},
                      {"first", slice.first},
                      {"next", slice.next},
                      {"state", state}});
          return;
        }
        case MessageType::kTrace:
          reply(rid, {{"job", *id}, {"trace", nlohmann::json::parse((*job)->trace_json())}});
          return;
        default: {  // status, cancel
          nlohmann::json j = (*job)->to_json();
          reported(j);
          reply(rid, std::move(j));
          return;
        }
      }
    }
    case MessageType::kMetrics:
      reply(rid, {{"text", env_.hooks.metrics_text ? env_.hooks.metrics_text() : std::string()}});
      return;
    case MessageType::kMatrices: {
      if (!env_.hooks.matrices)
        return send_error(rid, Status::unavailable("this daemon has no store"));
      auto r = env_.hooks.matrices(h);
      if (!r.is_ok())
        return send_error(rid, r.status(), "'stripesolve matrix ls' lists the stored matrices");
      reply(rid, std::move(r).value());
      return;
    }
    case MessageType::kDaemonStatus:
      reply(rid, env_.hooks.daemon_status ? env_.hooks.daemon_status() : nlohmann::json::object());
      return;
    case MessageType::kDaemonStop: {
      if (!may_stop_daemon(uid_, ::getuid())) {
        return send_error(rid,
                          Status::failed_precondition(fmt::format(
                              "uid {} may not stop a daemon run by uid {}", uid_, ::getuid())),
                          "ask the daemon's owner or root");
      }
      auto field = h.contains("policy") ? protocol::get_string(h, "policy")
                                        : Result<std::string>(std::string("drain"));
      if (!field.is_ok()) return send_error(rid, field.status());
      const std::string policy = *field;
      if (policy != "drain" && policy != "cancel") {
        return send_error(rid, Status::invalid_argument(
                                   "policy must be 'drain' or 'cancel', got '" + policy + "'"));
      }
      reply(rid, {{"stopping", true}, {"policy", policy}});
      if (env_.hooks.request_stop) env_.hooks.request_stop(uid_, policy);
      return;
    }
    default:
      fail_protocol(Status::invalid_argument(fmt::format("unexpected frame type {}", frame.type)));
  }
}

void Connection::handle_upload(Frame& frame) {
  const uint64_t rid = frame.request_id;
  if (env_.draining.load()) {
    drop_upload(rid);
    return send_error(rid, Status::unavailable(std::string(kDrainingMessage)));
  }
  if (uploads_.count(rid) == 0 && uploads_.size() >= kMaxUnfinishedUploads) {
    return send_error(
        rid, Status::resource_exhausted(
                 fmt::format("more than {} unfinished uploads on one connection; finish one first",
                             kMaxUnfinishedUploads)));
  }
  // Bounded before it is held: this connection's unfinished uploads together by one upload's
  // limit, every upload of the daemon by max_upload_total (issue 15).
  const uint64_t piece = frame.payload.size();
  if (unfinished_upload_bytes_ + piece > env_.config.limits.max_upload_bytes) {
    drop_upload(rid);
    return send_error(
        rid, Status::resource_exhausted(fmt::format("upload exceeds daemon.limits.max_upload_bytes "
                                                    "({} bytes, for the unfinished uploads of a "
                                                    "connection together)",
                                                    env_.config.limits.max_upload_bytes)));
  }
  if (Status st = env_.uploads.reserve(piece); !st.is_ok()) {
    drop_upload(rid);
    return send_error(rid, st);
  }
  unfinished_upload_bytes_ += piece;
  std::string& buf = uploads_[rid];
  buf += frame.payload;
  if ((frame.flags & protocol::kFlagFinal) == 0) return;
  std::string bytes = std::move(buf);
  uploads_.erase(rid);
  unfinished_upload_bytes_ -= bytes.size();
  const size_t n = bytes.size();
  const uint64_t id = env_.uploads.put(uid_, std::move(bytes), id_);  // stays reserved
  reply(rid, {{"upload", id}, {"bytes", n}});
}

void Connection::drop_upload(uint64_t request_id) {
  auto it = uploads_.find(request_id);
  if (it == uploads_.end()) return;
  unfinished_upload_bytes_ -= it->second.size();
  env_.uploads.release(it->second.size());
  uploads_.erase(it);
}

void Connection::free_uploads() {
  env_.uploads.release(unfinished_upload_bytes_);
  unfinished_upload_bytes_ = 0;
  uploads_.clear();
  env_.uploads.drop_connection(id_);
}

void Connection::handle_submit(Frame& frame, std::vector<UniqueFd> files) {
  auto it = frame.header.find("job");
  if (it == frame.header.end()) {
    return send_error(frame.request_id, Status::invalid_argument("submit needs a 'job' object"));
  }
  auto wait = protocol::get_bool(frame.header, "wait", false);
  if (!wait.is_ok()) return send_error(frame.request_id, wait.status());
  if (Status st = check_passed_files(*it, files); !st.is_ok())
    return send_error(frame.request_id, st);
  auto job = env_.jobs.submit(uid_, *it, std::move(files));
  if (!job.is_ok()) return send_error(frame.request_id, job.status());
  env_.uploads.claim_named(uid_, *it);  // they outlive this connection now
  if (*wait) return start_watch(frame.request_id, *job, false);
  unreported_[(*job)->id()] = *job;
  reply(frame.request_id, {{"job", (*job)->id()}, {"state", job_state_name((*job)->state())}});
}

}  // namespace stripesolve::daemon
