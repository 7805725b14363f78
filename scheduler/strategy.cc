#include "scheduler/strategy.h"

#include <algorithm>
#include <map>
#include <utility>

namespace stripesolve::scheduler {

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kBasic:
      return "basic";
    case Strategy::kZigzag:
      return "zigzag";
    case Strategy::kMetaZigzag:
      return "meta_zigzag";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    if (strategy_name(s) == name) return s;
  }
  return Status::invalid_argument("unknown strategy '" + std::string(name) +
                                  "' (expected basic, zigzag or meta_zigzag)");
}

std::string to_string(const Task& t) {
  std::string out(t.kind == Task::Kind::kEliminate ? "E" : "U");
  out += std::to_string(t.stripe);
  if (t.kind == Task::Kind::kEliminate) return out;
  out += "<[";
  out += std::to_string(t.i_begin);
  out += ',';
  out += std::to_string(t.i_end);
  out += ')';
  return out;
}

std::string to_string(const std::vector<Task>& tasks) {
  std::string out;
  for (const Task& t : tasks) {
    if (!out.empty()) out += ' ';
    out += to_string(t);
  }
  return out;
}

int64_t meta_stripe_count(int64_t stripes, int64_t meta_stripes) {
  return (stripes + meta_stripes - 1) / meta_stripes;
}

std::vector<int64_t> meta_stripe_of(Strategy strategy, int64_t stripes, int64_t meta_stripes) {
  std::vector<int64_t> of(static_cast<size_t>(stripes));
  const int64_t sm = strategy == Strategy::kMetaZigzag ? std::max<int64_t>(1, meta_stripes) : 1;
  const int64_t nm = meta_stripe_count(stripes, sm);
  for (int64_t im = 0; im < nm; ++im) {
    for (int64_t i = im * stripes / nm; i < (im + 1) * stripes / nm; ++i)
      of[static_cast<size_t>(i)] = im;
  }
  return of;
}

namespace {

using TaskVisitor = std::function<Status(const Task&)>;

// 002 Fig 20, basic and zigzag: after eliminating I, update every J > I by I; zigzag scans the J
// stripes downward for even I and upward for odd I so that the stripes at either end are likely to
// get two updates while still cached (002 §8.4.2).
Status single_stripe_order(const TaskVisitor& visit, int64_t stripes, bool zigzag) {
  for (int64_t i = 0; i < stripes; ++i) {
    STRIPESOLVE_RETURN_IF_ERROR(visit(Task::eliminate(i)));
    if (!zigzag || i % 2 == 0) {
      for (int64_t j = i + 1; j < stripes; ++j)
        STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i, i + 1)));
    } else {
      for (int64_t j = stripes - 1; j > i; --j)
        STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i, i + 1)));
    }
  }
  return Status::ok();
}

// An upward sweep by [i0, i1) of J from the last stripe back to `first` (i1, or after the next
// meta-stripe's stripes the chain updated), except that with a lead >= 0 the next meta-stripe
// [first, i2) comes right after the first `lead` stripes (top to bottom, the stripe eliminated
// next first), the rest following upward.
Status upward_sweep(const TaskVisitor& visit, int64_t stripes, int64_t i0, int64_t i1, int64_t i2,
                    int64_t lead, int64_t first) {
  const int64_t lead_begin = lead < 0 ? first : std::max(first, stripes - lead);
  for (int64_t j = stripes - 1; j >= lead_begin; --j)
    STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i0, i1)));
  for (int64_t j = first; j < std::min(i2, lead_begin); ++j)
    STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i0, i1)));
  for (int64_t j = lead_begin - 1; j >= std::max(i2, first); --j)
    STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i0, i1)));
  return Status::ok();
}

// 002 Fig 20, meta-stripes zigzag (002 §8.4.3, Eqs 9-11): inside meta-stripe [I0, I1) the stripes
// are eliminated and update each other one I at a time; every later J is then updated by the whole
// range [I0, I1) in one task, scanned downward for even I^m and upward for odd I^m (the upward
// one with the next meta-stripe moved forward by `upward_lead`, upward_sweep()). With
// `early_next` the next meta-stripe's first stripes are updated inside the chain, by each I after
// the meta-stripe's own J, and the sweep starts after them.
Status meta_zigzag_order(const TaskVisitor& visit, int64_t stripes, int64_t meta_stripes,
                         int64_t upward_lead, int64_t early_next) {
  const int64_t nm = meta_stripe_count(stripes, meta_stripes);
  for (int64_t im = 0; im < nm; ++im) {
    const int64_t i0 = im * stripes / nm;
    const int64_t i1 = (im + 1) * stripes / nm;
    const int64_t i2 = (im + 2) * stripes / nm;
    // The sweep's first J: after the next meta-stripe's stripes the chain updates.
    const int64_t first = im < nm - 1 ? std::min(i2, i1 + std::max<int64_t>(0, early_next)) : i1;
    for (int64_t i = i0; i < i1; ++i) {
      STRIPESOLVE_RETURN_IF_ERROR(visit(Task::eliminate(i)));
      for (int64_t j = i + 1; j < first; ++j)
        STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i, i + 1)));
    }
    if (im == nm - 1) continue;
    if (im % 2 == 0) {
      for (int64_t j = first; j < stripes; ++j)
        STRIPESOLVE_RETURN_IF_ERROR(visit(Task::update(j, i0, i1)));
    } else {
      STRIPESOLVE_RETURN_IF_ERROR(upward_sweep(visit, stripes, i0, i1, i2, upward_lead, first));
    }
  }
  return Status::ok();
}

}  // namespace

Status for_each_task(Strategy strategy, int64_t stripes, int64_t meta_stripes,
                     const TaskVisitor& visit, int64_t upward_lead, int64_t early_next) {
  switch (strategy) {
    case Strategy::kBasic:
      return single_stripe_order(visit, stripes, false);
    case Strategy::kZigzag:
      return single_stripe_order(visit, stripes, true);
    case Strategy::kMetaZigzag:
      return meta_zigzag_order(visit, stripes, std::max<int64_t>(1, meta_stripes), upward_lead,
                               early_next);
  }
  return Status::ok();
}

int64_t count_tasks(Strategy strategy, int64_t stripes, int64_t meta_stripes, int64_t limit,
                    int64_t upward_lead, int64_t early_next) {
  int64_t count = 0;
  (void)for_each_task(
      strategy, stripes, meta_stripes,
      [&count, limit](const Task&) {
        // Past the limit the walk stops: the count is all the caller needs.
        return ++count > limit ? Status::resource_exhausted("past the limit") : Status::ok();
      },
      upward_lead, early_next);
  return count;
}

std::vector<Task> make_tasks(Strategy strategy, int64_t stripes, int64_t meta_stripes,
                             int64_t upward_lead, int64_t early_next) {
  std::vector<Task> out;
  (void)for_each_task(
      strategy, stripes, meta_stripes,
      [&out](const Task& t) {
        out.push_back(t);
        return Status::ok();
      },
      upward_lead, early_next);
  return out;
}

Status check_tasks(const std::vector<Task>& tasks, int64_t stripes) {
  // updated_through[J]: J has been updated by every I < updated_through[J].
  std::vector<int64_t> updated_through(stripes, 0);
  std::vector<bool> eliminated(stripes, false);
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    const std::string where = "task " + std::to_string(k) + " (" + to_string(t) + "): ";
    if (t.stripe < 0 || t.stripe >= stripes) return Status::internal(where + "stripe out of range");
    if (t.kind == Task::Kind::kEliminate) {
      if (eliminated[t.stripe]) return Status::internal(where + "stripe eliminated twice");
      if (updated_through[t.stripe] != t.stripe)
        return Status::internal(where + "eliminated before all its updates");
      eliminated[t.stripe] = true;
      continue;
    }
    if (t.i_begin >= t.i_end || t.i_end > t.stripe)
      return Status::internal(where + "bad update range");
    if (updated_through[t.stripe] != t.i_begin)
      return Status::internal(where + "update out of order (J updated through " +
                              std::to_string(updated_through[t.stripe]) + ")");
    for (int64_t i = t.i_begin; i < t.i_end; ++i) {
      if (!eliminated[i])
        return Status::internal(where + "uses stripe " + std::to_string(i) +
                                " before its elimination");
    }
    updated_through[t.stripe] = t.i_end;
  }
  for (int64_t s = 0; s < stripes; ++s) {
    if (!eliminated[s])
      return Status::internal("stripe " + std::to_string(s) + " never eliminated");
  }
  return Status::ok();
}

namespace {

struct ModelCell {
  int64_t col_begin = 0;
  uint64_t bytes = 0;
  bool dirty = false;
  int64_t count = 0;  // J stripes still needing this eliminated stripe: stuck while > 0
  uint64_t last_use = 0;
};

class CacheModel {
 public:
  // `meta_of`: each stripe's meta-stripe, to spare the next elimination's (empty: none spared).
  CacheModel(const TrafficModel& m, Traffic& t, std::vector<int64_t> meta_of)
      : m_(m), t_(t), meta_of_(std::move(meta_of)) {}

  // `stripe` has been eliminated. Eliminations go in stripe order whatever the strategy, so the
  // next one is stripe + 1.
  void eliminated(int64_t stripe) { next_elim_ = stripe + 1; }

  int64_t row_begin(int64_t s) const { return s * m_.n / m_.stripes; }
  int64_t rows(int64_t s) const { return row_begin(s + 1) - row_begin(s); }

  // Makes (stripe, from column col) resident; `pinned` stripes may not be evicted meanwhile.
  Result<ModelCell*> acquire(int64_t stripe, int64_t col, const std::vector<int64_t>& pinned) {
    ++clock_;
    auto it = cells_.find(stripe);
    if (it != cells_.end() && it->second.col_begin <= col) {
      ++t_.hits;
      it->second.last_use = clock_;
      return &it->second;
    }
    if (it != cells_.end()) evict(it);  // cannot happen with monotone columns; kept for safety
    const uint64_t bytes =
        8ull * static_cast<uint64_t>(rows(stripe)) * static_cast<uint64_t>(m_.n - col);
    while (used_ + bytes > m_.ram_budget) {
      auto victim = choose_victim(pinned, false);
      if (victim == cells_.end()) victim = choose_victim(pinned, true);
      if (victim == cells_.end()) {
        return Status::resource_exhausted(
            "cache budget of " + std::to_string(m_.ram_budget) + " bytes cannot hold stripe " +
            std::to_string(stripe) + " (" + std::to_string(bytes) + " bytes) beside " +
            std::to_string(used_) + " bytes of stuck or busy stripes");
      }
      evict(victim);
    }
    ++t_.misses;
    t_.bytes_read += bytes;
    used_ += bytes;
    ModelCell& cell = cells_[stripe];
    cell = ModelCell{col, bytes, false, 0, clock_};
    return &cell;
  }

  void evict(std::map<int64_t, ModelCell>::iterator it) {
    if (it->second.dirty) t_.bytes_written += it->second.bytes;
    used_ -= it->second.bytes;
    cells_.erase(it);
  }

  // As StripeCache::choose_victim_locked: the longest idle of the cells not spared, else the
  // latest spared one.
  std::map<int64_t, ModelCell>::iterator choose_victim(const std::vector<int64_t>& pinned,
                                                       bool from_spared) {
    auto victim = cells_.end();
    for (auto c = cells_.begin(); c != cells_.end(); ++c) {
      if (c->second.count > 0) continue;
      if (std::find(pinned.begin(), pinned.end(), c->first) != pinned.end()) continue;
      if (spared(c->first) != from_spared) continue;
      if (from_spared || victim == cells_.end() || c->second.last_use < victim->second.last_use)
        victim = c;
    }
    return victim;
  }

  bool spared(int64_t stripe) const {
    return !meta_of_.empty() && next_elim_ < m_.stripes && stripe >= next_elim_ &&
           meta_of_[static_cast<size_t>(stripe)] == meta_of_[static_cast<size_t>(next_elim_)];
  }

  ModelCell& cell(int64_t stripe) { return cells_.at(stripe); }
  bool has(int64_t stripe) const { return cells_.count(stripe) != 0; }

  void flush() {
    for (auto& [s, c] : cells_) {
      if (c.dirty) t_.bytes_written += c.bytes;
      c.dirty = false;
    }
  }

 private:
  const TrafficModel& m_;
  Traffic& t_;
  std::map<int64_t, ModelCell> cells_;
  const std::vector<int64_t> meta_of_;
  int64_t next_elim_ = 0;
  uint64_t used_ = 0;
  uint64_t clock_ = 0;
};

// One task of the replay against the cache model.
Status replay_task(const Task& task, const TrafficModel& model, CacheModel& cache,
                   std::vector<int64_t>& pinned) {
  const int64_t col = cache.row_begin(task.i_begin);
  pinned.clear();
  for (int64_t i = task.i_begin; i < task.i_end; ++i) pinned.push_back(i);
  pinned.push_back(task.stripe);
  if (task.kind == Task::Kind::kEliminate) {
    STRIPESOLVE_ASSIGN_OR_RETURN(ModelCell * cell, cache.acquire(task.stripe, col, pinned));
    cell->dirty = true;
    cell->count = model.stripes - 1 - task.stripe;
    cache.eliminated(task.stripe);
    return Status::ok();
  }
  for (int64_t i = task.i_begin; i < task.i_end; ++i) {
    if (!cache.has(i))
      return Status::internal("stuck stripe " + std::to_string(i) + " left the cache model");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(ModelCell * cell, cache.acquire(task.stripe, col, pinned));
  cell->dirty = true;
  for (int64_t i = task.i_begin; i < task.i_end; ++i) --cache.cell(i).count;
  return Status::ok();
}

Result<Traffic> replay(
    const TrafficModel& model, std::vector<int64_t> meta_of,
    const std::function<Status(const std::function<Status(const Task&)>&)>& tasks) {
  if (model.n < 1 || model.stripes < 1 || model.stripes > model.n) {
    return Status::invalid_argument(
        "traffic model needs 1 <= stripes <= n, got n=" + std::to_string(model.n) +
        " stripes=" + std::to_string(model.stripes));
  }
  Traffic t;
  t.matrix_bytes = 8ull * static_cast<uint64_t>(model.n) * static_cast<uint64_t>(model.n);
  CacheModel cache(model, t, std::move(meta_of));
  std::vector<int64_t> pinned;
  STRIPESOLVE_RETURN_IF_ERROR(
      tasks([&](const Task& task) { return replay_task(task, model, cache, pinned); }));
  if (model.factors_kept) cache.flush();
  return t;
}

}  // namespace

Result<Traffic> predict_traffic(const std::vector<Task>& tasks, const TrafficModel& model) {
  return replay(model, {}, [&tasks](const TaskVisitor& visit) {
    for (const Task& task : tasks) STRIPESOLVE_RETURN_IF_ERROR(visit(task));
    return Status::ok();
  });
}

Result<Traffic> predict_traffic(Strategy strategy, int64_t meta_stripes, const TrafficModel& model,
                                int64_t upward_lead, int64_t early_next) {
  std::vector<int64_t> meta_of;
  if (model.spare_next_meta_stripe && model.stripes >= 1)
    meta_of = meta_stripe_of(strategy, model.stripes, meta_stripes);
  return replay(model, std::move(meta_of), [&](const TaskVisitor& visit) {
    return for_each_task(strategy, model.stripes, meta_stripes, visit, upward_lead, early_next);
  });
}

}  // namespace stripesolve::scheduler
