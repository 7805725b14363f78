// The resume logic of factor_progress.h: which tasks a resumed run skips for given durable steps,
// and a stripe whose bytes do not match its last record (a torn or unrecorded write) sent back
// to the matrix.
#include "scheduler/factor_progress.h"

#include <fstream>

#include <gtest/gtest.h>

#include "scheduler/test_store.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {
namespace {

std::string skipped_tasks(const std::vector<Task>& tasks, const ResumePlan& plan) {
  std::vector<Task> out;
  for (size_t k = 0; k < tasks.size(); ++k) {
    if (plan.skip[k]) out.push_back(tasks[k]);
  }
  return to_string(out);
}

TEST(PlanResumeTest, AFreshRunSkipsNothingAndCountsEveryLaterStripe) {
  const auto tasks = make_tasks(Strategy::kMetaZigzag, 7, 3);
  const ResumePlan plan = plan_resume(tasks, 7, {});
  EXPECT_EQ(plan.skipped, 0);
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_EQ(plan.uses[static_cast<size_t>(i)], 7 - 1 - i);
    EXPECT_FALSE(plan.loaded_final[static_cast<size_t>(i)]);
  }
}

TEST(PlanResumeTest, SkipsExactlyTheDurableTasks) {
  // 6 stripes, meta-stripes of 2: E0 U1<[0,1) E1 U2<[0,2) U3<[0,2) U4<[0,2) U5<[0,2) E2 U3<[2,3)
  // E3 U5<[2,4) U4<[2,4) E4 U5<[4,5) E5.
  const auto tasks = make_tasks(Strategy::kMetaZigzag, 6, 2);
  ASSERT_EQ(to_string(tasks),
            "E0 U1<[0,1) E1 U2<[0,2) U3<[0,2) U4<[0,2) U5<[0,2) E2 U3<[2,3) E3 U5<[2,4) U4<[2,4) "
            "E4 U5<[4,5) E5");
  // Stripes 0 and 1 final, 2, 3 and 5 updated by [0, 2), stripe 4 nothing durable.
  std::vector<int64_t> misaligned;
  const ResumePlan plan = plan_resume(tasks, 6, {1, 2, 2, 2, 0, 2}, &misaligned);
  EXPECT_TRUE(misaligned.empty());
  EXPECT_EQ(skipped_tasks(tasks, plan), "U1<[0,1) U2<[0,2) U3<[0,2) U5<[0,2)");
  // Stripe 4 still needs 0 and 1: they are loaded final, not eliminated again.
  EXPECT_EQ(plan.loaded_final, (std::vector<bool>{true, true, false, false, false, false}));
  EXPECT_EQ(plan.uses, (std::vector<int64_t>{1, 1, 3, 2, 1, 0}));

  // Once stripe 4 is updated by [0, 2) too, 0 and 1 are needed by nobody: skipped outright.
  const ResumePlan later = plan_resume(tasks, 6, {1, 2, 2, 2, 2, 2});
  EXPECT_EQ(skipped_tasks(tasks, later), "E0 U1<[0,1) E1 U2<[0,2) U3<[0,2) U4<[0,2) U5<[0,2)");
  EXPECT_EQ(later.loaded_final, std::vector<bool>(6, false));
}

TEST(PlanResumeTest, AStepInsideATaskRestartsThatStripe) {
  const auto tasks = make_tasks(Strategy::kMetaZigzag, 6, 2);
  std::vector<int64_t> misaligned;
  // Stripe 4's tasks end at 2, 4 and 5 (its elimination): step 1 is none of them.
  const ResumePlan plan = plan_resume(tasks, 6, {1, 0, 0, 0, 1, 0}, &misaligned);
  EXPECT_EQ(misaligned, std::vector<int64_t>{4});
  EXPECT_EQ(skipped_tasks(tasks, plan), "");
  EXPECT_TRUE(plan.loaded_final[0]);
}

// Every run from any durable state (a prefix of the task list executed, each stripe durable at
// some earlier task end) hands out a list the scheduler can run: each remaining update reads
// stripes that are eliminated or loaded before it, and each stripe's remaining tasks continue
// from its step.
TEST(PlanResumeTest, TheRemainingTasksAreConsistentForEveryPrefix) {
  const int64_t n = 7;
  const auto tasks = make_tasks(Strategy::kMetaZigzag, n, 3);
  for (size_t done = 0; done <= tasks.size(); ++done) {
    std::vector<int64_t> steps(n, 0);
    for (size_t k = 0; k < done; ++k) {
      // Durable every other task of a stripe: an older state than the one computed.
      if (k % 2 == 0) steps[static_cast<size_t>(tasks[k].stripe)] = tasks[k].i_end;
    }
    const ResumePlan plan = plan_resume(tasks, n, steps);
    std::vector<int64_t> at = steps;
    std::vector<bool> ready(n, false);
    for (size_t k = 0; k < tasks.size(); ++k) {
      const Task& t = tasks[k];
      const size_t s = static_cast<size_t>(t.stripe);
      if (plan.skip[k]) {
        ASSERT_GE(steps[s], t.i_end) << done << " " << to_string(t);
        continue;
      }
      if (t.kind == Task::Kind::kEliminate) {
        ASSERT_TRUE(at[s] == t.stripe || plan.loaded_final[s]) << done << " " << to_string(t);
        ready[s] = true;
        continue;
      }
      ASSERT_EQ(at[s], t.i_begin) << done << " " << to_string(t);
      for (int64_t i = t.i_begin; i < t.i_end; ++i) ASSERT_TRUE(ready[static_cast<size_t>(i)]);
      at[s] = t.i_end;
    }
  }
}

class FactorProgressTest : public ::testing::Test, protected TestStore {
 protected:
  void SetUp() override {
    open_store("factor_progress_test");
    ASSERT_TRUE(store_->create_generated("A", 60, {"uniform", 3}, 20).is_ok());
    a_ = store_->open_matrix("A").value();
    factor_ = store_->create_factor("A.lu.row", *a_).value();
    recipe_ = {a_->info().id, 60, 3, stripe::PivotMode::kRow, Strategy::kMetaZigzag, 1, 64};
  }
  void TearDown() override {
    factor_.reset();
    a_.reset();
    close_store();
  }

  // Writes stripe `s` of A, plus `delta`, from column `col` to the factor as a cell after a task
  // [elim_begin, elim_end) would, and records it when `progress` is given.
  void write(FactorProgress* progress, int64_t s, int64_t col, int64_t elim_begin, int64_t elim_end,
             double delta) {
    const storage::PartLayout layout = factor_->part_layout(s, col);
    auto buffer = storage::AlignedBuffer::allocate(layout.buffer_bytes).value();
    ASSERT_TRUE(a_->read_part(s, col, buffer.data()).is_ok());
    auto* values = reinterpret_cast<double*>(buffer.data() + layout.data_offset);
    for (uint64_t k = 0; k < layout.data_bytes / 8; ++k) values[k] += delta;
    ASSERT_TRUE(factor_->write_part(s, col, buffer.data()).is_ok());
    if (progress == nullptr) return;
    const cache::CellView cell{s,          col,      buffer.data(), layout.buffer_bytes,
                               elim_begin, elim_end, true};
    ASSERT_TRUE(progress->record(cell).is_ok());
  }

  std::unique_ptr<storage::StripedMatrix> a_;
  std::unique_ptr<storage::StripedMatrix> factor_;
  FactorRecipe recipe_;
};

TEST_F(FactorProgressTest, RecordsComeBackAndATornStripeGoesBackToTheMatrix) {
  // 3 stripes, zigzag: E0 U1<[0,1) U2<[0,1) E1 U2<[1,2) E2.
  const stripe::StripePivots pivots{stripe::PivotMode::kRow, 0, {3, 1, 2}};
  {
    auto progress = FactorProgress::start(*factor_, recipe_);
    ASSERT_TRUE(progress.is_ok()) << progress.status().to_string();
    (*progress)->note_eliminated(0, pivots, 2.5);
    write(progress->get(), 0, 0, 0, 1, 1.0);
    write(progress->get(), 1, 0, 0, 1, 2.0);
    write(progress->get(), 2, 0, 0, 1, 3.0);
    // Stripe 2 written again from column 20 (after its update by stripe 1), and the crash
    // comes before its record; then a record torn half way.
    write(nullptr, 2, 20, 1, 2, 4.0);
  }
  const auto frame = storage::ProgressLog::frame(std::vector<std::byte>(40, std::byte{7}));
  std::ofstream(factor_->progress_path(), std::ios::binary | std::ios::app)
      .write(reinterpret_cast<const char*>(frame.data()), 30);

  ResumePoint point;
  auto resumed = FactorProgress::resume(*factor_, recipe_, &point);
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().to_string();
  ASSERT_EQ(point.stripes.size(), 3u);
  EXPECT_TRUE(point.stripes[0].final(0));
  EXPECT_EQ(point.stripes[0].pivots.swaps, pivots.swaps);
  EXPECT_EQ(point.stripes[0].max_abs_u, 2.5);
  EXPECT_EQ(point.stripes[1].step, 1);
  EXPECT_EQ(point.stripes[2].step, 0);  // its bytes are not those of its record
  EXPECT_EQ(point.restarted, std::vector<int64_t>{2});
  EXPECT_EQ(point.written(), (std::vector<bool>{true, true, false}));
  resumed->reset();

  // A recipe that differs (another plan) cannot resume.
  FactorRecipe other = recipe_;
  other.meta_stripes = 2;
  auto refused = FactorProgress::resume(*factor_, other, &point);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stripesolve::scheduler
