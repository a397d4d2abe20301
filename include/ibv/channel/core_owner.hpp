// SPDX-License-Identifier: MIT
// detail::CoreOwner: the counted reference that keeps a Channel's core alive. The Channel, its
// scopes and its PendingWork handles each hold one; the core goes with the last of them.
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>

namespace ibv::detail {

class ChannelCore;

/// The count of a ChannelCore's owners. ChannelCore derives from it, so that CoreOwner counts
/// without ChannelCore's definition. It starts at 0: the first CoreOwner makes it 1.
class CoreCount {
 public:
  CoreCount() noexcept = default;
  CoreCount(const CoreCount&) = delete;
  CoreCount& operator=(const CoreCount&) = delete;
  CoreCount(CoreCount&&) = delete;
  CoreCount& operator=(CoreCount&&) = delete;

 protected:
  ~CoreCount() = default;

 private:
  friend class CoreOwner;
  std::atomic<std::size_t> owners_{0};
};

/// Deletes `core`, whose last owner has let go (defined where ChannelCore is).
void destroy_core(ChannelCore* core) noexcept;

/// A counted reference to a ChannelCore; or a borrowed one, which does not count (its holder
/// knows that something else keeps the core alive, as a scope does for the handles it keeps);
/// or null. The count is atomic, as std::shared_ptr's is (a handle may be dropped on another
/// thread than its channel's), but a copy costs one atomic add and a release one atomic
/// subtract and a test: replacing a shared_ptr with it saved 26 instructions per unpolled
/// request and 28 per coroutine await (bench/hot_path/notes.md, fourth pass).
class CoreOwner {
 public:
  CoreOwner() noexcept = default;
  /// A new owner of `core`, whose count is `count`: the same object, as ChannelCore's base
  /// (which only code that sees ChannelCore's definition can convert to).
  CoreOwner(ChannelCore* core, CoreCount* count) noexcept : core_(core), count_(count) {
    if (count_ != nullptr) count_->owners_.fetch_add(1, std::memory_order_relaxed);
  }
  /// A reference to `core` that does not own it.
  [[nodiscard]] static CoreOwner borrowing(ChannelCore& core) noexcept {
    CoreOwner borrowed;
    borrowed.core_ = &core;
    return borrowed;
  }
  CoreOwner(const CoreOwner& other) noexcept : CoreOwner(other.core_, other.count_) {}
  CoreOwner(CoreOwner&& other) noexcept
      : core_(std::exchange(other.core_, nullptr)), count_(std::exchange(other.count_, nullptr)) {}
  CoreOwner& operator=(const CoreOwner& other) noexcept {
    if (this != &other) *this = CoreOwner(other);
    return *this;
  }
  CoreOwner& operator=(CoreOwner&& other) noexcept {
    if (this != &other) {
      release();
      core_ = std::exchange(other.core_, nullptr);
      count_ = std::exchange(other.count_, nullptr);
    }
    return *this;
  }
  ~CoreOwner() { release(); }

  /// Lets go of the core (null afterwards).
  void reset() noexcept {
    release();
    core_ = nullptr;
    count_ = nullptr;
  }
  [[nodiscard]] ChannelCore* get() const noexcept { return core_; }
  ChannelCore& operator*() const noexcept { return *core_; }
  ChannelCore* operator->() const noexcept { return core_; }
  explicit operator bool() const noexcept { return core_ != nullptr; }
  /// Whether this reference counts (false: borrowed, or null).
  [[nodiscard]] bool owns() const noexcept { return count_ != nullptr; }

 private:
  void release() noexcept {
    // acq_rel: the last owner sees every other owner's writes to the core before deleting it.
    if (count_ != nullptr && count_->owners_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      destroy_core(core_);
    }
  }

  ChannelCore* core_ = nullptr;
  CoreCount* count_ = nullptr;
};

}  // namespace ibv::detail
