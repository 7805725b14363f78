#include "scheduler/io_role.h"

#include <algorithm>
#include <future>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "base/internal_error.h"

namespace stripesolve::scheduler {

namespace {

static_assert(cache::kThroughN == storage::kThroughN, "a part through n is one value in both");

TraceRecorder::Args part_args(const cache::IoWork& work, const storage::PartLayout& layout) {
  return {{"stripe", std::to_string(work.cell.stripe)},
          {"col", std::to_string(work.cell.i0_store)},
          {"bytes", std::to_string(layout.data_bytes)}};
}

}  // namespace

IoRole::IoRole(cache::StripeCache& cache, ProgressMeter& progress, TraceRecorder* trace,
               int threads)
    : cache_(cache), progress_(progress), trace_(trace) {
  for (int t = 0; t < std::max(1, threads); ++t) threads_.emplace_back([this] { run(); });
}

IoRole::~IoRole() {
  cache_.shutdown();
  for (auto& t : threads_) t.join();
}

void IoRole::set_sources(storage::StripedMatrix* original, storage::StripedMatrix* factor) {
  MutexLock lock(mu_);
  original_ = original;
  factor_ = factor;
  written_.assign(original == nullptr ? 0 : original->geometry().stripes, false);
}

void IoRole::mark_written(const std::vector<bool>& written) {
  MutexLock lock(mu_);
  for (size_t s = 0; s < written.size() && s < written_.size(); ++s) {
    if (written[s]) written_[s] = true;
  }
}

void IoRole::set_write_hook(WriteHook hook) {
  MutexLock lock(mu_);
  write_hook_ = std::move(hook);
}

void IoRole::set_read_hook(ReadHook hook) {
  MutexLock lock(mu_);
  read_hook_ = std::move(hook);
  while (read_hook_streams_ > 0) read_hook_done_.wait(lock);
}

Status IoRole::upload(const cache::IoWork& work) {
  const int64_t s = work.cell.stripe;
  const int64_t c0 = work.cell.i0_store;
  storage::StripedMatrix* object = nullptr;
  WriteHook hook;
  {
    MutexLock lock(mu_);
    object = factor_;
    hook = write_hook_;
  }
  STRIPESOLVE_CHECK(object != nullptr,
                    "upload of stripe " + std::to_string(s) + " in a read-only phase");
  STRIPESOLVE_CHECK(work.cell.i1_store == cache::kThroughN,
                    "upload of stripe " + std::to_string(s) + " that holds columns up to " +
                        std::to_string(work.cell.i1_store) + " only");
  const storage::PartLayout layout = object->part_layout(s, c0);
  STRIPESOLVE_CHECK(layout.buffer_bytes <= work.cell.bytes,
                    "cell of stripe " + std::to_string(s) + " smaller than its part");
  TraceRecorder::Span span(trace_, "io", "write", part_args(work, layout));
  // The checksum beside the write: on the disk-bound tiers the role's thread is the critical
  // resource (computed before or after the write, CRCs added 12% to a factorization on the SSD
  // tier, H200 host, n = 32768).
  std::future<uint32_t> crc;
  if (hook) {
    try {
      crc = std::async(std::launch::async, hook.checksum, work.cell);
    } catch (const std::system_error&) {
      // No thread to be had: the checksum after the write, on this thread.
    }
  }
  Status st = object->write_part(s, c0, work.cell.buffer);
  if (hook) {
    // Joined before returning: it reads the cell.
    const uint32_t value = crc.valid() ? crc.get() : hook.checksum(work.cell);
    if (st.is_ok()) st = hook.written(work.cell, value);
  }
  STRIPESOLVE_RETURN_IF_ERROR(st);
  progress_.add_io(0, layout.data_bytes);
  MutexLock lock(mu_);
  written_[s] = true;
  return Status::ok();
}

void IoRole::download(std::span<const cache::IoWork> works) {
  // A stripe's upload and its download never overlap (one cell state at a time), so the batch's
  // written flags cannot change while it is read, whatever the other I/O threads do.
  std::vector<storage::StripedMatrix*> objects;
  storage::StripedMatrix* original = nullptr;
  ReadHook hook;
  // The hook counts as in use from its copy until the batch ends (set_read_hook waits for it).
  struct HookInUse {
    IoRole* role = nullptr;
    ~HookInUse() {
      if (role == nullptr) return;
      MutexLock lock(role->mu_);
      --role->read_hook_streams_;
      role->read_hook_done_.notify_all();
    }
  } in_use;
  {
    MutexLock lock(mu_);
    original = original_;
    hook = read_hook_;
    if (hook) {
      ++read_hook_streams_;
      in_use.role = this;
    }
    for (const cache::IoWork& w : works) {
      const int64_t s = w.cell.stripe;
      objects.push_back((factor_ != nullptr && written_[s]) ? factor_ : original_);
      STRIPESOLVE_CHECK(objects.back() != nullptr,
                        "I/O role has no source for stripe " + std::to_string(s));
    }
  }
  size_t begin = 0;
  while (begin < works.size()) {
    size_t end = begin + 1;
    while (end < works.size() && objects[end] == objects[begin]) ++end;
    const Status st = read_stream(*objects[begin], works.subspan(begin, end - begin),
                                  objects[begin] == original ? hook : ReadHook());
    begin = end;
    if (!st.is_ok()) {
      // The cache has failed with `st`: the rest of the batch is not read, only reported.
      for (; begin < works.size(); ++begin) cache_.finish_io(works[begin], st);
    }
  }
}

Status IoRole::read_stream(storage::StripedMatrix& object, std::span<const cache::IoWork> works,
                           const ReadHook& hook) {
  std::vector<storage::PartRead> parts;
  std::vector<storage::PartLayout> layouts;
  for (const cache::IoWork& w : works) {
    const storage::PartLayout layout =
        object.part_layout(w.cell.stripe, w.cell.i0_store, w.cell.i1_store);
    STRIPESOLVE_CHECK(layout.buffer_bytes <= w.cell.bytes,
                      "cell of stripe " + std::to_string(w.cell.stripe) + " smaller than its part");
    parts.push_back({w.cell.stripe, w.cell.i0_store, w.cell.buffer, w.cell.i1_store});
    layouts.push_back(layout);
  }
  // Parts overlap on the disk, so each span runs from the previous arrival to its own: the io row
  // of the trace shows when each part arrived without overlapping spans.
  TraceRecorder::Clock::time_point last = TraceRecorder::Clock::now();
  std::vector<bool> reported(works.size(), false);
  Status st = object.read_parts(parts, [&](size_t k) {
    const TraceRecorder::Clock::time_point now = TraceRecorder::Clock::now();
    if (trace_ != nullptr) {
      TraceRecorder::Args args = part_args(works[k], layouts[k]);
      args.emplace_back("in stream", fmt::format("{} of {}", k + 1, works.size()));
      trace_->record("io", "read", last, now, std::move(args));
    }
    last = now;
    progress_.add_io(layouts[k].data_bytes, 0);
    if (hook) {
      hook(works[k].cell, layouts[k]);
      last = TraceRecorder::Clock::now();
      if (trace_ != nullptr)
        trace_->record("io", "read hook", now, last, part_args(works[k], layouts[k]));
    }
    reported[k] = true;
    cache_.finish_io(works[k], Status::ok());
  });
  STRIPESOLVE_CHECK(
      !st.is_ok() || std::find(reported.begin(), reported.end(), false) == reported.end(),
      "read_parts succeeded without reporting every part");
  const TraceRecorder::Clock::time_point now = TraceRecorder::Clock::now();
  for (size_t k = 0; k < works.size(); ++k) {
    if (reported[k]) continue;
    if (trace_ != nullptr) {
      TraceRecorder::Args args = part_args(works[k], layouts[k]);
      args.emplace_back("failed", "1");
      trace_->record("io", "read", last, now, std::move(args));
    }
    cache_.finish_io(works[k], st);
  }
  return st;
}

void IoRole::run() {
  for (;;) {
    const std::vector<cache::IoWork> batch = cache_.next_io_batch(kMaxBatch);
    if (batch.empty()) return;
    if (batch.front().kind == cache::IoWork::Kind::kUpload) {
      cache_.finish_io(batch.front(), upload(batch.front()));
    } else {
      download(batch);
    }
  }
}

}  // namespace stripesolve::scheduler
