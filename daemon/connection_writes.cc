// Connection (connection.h): its outgoing side: replies (in the header, or as JSON in the
// payload when large), error frames, and the write queue, bounded by
// daemon.limits.max_queued_bytes (progress frames dropped first), drained one async write at a
// time on the io thread.
#include <array>

#include <fmt/format.h>

#include "daemon/connection.h"
#include "protocol/messages.h"

namespace stripesolve::daemon {

namespace asio = boost::asio;
using protocol::Frame;
using protocol::MessageType;

void Connection::reply(uint64_t request_id, nlohmann::json header) {
  // Large replies (job lists, traces, logs, metrics) travel as JSON in the payload
  // (docs/protocol.md "Large replies"); the JSON header stays small.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= protocol::kInlineReplyBytes) {
    send(protocol::make_frame(MessageType::kOk, request_id, std::move(header),
                              protocol::kFlagFinal));
    return;
  }
  if (text.size() > env_.config.limits.max_payload_bytes) {
    send_error(request_id,
               Status::resource_exhausted(
                   fmt::format("reply of {} bytes exceeds the payload limit of {} bytes",
                               text.size(), env_.config.limits.max_payload_bytes)),
               "narrow the request (e.g. a job id or a smaller limit)");
    return;
  }
  protocol::Frame f = protocol::make_frame(MessageType::kOk, request_id, {{"body", "payload"}},
                                           protocol::kFlagFinal);
  f.payload = std::move(text);
  send(f);
}

void Connection::send_error(uint64_t request_id, const Status& status, std::string_view hint) {
  send(protocol::make_error_frame(request_id, status, hint));
}

void Connection::send(const Frame& frame, bool droppable) {
  if (closed_) return;
  auto bytes = protocol::encode_frame(frame);
  if (!bytes.is_ok()) {  // a reply too large to frame: report that instead
    log_->error("cannot encode a {} frame: {}", protocol::message_type_name(frame.type),
                bytes.status().message());
    bytes = protocol::encode_frame(protocol::make_error_frame(frame.request_id, bytes.status()));
  }
  Outgoing out;
  out.bytes = std::move(bytes).value();
  enqueue(std::move(out), droppable);
}

void Connection::enqueue(Outgoing out, bool droppable) {
  if (closed_) return;
  if (queued_bytes_ + out.size() > env_.config.limits.max_queued_bytes && !queue_.empty()) {
    if (droppable) {
      env_.metrics.progress_frames_dropped++;
      return;
    }
    log_->warn(
        "closing connection of uid {} pid {}: {} bytes queued, over daemon.limits.max_queued_bytes",
        uid_, pid_, queued_bytes_);
    close();
    return;
  }
  queued_bytes_ += out.size();
  queue_.push_back(std::move(out));
  env_.metrics.frames_out++;
  write_next();
}

void Connection::write_next() {
  if (writing_ || closed_) return;
  // pump may send(), which re-enters write_next() and starts the write itself.
  if (queue_.empty() && !closing_) pump_one_stream();
  if (writing_ || closed_) return;
  if (queue_.empty()) {
    if (closing_) close();
    return;
  }
  writing_ = true;
  const Outgoing& front = queue_.front();
  const std::array<asio::const_buffer, 2> buffers = {
      asio::buffer(front.bytes), asio::buffer(front.payload, front.payload_len)};
  asio::async_write(socket_, buffers,
                    [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                      self->writing_ = false;
                      if (self->closed_) return;
                      if (ec) {
                        self->close();
                        return;
                      }
                      self->env_.metrics.bytes_out += n;
                      self->queued_bytes_ -= self->queue_.front().size();
                      self->queue_.pop_front();
                      self->write_next();
                    });
}

}  // namespace stripesolve::daemon
