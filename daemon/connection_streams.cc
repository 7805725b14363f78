// Connection (connection.h): what it sends on its own as jobs move: the watches (progress frames,
// the final reply) and the result streams (a solution's header, chunks and end), driven from the
// io thread by the jobs' wake-ups (on_wake) and by write_next as the socket drains.
#include <fmt/format.h>

#include "daemon/connection.h"
#include "protocol/messages.h"

namespace stripesolve::daemon {

using protocol::Frame;
using protocol::MessageType;

void Connection::start_watch(uint64_t request_id, const std::shared_ptr<Job>& job, bool progress) {
  Watch w{job, 0, progress, {}};
  w.listener = listen_to(job);
  watches_[request_id] = std::move(w);
  update_watches();
}

void Connection::start_result(uint64_t request_id, const std::shared_ptr<Job>& job) {
  if (job->fetched()) {
    return send_error(
        request_id,
        Status::failed_precondition(fmt::format(
            "the result of job {} was already fetched (results are streamed once)", job->id())));
  }
  ResultStream s;
  s.job = job;
  s.listener = listen_to(job);
  streams_[request_id] = std::move(s);
  write_next();
}

void Connection::on_wake() {
  wake_pending_ = false;
  if (closed_) return;
  update_watches();
  write_next();
}

void Connection::update_watches() {
  for (auto it = watches_.begin(); it != watches_.end();) {
    Watch& w = it->second;
    const JobState state = w.job->state();
    if (w.progress) {
      nlohmann::json p = w.job->progress();
      p["job"] = w.job->id();
      p["state"] = job_state_name(state);
      std::string text = p.dump();
      if (text != w.last_progress) {
        w.last_progress = std::move(text);
        send(protocol::make_frame(MessageType::kProgress, it->first, std::move(p)),
             /*droppable=*/true);
      }
    }
    if (is_terminal(state)) {
      w.job->remove_listener(w.listener);
      nlohmann::json j = w.job->to_json();
      reported(j);
      if (!w.progress) j["job"] = w.job->id();  // submit-with-wait replies like submit
      reply(it->first, std::move(j));
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Connection::produce(uint64_t request_id, ResultStream& s, bool* finished) {
  *finished = false;
  const JobState state = s.job->state();
  if (!s.header_sent) {
    s.buffer = s.job->solution_buffer();
    if (s.buffer == nullptr) {
      if (!is_terminal(state)) return false;  // wait for the solution to begin
      *finished = true;
      if (has_result(state)) {
        send_error(request_id,
                   Status::failed_precondition(
                       fmt::format("job {} ({}) has no solution to stream{}", s.job->id(),
                                   s.job->type(), s.job->fetched() ? " (already fetched)" : "")),
                   "see 'stripesolve status'");
      } else {
        Status err = s.job->error();
        send_error(request_id,
                   Status(StatusCode::kFailedPrecondition,
                          fmt::format("job {} ended {} without a result: {}", s.job->id(),
                                      job_state_name(state), err.message())));
      }
      return true;
    }
    s.job->published_since(0, &s.n, &s.nrhs);
    // The stream's opening frame: not final, chunks follow. array_shape, when the job set one,
    // is the .npy shape the rows fill in C order (docs/protocol.md).
    nlohmann::json opening = {{"job", s.job->id()}, {"shape", {s.n, s.nrhs}}};
    if (auto array_shape = s.job->array_shape(); !array_shape.empty())
      opening["array_shape"] = array_shape;
    send(protocol::make_frame(MessageType::kOk, request_id, std::move(opening)));
    s.header_sent = true;
    return true;
  }
  if (s.ranges.empty()) {
    int64_t n, nrhs;
    auto more = s.job->published_since(s.consumed, &n, &nrhs);
    s.consumed += more.size();
    for (auto& r : more) s.ranges.push_back(r);
  }
  if (!s.ranges.empty()) {
    Job::RowRange& r = s.ranges.front();
    const int64_t row_bytes = 8 * s.nrhs;
    const int64_t max_rows = std::max<int64_t>(
        1, static_cast<int64_t>(env_.config.limits.max_payload_bytes) / row_bytes);
    const int64_t rows = std::min(r.rows, max_rows);
    Frame f = protocol::make_frame(MessageType::kResultChunk, request_id,
                                   {{"row_begin", r.row_begin}, {"rows", rows}, {"nrhs", s.nrhs}});
    Outgoing out;
    out.owner = s.buffer;
    out.payload = reinterpret_cast<const char*>(s.buffer->data() + r.row_begin * s.nrhs);
    out.payload_len = static_cast<size_t>(rows * row_bytes);
    // Encode the frame with an empty payload, then patch payload_len in the fixed header.
    out.bytes = *protocol::encode_frame(f);
    const uint32_t len = static_cast<uint32_t>(out.payload_len);
    for (int i = 0; i < 4; ++i) out.bytes[24 + i] = static_cast<char>((len >> (8 * i)) & 0xff);
    env_.metrics.result_bytes_streamed += out.payload_len;
    enqueue(std::move(out), false);
    s.rows_sent += rows;
    r.row_begin += rows;
    r.rows -= rows;
    if (r.rows == 0) s.ranges.pop_front();
    return true;
  }
  if (!is_terminal(state)) return false;
  *finished = true;
  if (has_result(state) && s.rows_sent == s.n) {
    s.job->mark_fetched();
    nlohmann::json j = s.job->to_json();
    reported(j);
    reply(request_id, {{"rows", s.rows_sent}, {"job", std::move(j)}});
  } else {
    send_error(request_id, Status(StatusCode::kFailedPrecondition,
                                  fmt::format("job {} ended {} after {} of {} solution rows: {}",
                                              s.job->id(), job_state_name(state), s.rows_sent, s.n,
                                              s.job->error().message())));
  }
  return true;
}

bool Connection::pump_one_stream() {
  for (auto it = streams_.begin(); it != streams_.end(); ++it) {
    bool finished = false;
    const bool produced = produce(it->first, it->second, &finished);
    if (finished) {
      it->second.job->remove_listener(it->second.listener);
      streams_.erase(it);
    }
    if (produced) return true;
  }
  return false;
}

}  // namespace stripesolve::daemon
