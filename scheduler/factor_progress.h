// The durable progress of a factorization, so that a daemon killed mid-way resumes it instead of
// starting again (issue 18).
//
// Why a resumed run gives the same bits: a stripe's state in the factor object is "updated by the
// eliminated stripes [0, step)", and for step = I + 1 (stripe I eliminated) final, with its
// pivots. The task list is a pure function of the recipe (strategy.h), and an update by a range
// applies its stripes one at a time in order (CpuElimination::update), so every stripe meets the
// same operations in the same order in any run. A run that skips exactly the tasks whose effect
// is durable, and loads the durable stripes from the factor object instead of from A, therefore
// computes what an uninterrupted run computes.
//
// Records (docs/storage-format.md, "Progress log"), in storage::ProgressLog's CRC'd frames: a
// header with the recipe, then one record per dirty part the I/O role wrote to the factor
// object: stripe, first column written, step, CRC32C of the part's bytes and, for a final stripe,
// its pivots and max|U|. Order of writes: the part, fdatasync of the factor's data files, the
// record (write, fdatasync); so a record never names bytes that are not on the disk.
//
// On resume every stripe's last record is checked against the part read back from the factor
// object: a mismatch (a write cut short by the crash, or one that ended after the last record)
// sends that stripe back to A (step 0). That recomputes more than needed, never less. Stripes
// that depend on it keep their durable state: a recomputed stripe has the same bits as before.
//
// Both tiers record and resume. A record describes a part as the I/O role writes it from RAM;
// the GPU tier's values newer on the device are not in RAM then (their cells are kOnDevice, not
// written), so its records too name only bytes that are final for their step. A resumed GPU run
// puts the stripes loaded final on the device (Elimination::load_final) and counts its stripes'
// reads from the tasks left (Elimination::begin); its updates by a range are the same GEMMs as
// before, so on the same device and configuration it computes the same bits. Not in place (A
// is being overwritten: docs/operations.md).
//
// Threads: record() runs on the I/O role's thread (IoRole's write hook) and queues the record;
// checksum() computes the part's CRC on a helper thread of the role while the cell is still the
// role's, during the write. A recorder thread (owned here)
// takes every queued record, syncs the factor's data files once and appends them with one write
// and one fdatasync (group commit), so the syncs do not hold up the I/O role's downloads. Every
// write whose record it takes has returned before, so the sync covers it. note_eliminated() runs
// on elim.I's thread. `mu_` guards the pivots, the queue and the recorder's first error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "cache/stripe_cache.h"
#include "scheduler/strategy.h"
#include "storage/progress_log.h"
#include "storage/striped_matrix.h"
#include "stripe/stripe_ops.h"

namespace stripesolve::scheduler {

// What fixes the factorization's operations: a record written under another recipe cannot be
// resumed (the run starts again).
struct FactorRecipe {
  std::string matrix_id;  // A's id (storage::MatrixInfo::id)
  int64_t n = 0;
  int64_t stripes = 0;
  stripe::PivotMode pivot = stripe::PivotMode::kRow;
  Strategy strategy = Strategy::kMetaZigzag;
  int64_t meta_stripes = 1;
  int64_t substripe_rows = 64;
  friend bool operator==(const FactorRecipe&, const FactorRecipe&) = default;
};

struct DurableStripe {
  int64_t step = 0;             // updated by [0, step); step = I + 1: final. 0: nothing durable
  int64_t col_begin = 0;        // the record's part: columns [col_begin, n)
  uint32_t crc = 0;             // CRC32C of the part's bytes
  double max_abs_u = -1;        // final stripes: max|U| of its rows (-1: not tracked)
  stripe::StripePivots pivots;  // final stripes
  bool final(int64_t stripe) const { return step == stripe + 1; }
};

struct ResumePoint {
  std::vector<DurableStripe> stripes;  // one per stripe
  std::vector<int64_t> restarted;      // stripes sent back to A: their bytes did not match
  int64_t final_stripes() const;
  // Per stripe: whether its data is read from the factor object (step > 0).
  std::vector<bool> written() const;
};

// One record of a progress log as stored (tests and tools read logs with it).
struct ProgressRecord {
  int64_t stripe = -1;  // -1: the header
  int64_t col_begin = 0;
  int64_t step = 0;
  uint32_t crc = 0;
  double max_abs_u = -1;
  std::vector<std::byte> pivots;  // stripe::serialize_pivots(), final stripes only
};
Result<ProgressRecord> parse_progress_record(std::span<const std::byte> payload);

// Which tasks a run from `steps` (one per stripe; empty: a fresh run) skips. Pure.
struct ResumePlan {
  std::vector<bool> skip;  // per task: its effect is durable, nothing to do
  // Per stripe: its elimination is durable but later updates still read it, so its part is
  // loaded (final) and held as if elim.I had just eliminated it.
  std::vector<bool> loaded_final;
  // Per stripe: the updates left that read it once eliminated (its cell's count).
  std::vector<int64_t> uses;
  int64_t skipped = 0;  // tasks skipped
};
// A step that is not the end of one of the stripe's tasks (a record made under another list)
// cannot be resumed from: such stripes are reported in *misaligned (may be null) and treated as
// step 0.
ResumePlan plan_resume(const std::vector<Task>& tasks, int64_t stripes, std::vector<int64_t> steps,
                       std::vector<int64_t>* misaligned = nullptr);

// The work a resumed run found durable and did not do again.
struct ResumeStats {
  int64_t eliminations = 0;  // stripes final (loaded or skipped, never eliminated again)
  int64_t updates = 0;       // (J, I) updates of stripes durable past I
};

class FactorProgress {
 public:
  // A new factor object: starts its log with the recipe.
  static Result<std::unique_ptr<FactorProgress>> start(storage::StripedMatrix& factor,
                                                       const FactorRecipe& recipe);
  // A reopened factor object (MatrixStore::reopen_factor): reads its log, checks the recipe
  // (kFailedPrecondition when it differs or there is no header: start again) and every stripe's
  // last record against its bytes (one read of the parts recorded).
  static Result<std::unique_ptr<FactorProgress>> resume(storage::StripedMatrix& factor,
                                                        const FactorRecipe& recipe,
                                                        ResumePoint* point);

  // Appends what is queued, then stops the recorder. Destroy before the factor object.
  ~FactorProgress();
  FactorProgress(const FactorProgress&) = delete;
  FactorProgress& operator=(const FactorProgress&) = delete;

  // elim.I has eliminated `stripe` (its record, once written back, carries these).
  void note_eliminated(int64_t stripe, const stripe::StripePivots& pivots, double max_abs_u);
  // The CRC32C of the part `cell` holds, as its record carries it. Reads only the cell's buffer
  // and the factor's layout: the I/O role runs it on a helper thread while the write of the
  // same bytes is in flight (the CRC of a 256 MiB part takes about 15 ms of a core, beside a
  // write of about 130 ms).
  uint32_t checksum(const cache::CellView& cell) const;
  // The I/O role has written `cell`'s part, whose checksum() is `crc`, to the factor object:
  // queues its record for the recorder (data sync, then the record). Returns the recorder's
  // first error, if any.
  Status record(const cache::CellView& cell, uint32_t crc);
  Status record(const cache::CellView& cell) { return record(cell, checksum(cell)); }

 private:
  FactorProgress(storage::StripedMatrix& factor, std::unique_ptr<storage::ProgressLog> log);
  void run_recorder();

  storage::StripedMatrix& factor_;
  std::unique_ptr<storage::ProgressLog> log_;
  Mutex mu_;
  CondVar queued_;
  std::map<int64_t, std::pair<stripe::StripePivots, double>> eliminated_ GUARDED_BY(mu_);
  std::vector<storage::ProgressLog::Record> pending_ GUARDED_BY(mu_);
  Status failure_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread recorder_;
};

}  // namespace stripesolve::scheduler
