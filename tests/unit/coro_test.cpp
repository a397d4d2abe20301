// SPDX-License-Identifier: MIT
// Unit tests of the coroutine layer's logic that needs no device: Task (lazy start, values,
// exceptions, destruction unfinished) and EventLoop (spawning, passes, timeouts, reaping),
// with a test awaitable (Trigger) in place of a posted request.
#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/coro/event_loop.hpp"
#include "ibv/coro/task.hpp"
#include "ibv/error.hpp"

namespace {

/// WaiterOps of a test awaitable with no fd: `Ready(self)` says when to resume.
template <bool (*Ready)(void*)>
constexpr ibv::detail::WaiterOps kOps{
    .ready = [](void* self, std::chrono::steady_clock::time_point /*now*/) { return Ready(self); },
    .deadline = [](const void* /*self*/) { return std::chrono::steady_clock::time_point::max(); },
    .fd = [](const void* /*self*/) { return -1; },
    .arm = [](void* /*self*/) {},
    .consume = [](void* /*self*/) {},
};

/// A flag a task can co_await: the loop resumes the task on the first pass after fire(), as it
/// resumes a task whose posted request has completed.
class Trigger {
 public:
  void fire() noexcept { fired_ = true; }

  class Awaiter {
   public:
    explicit Awaiter(const Trigger& trigger) noexcept : trigger_(&trigger) {}
    Awaiter(const Awaiter&) = delete;
    Awaiter& operator=(const Awaiter&) = delete;
    Awaiter(Awaiter&&) = delete;
    Awaiter& operator=(Awaiter&&) = delete;
    ~Awaiter() {
      if (loop_ != nullptr) loop_->unwatch(this);
    }
    [[nodiscard]] bool await_ready() const noexcept { return trigger_->fired_; }
    template <ibv::detail::TaskPromise Promise>
    void await_suspend(std::coroutine_handle<Promise> coroutine) {
      coroutine.promise().loop()->watch(this, kOps<&Awaiter::ready>, coroutine);
      loop_ = coroutine.promise().loop();
    }
    void await_resume() noexcept { loop_ = nullptr; }
    static bool ready(void* self) { return static_cast<Awaiter*>(self)->trigger_->fired_; }

   private:
    const Trigger* trigger_;
    ibv::EventLoop* loop_ = nullptr;
  };
  [[nodiscard]] Awaiter operator co_await() const noexcept { return Awaiter(*this); }

 private:
  bool fired_ = false;
};

/// Suspends the task until the loop's next pass (which finds it ready at once).
class NextPass {
 public:
  NextPass() = default;
  NextPass(const NextPass&) = delete;
  NextPass& operator=(const NextPass&) = delete;
  NextPass(NextPass&&) = delete;
  NextPass& operator=(NextPass&&) = delete;
  ~NextPass() {
    if (loop_ != nullptr) loop_->unwatch(this);
  }
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static): called on the awaitable
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <ibv::detail::TaskPromise Promise>
  void await_suspend(std::coroutine_handle<Promise> coroutine) {
    coroutine.promise().loop()->watch(this, kOps<&NextPass::ready>, coroutine);
    loop_ = coroutine.promise().loop();
  }
  void await_resume() noexcept { loop_ = nullptr; }
  static bool ready(void* /*self*/) { return true; }

 private:
  ibv::EventLoop* loop_ = nullptr;
};

/// An operation that has always completed by the time it is awaited: like AsyncWork for a
/// completed request, it continues the task at once while the loop grants an inline turn, and
/// otherwise suspends it until the next pass.
class Completed {
 public:
  Completed() = default;
  Completed(const Completed&) = delete;
  Completed& operator=(const Completed&) = delete;
  Completed(Completed&&) = delete;
  Completed& operator=(Completed&&) = delete;
  ~Completed() {
    if (loop_ != nullptr) loop_->unwatch(this);
  }
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static): called on the awaitable
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  template <ibv::detail::TaskPromise Promise>
  bool await_suspend(std::coroutine_handle<Promise> coroutine) {
    ibv::EventLoop* loop = coroutine.promise().loop();
    if (loop->take_inline_turn()) return false;
    loop->watch(this, kOps<&Completed::ready>, coroutine);
    loop_ = loop;
    return true;
  }
  void await_resume() noexcept { loop_ = nullptr; }
  static bool ready(void* /*self*/) { return true; }

 private:
  ibv::EventLoop* loop_ = nullptr;
};

/// Counts its own destruction (to see a destroyed frame's locals destroyed).
struct Guard {
  explicit Guard(int& destroyed) noexcept : destroyed_(&destroyed) {}
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  Guard(Guard&&) = delete;
  Guard& operator=(Guard&&) = delete;
  ~Guard() { ++*destroyed_; }
  int* destroyed_;
};

ibv::Task<int> answer() { co_return 42; }

ibv::Task<int> add_after(const Trigger& trigger, int a, int b) {
  co_await trigger;
  co_return a + b;
}

ibv::Task<std::string> failing_after(const Trigger& trigger) {
  co_await trigger;
  throw std::runtime_error("failed inside");
}

TEST(Task, IsLazyAndGivesItsValueToTheAwaitingTask) {
  bool started = false;
  int result = 0;
  auto inner = [&started]() -> ibv::Task<int> {
    started = true;
    co_return 7;
  };
  auto outer = [&]() -> ibv::Task<> { result = co_await inner() + co_await answer(); };
  ibv::Task<> task = outer();
  EXPECT_FALSE(started);
  ibv::EventLoop loop;
  loop.spawn(std::move(task));
  EXPECT_FALSE(started) << "spawned tasks start on the next pass";
  EXPECT_TRUE(loop.run());
  EXPECT_TRUE(started);
  EXPECT_EQ(result, 49);
  EXPECT_EQ(loop.task_count(), 0U);
}

TEST(Task, AwaitsSuspendedTasksAndPropagatesTheirExceptions) {
  Trigger trigger;
  int sum = 0;
  std::string caught;
  auto outer = [&]() -> ibv::Task<> {
    sum = co_await add_after(trigger, 2, 3);
    try {
      co_await failing_after(trigger);
    } catch (const std::runtime_error& error) {
      caught = error.what();
    }
  };
  ibv::EventLoop loop;
  loop.spawn(outer());
  EXPECT_EQ(loop.run_once(), 1U);  // started, suspended on the trigger
  EXPECT_EQ(loop.run_once(), 0U);
  EXPECT_EQ(loop.task_count(), 1U);
  trigger.fire();
  EXPECT_EQ(loop.run_once(), 1U);
  EXPECT_EQ(loop.task_count(), 0U);
  EXPECT_EQ(sum, 5);
  EXPECT_EQ(caught, "failed inside");
}

TEST(EventLoop, ATaskContinuesPastCompletedAwaitsForItsInlineTurnsThenLetsTheOthersRun) {
  constexpr int kAwaits = 300;
  std::vector<char> order;  // which task went on after each of its awaits
  auto busy = [&order](char name) -> ibv::Task<> {
    for (int i = 0; i < kAwaits; ++i) {
      co_await Completed{};
      order.push_back(name);
    }
  };
  ibv::EventLoop loop;
  loop.spawn(busy('a'));
  loop.spawn(busy('b'));
  std::size_t passes = 0;
  while (loop.task_count() > 0 && passes < 100) {
    loop.run_once();
    ++passes;
  }
  ASSERT_EQ(loop.task_count(), 0U);
  ASSERT_EQ(order.size(), 2U * kAwaits);
  // Runs of one task's awaits in a row: the first resume continues past kInlineTurns awaits,
  // every later one past the await it was suspended on plus kInlineTurns; never more.
  std::vector<std::size_t> runs{1};
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (order[i] == order[i - 1]) {
      ++runs.back();
    } else {
      runs.push_back(1);
    }
  }
  const std::size_t turns = ibv::EventLoop::kInlineTurns;
  EXPECT_EQ(runs.front(), turns) << "the first resume goes on inline, then yields";
  EXPECT_EQ(*std::max_element(runs.begin(), runs.end()), turns + 1);
  EXPECT_EQ(order.front(), 'a');
  EXPECT_EQ(order[turns], 'b') << "b runs before a goes on";
  // 300 awaits each, at most 65 a resume: a handful of passes, not one per await.
  EXPECT_LE(passes, 8U);
}

TEST(EventLoop, RethrowsTheExceptionOfASpawnedTaskAndKeepsTheOthers) {
  Trigger trigger;
  bool other_done = false;
  auto fails = []() -> ibv::Task<> {
    throw std::runtime_error("top-level failure");
    co_return;
  };
  auto waits = [&]() -> ibv::Task<> {
    co_await trigger;
    other_done = true;
  };
  ibv::EventLoop loop;
  loop.spawn(waits());
  loop.spawn(fails());
  EXPECT_THROW(
      {
        try {
          loop.run();
        } catch (const std::runtime_error& error) {
          EXPECT_STREQ(error.what(), "top-level failure");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(loop.task_count(), 1U);
  trigger.fire();
  EXPECT_TRUE(loop.run());
  EXPECT_TRUE(other_done);
}

TEST(EventLoop, DestroysUnfinishedTasksWithTheirLocalsAndAwaitedTasks) {
  int destroyed = 0;
  bool resumed = false;
  Trigger never;
  auto inner = [&]() -> ibv::Task<int> {
    const Guard guard(destroyed);
    co_await never;
    resumed = true;
    co_return 1;
  };
  auto outer = [&]() -> ibv::Task<> {
    const Guard guard(destroyed);
    co_await inner();
    resumed = true;
  };
  {
    ibv::EventLoop loop;
    loop.spawn(outer());
    loop.spawn(outer());
    EXPECT_FALSE(loop.run(std::chrono::milliseconds(20)));
    EXPECT_EQ(loop.task_count(), 2U);
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 4);
  EXPECT_FALSE(resumed);
}

TEST(Task, DestroyedUnstartedNeverRuns) {
  bool ran = false;
  int destroyed = 0;
  {
    auto body = [&]() -> ibv::Task<> {
      ran = true;
      co_return;
    };
    ibv::Task<> task = body();
    ibv::Task<> moved = std::move(task);
    EXPECT_FALSE(task.valid());  // NOLINT(bugprone-use-after-move): checking the move
    EXPECT_TRUE(moved.valid());
    auto with_guard = [&]() -> ibv::Task<> {
      const Guard guard(destroyed);
      co_return;
    };
    ibv::Task<> unstarted = with_guard();
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(destroyed, 0) << "the body (and its locals) never ran";
}

TEST(EventLoop, DestroyedWithATaskWhoseEventHappenedDoesNotResumeIt) {
  Trigger trigger;
  int destroyed = 0;
  auto waits = [&]() -> ibv::Task<> {
    const Guard guard(destroyed);
    co_await trigger;
    ADD_FAILURE() << "resumed by a loop being destroyed";
  };
  {
    ibv::EventLoop loop;
    loop.spawn(waits());
    loop.run_once();
    trigger.fire();
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(EventLoop, ChainsOfTasksThatFinishAtOnceDoNotGrowTheStack) {
  constexpr int kCount = 200'000;
  long long sum = 0;
  auto outer = [&]() -> ibv::Task<> {
    for (int i = 0; i < kCount; ++i) sum += co_await answer();
  };
  ibv::EventLoop loop;
  loop.spawn(outer());
  EXPECT_TRUE(loop.run());
  EXPECT_EQ(sum, 42LL * kCount);
}

TEST(EventLoop, ResumesEachTaskWhenItsOwnEventHappens) {
  constexpr std::size_t kTasks = 8;
  std::vector<Trigger> triggers(kTasks);
  std::vector<std::size_t> order;
  auto waiter = [&](std::size_t index) -> ibv::Task<> {
    co_await triggers[index];
    order.push_back(index);
  };
  auto firer = [&]() -> ibv::Task<> {
    // Fires in reverse order, one per pass (each wait below needs one more pass).
    for (std::size_t i = kTasks; i > 0; --i) {
      triggers[i - 1].fire();
      co_await NextPass();
    }
  };
  ibv::EventLoop loop;
  for (std::size_t i = 0; i < kTasks; ++i) loop.spawn(waiter(i));
  loop.spawn(firer());
  EXPECT_TRUE(loop.run(std::chrono::seconds(10)));
  std::vector<std::size_t> expected;
  for (std::size_t i = kTasks; i > 0; --i) expected.push_back(i - 1);
  EXPECT_EQ(order, expected);
}

TEST(EventLoop, TasksMaySpawnTasks) {
  int runs = 0;
  ibv::EventLoop loop;
  std::function<ibv::Task<>(int)> spawner = [&](int depth) -> ibv::Task<> {
    ++runs;
    if (depth > 0) loop.spawn(spawner(depth - 1));
    co_return;
  };
  loop.spawn(spawner(5));
  EXPECT_TRUE(loop.run());
  EXPECT_EQ(runs, 6);
}

TEST(EventLoop, RejectsRunningItselfFromATaskAndMovedFromTasks) {
  ibv::EventLoop loop;
  bool threw = false;
  auto reenters = [&]() -> ibv::Task<> {
    try {
      loop.run_once();
    } catch (const ibv::Error& error) {
      threw = error.kind() == ibv::ErrorKind::state;
    }
    co_return;
  };
  loop.spawn(reenters());
  EXPECT_TRUE(loop.run());
  EXPECT_TRUE(threw);
  ibv::Task<> empty;
  EXPECT_THROW(loop.spawn(std::move(empty)), ibv::Error);
}

TEST(EventLoop, ASleepingLoopRefusesAnAwaitableWithoutAnFd) {
  Trigger trigger;
  std::optional<ibv::ErrorKind> kind;
  auto waits = [&]() -> ibv::Task<> {
    try {
      co_await trigger;
    } catch (const ibv::Error& error) {
      kind = error.kind();
    }
  };
  ibv::EventLoop loop(ibv::WaitMode::block());
  loop.spawn(waits());
  EXPECT_TRUE(loop.run(std::chrono::seconds(10)));
  EXPECT_EQ(kind, ibv::ErrorKind::state);
}

TEST(EventLoop, WithNothingSuspendedHasNoFdsAndNoDeadline) {
  ibv::EventLoop loop(ibv::WaitMode::block());
  EXPECT_TRUE(loop.completion_fds().empty());
  EXPECT_FALSE(loop.next_deadline().has_value());
  EXPECT_TRUE(loop.arm_for_sleep());
  EXPECT_TRUE(loop.run());  // no tasks: returns at once
}

}  // namespace
