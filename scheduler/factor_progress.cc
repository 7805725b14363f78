#include "scheduler/factor_progress.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "base/logging.h"
#include "storage/checksum.h"
#include "storage/data_file.h"

namespace stripesolve::scheduler {

namespace {

constexpr std::byte kHeaderTag{'H'};
constexpr std::byte kPartTag{'P'};
constexpr uint64_t kVersion = 1;

class Writer {
 public:
  void u64(uint64_t v) {
    for (int k = 0; k < 8; ++k) out_.push_back(static_cast<std::byte>((v >> (8 * k)) & 0xff));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void bytes(std::span<const std::byte> b) {
    u64(b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void tag(std::byte t) { out_.push_back(t); }
  std::vector<std::byte>& out() { return out_; }

 private:
  std::vector<std::byte> out_;
};

// Reads what Writer wrote; any read past the end sets bad().
class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  uint64_t u64() {
    if (in_.size() - pos_ < 8) {
      bad_ = true;
      return 0;
    }
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(in_[pos_ + k]) << (8 * k);
    pos_ += 8;
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() {
    const uint64_t bits = u64();
    double v = 0;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::span<const std::byte> bytes() {
    const uint64_t len = u64();
    if (bad_ || len > in_.size() - pos_) {
      bad_ = true;
      return {};
    }
    auto out = in_.subspan(pos_, len);
    pos_ += len;
    return out;
  }
  std::byte tag() {
    if (pos_ >= in_.size()) {
      bad_ = true;
      return std::byte{0};
    }
    return in_[pos_++];
  }
  bool bad() const { return bad_; }

 private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
  bool bad_ = false;
};

std::vector<std::byte> header_record(const FactorRecipe& r) {
  Writer w;
  w.tag(kHeaderTag);
  w.u64(kVersion);
  w.bytes(std::as_bytes(std::span(r.matrix_id.data(), r.matrix_id.size())));
  w.i64(r.n);
  w.i64(r.stripes);
  w.i64(static_cast<int64_t>(r.pivot));
  w.i64(static_cast<int64_t>(r.strategy));
  w.i64(r.meta_stripes);
  w.i64(r.substripe_rows);
  return std::move(w.out());
}

Result<FactorRecipe> parse_header(std::span<const std::byte> in) {
  Reader r(in);
  FactorRecipe out;
  if (r.tag() != kHeaderTag || r.u64() != kVersion) {
    return Status::failed_precondition("its progress log has no header of a known version");
  }
  const auto id = r.bytes();
  out.matrix_id.assign(reinterpret_cast<const char*>(id.data()), id.size());
  out.n = r.i64();
  out.stripes = r.i64();
  out.pivot = static_cast<stripe::PivotMode>(r.i64());
  out.strategy = static_cast<Strategy>(r.i64());
  out.meta_stripes = r.i64();
  out.substripe_rows = r.i64();
  if (r.bad()) return Status::failed_precondition("its progress log's header is cut short");
  return out;
}

// The part a cell holds: its bytes' CRC32C.
uint32_t part_crc(const storage::StripedMatrix& factor, int64_t stripe, int64_t col_begin,
                  const std::byte* buffer) {
  const storage::PartLayout layout = factor.part_layout(stripe, col_begin);
  return storage::crc32c_extend(0, buffer + layout.data_offset, layout.data_bytes);
}

}  // namespace

Result<ProgressRecord> parse_progress_record(std::span<const std::byte> payload) {
  Reader r(payload);
  const std::byte tag = r.tag();
  if (tag == kHeaderTag) return ProgressRecord{};
  ProgressRecord out;
  out.stripe = r.i64();
  out.col_begin = r.i64();
  out.step = r.i64();
  out.crc = static_cast<uint32_t>(r.u64());
  out.max_abs_u = r.f64();
  const auto pivots = r.bytes();
  out.pivots.assign(pivots.begin(), pivots.end());
  if (tag != kPartTag || r.bad()) return Status::corruption("not a progress record");
  return out;
}

int64_t ResumePoint::final_stripes() const {
  int64_t count = 0;
  for (size_t s = 0; s < stripes.size(); ++s) count += stripes[s].final(static_cast<int64_t>(s));
  return count;
}

std::vector<bool> ResumePoint::written() const {
  std::vector<bool> out(stripes.size());
  for (size_t s = 0; s < stripes.size(); ++s) out[s] = stripes[s].step > 0;
  return out;
}

ResumePlan plan_resume(const std::vector<Task>& tasks, int64_t stripes, std::vector<int64_t> steps,
                       std::vector<int64_t>* misaligned) {
  const size_t ns = static_cast<size_t>(stripes);
  steps.resize(ns, 0);
  // Durable steps are ends of a stripe's tasks (a part is written back between its tasks).
  std::vector<std::set<int64_t>> ends(ns, std::set<int64_t>{0});
  for (const Task& t : tasks) ends[static_cast<size_t>(t.stripe)].insert(t.i_end);
  for (size_t s = 0; s < ns; ++s) {
    if (ends[s].count(steps[s]) == 0) {
      if (misaligned != nullptr) misaligned->push_back(static_cast<int64_t>(s));
      steps[s] = 0;
    }
  }
  ResumePlan plan;
  plan.skip.assign(tasks.size(), false);
  plan.loaded_final.assign(ns, false);
  plan.uses.assign(ns, 0);
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    plan.skip[k] = steps[static_cast<size_t>(t.stripe)] >= t.i_end;
    if (plan.skip[k]) {
      ++plan.skipped;
    } else if (t.kind == Task::Kind::kUpdate) {
      for (int64_t i = t.i_begin; i < t.i_end; ++i) ++plan.uses[static_cast<size_t>(i)];
    }
  }
  // A durable elimination whose stripe later updates still read: load it instead of skipping.
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    if (t.kind == Task::Kind::kEliminate && plan.skip[k] &&
        plan.uses[static_cast<size_t>(t.stripe)] > 0) {
      plan.skip[k] = false;
      --plan.skipped;
      plan.loaded_final[static_cast<size_t>(t.stripe)] = true;
    }
  }
  return plan;
}

Result<std::unique_ptr<FactorProgress>> FactorProgress::start(storage::StripedMatrix& factor,
                                                              const FactorRecipe& recipe) {
  std::vector<storage::ProgressLog::Record> records;
  STRIPESOLVE_ASSIGN_OR_RETURN(auto log,
                               storage::ProgressLog::open(factor.progress_path(), 0600, &records));
  if (!records.empty()) {
    return Status::internal("factor '" + factor.info().name + "' is new but has a progress log");
  }
  STRIPESOLVE_RETURN_IF_ERROR(log->append(header_record(recipe)));
  return std::unique_ptr<FactorProgress>(new FactorProgress(factor, std::move(log)));
}

Result<std::unique_ptr<FactorProgress>> FactorProgress::resume(storage::StripedMatrix& factor,
                                                               const FactorRecipe& recipe,
                                                               ResumePoint* point) {
  const std::string name = factor.info().name;
  std::vector<storage::ProgressLog::Record> records;
  uint64_t dropped = 0;
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto log, storage::ProgressLog::open(factor.progress_path(), 0600, &records, &dropped));
  static const auto logs = logger("scheduler");
  if (dropped > 0)
    logs->warn("factor '{}': a torn record of {} bytes ends its progress log; cut off", name,
               dropped);
  if (records.empty()) return Status::failed_precondition("its progress log is empty");
  STRIPESOLVE_ASSIGN_OR_RETURN(FactorRecipe recorded, parse_header(records.front()));
  if (!(recorded == recipe)) {
    return Status::failed_precondition(
        "it was begun with other parameters (matrix id, order, "
        "pivoting, strategy or plan)");
  }
  ResumePoint p;
  p.stripes.resize(static_cast<size_t>(recipe.stripes));
  for (size_t k = 1; k < records.size(); ++k) {
    auto record = parse_progress_record(records[k]);
    const int64_t s = record.is_ok() ? record->stripe : -1;
    if (s < 0 || s >= recipe.stripes || record->step < 1 || record->step > s + 1 ||
        record->col_begin < 0 || record->col_begin > recipe.n) {
      return Status::failed_precondition(fmt::format("its progress record {} is malformed", k));
    }
    DurableStripe d;
    d.col_begin = record->col_begin;
    d.step = record->step;
    d.crc = record->crc;
    d.max_abs_u = record->max_abs_u;
    if (d.final(s)) {
      STRIPESOLVE_ASSIGN_OR_RETURN(d.pivots, stripe::parse_pivots(record->pivots));
    }
    p.stripes[static_cast<size_t>(s)] = std::move(d);  // the last record of a stripe wins
  }
  // Steps the task list does not end a task at, then bytes that do not match: back to A. (The
  // list without early_next: a GPU-tier stripe durable part way through its updates
  // by the previous meta-stripe goes back to A too, which is safe.)
  std::vector<int64_t> steps;
  for (const DurableStripe& d : p.stripes) steps.push_back(d.step);
  std::vector<int64_t> misaligned;
  (void)plan_resume(make_tasks(recipe.strategy, recipe.stripes, recipe.meta_stripes),
                    recipe.stripes, steps, &misaligned);
  for (int64_t s : misaligned) {
    p.stripes[static_cast<size_t>(s)] = DurableStripe{};
    p.restarted.push_back(s);
  }
  uint64_t largest = 0;
  for (int64_t s = 0; s < recipe.stripes; ++s) {
    largest = std::max(largest, factor.part_layout(s, 0).buffer_bytes);
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::AlignedBuffer buffer,
                               storage::AlignedBuffer::allocate(largest));
  for (int64_t s = 0; s < recipe.stripes; ++s) {
    DurableStripe& d = p.stripes[static_cast<size_t>(s)];
    if (d.step == 0) continue;
    STRIPESOLVE_RETURN_IF_ERROR(factor.read_part(s, d.col_begin, buffer.data()));
    if (part_crc(factor, s, d.col_begin, buffer.data()) != d.crc) {
      logs->warn(
          "factor '{}': stripe {} does not match its progress record (a write the crash cut "
          "short); it restarts from the matrix",
          name, s);
      d = DurableStripe{};
      p.restarted.push_back(s);
    }
  }
  std::sort(p.restarted.begin(), p.restarted.end());
  *point = std::move(p);
  return std::unique_ptr<FactorProgress>(new FactorProgress(factor, std::move(log)));
}

FactorProgress::FactorProgress(storage::StripedMatrix& factor,
                               std::unique_ptr<storage::ProgressLog> log)
    : factor_(factor), log_(std::move(log)), recorder_([this] { run_recorder(); }) {}

FactorProgress::~FactorProgress() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  queued_.notify_all();
  recorder_.join();
}

void FactorProgress::run_recorder() {
  MutexLock lock(mu_);
  for (;;) {
    while (!stop_ && pending_.empty()) queued_.wait(lock);
    if (pending_.empty()) return;  // stopped, nothing left
    std::vector<storage::ProgressLog::Record> batch;
    batch.swap(pending_);
    lock.unlock();
    // Order of writes: the parts these records name were written before they were queued; make
    // them durable, then the records.
    Status st = factor_.sync_data();
    if (st.is_ok()) st = log_->append(batch);
    lock.lock();
    if (!st.is_ok() && failure_.is_ok()) failure_ = st;
  }
}

void FactorProgress::note_eliminated(int64_t stripe, const stripe::StripePivots& pivots,
                                     double max_abs_u) {
  MutexLock lock(mu_);
  eliminated_[stripe] = {pivots, max_abs_u};
}

uint32_t FactorProgress::checksum(const cache::CellView& cell) const {
  return part_crc(factor_, cell.stripe, cell.i0_store, cell.buffer);
}

Status FactorProgress::record(const cache::CellView& cell, uint32_t crc) {
  const int64_t s = cell.stripe;
  // The cell's elimination range is that of its last task (a written-back cell is between
  // tasks): an elimination (I, I + 1) makes it final, an update by [I0, I1) leaves it at I1.
  const bool final = cell.elim_begin == s && cell.elim_end == s + 1;
  Writer w;
  w.tag(kPartTag);
  w.i64(s);
  w.i64(cell.i0_store);
  w.i64(cell.elim_end);
  w.u64(crc);
  if (final) {
    std::pair<stripe::StripePivots, double> e;
    {
      MutexLock lock(mu_);
      auto it = eliminated_.find(s);
      if (it == eliminated_.end()) {
        return Status::internal(
            fmt::format("factor '{}': stripe {} written back final but never "
                        "eliminated",
                        factor_.info().name, s));
      }
      e = it->second;
    }
    w.f64(e.second);
    w.bytes(stripe::serialize_pivots(e.first));
  } else {
    w.f64(-1);
    w.bytes({});
  }
  MutexLock lock(mu_);
  if (!failure_.is_ok()) return failure_;
  pending_.push_back(std::move(w.out()));
  queued_.notify_one();
  return Status::ok();
}

}  // namespace stripesolve::scheduler
