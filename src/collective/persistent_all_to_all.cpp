// SPDX-License-Identifier: MIT
// PersistentAllToAll and AllToAllRound: handles on the collective's core
// (collective/all_to_all_core.hpp), which does the work.
#include "ibv/collective/persistent_all_to_all.hpp"

#include <utility>

#include "collective/all_to_all_core.hpp"
#include "detail/moved_from.hpp"

namespace ibv::net {
namespace {

/// The core of a PersistentAllToAll, for `call`; throws ibv::Error (state) for a moved-from
/// one. A test of the pointer every call loads anyway.
detail::AllToAllCore& core_of(const std::shared_ptr<detail::AllToAllCore>& core, const char* call) {
  if (!core) [[unlikely]]
    ibv::detail::throw_moved_from(call, "this PersistentAllToAll");
  return *core;
}

}  // namespace

PersistentAllToAll::PersistentAllToAll(Node& node, Bootstrap& bootstrap,
                                       const MemoryRegion& send_memory,
                                       const MemoryRegion& receive_memory,
                                       const AllToAllSettings& settings)
    : core_(std::make_shared<detail::AllToAllCore>(node, bootstrap, send_memory, receive_memory,
                                                   settings)) {}
PersistentAllToAll::PersistentAllToAll(PersistentAllToAll&&) noexcept = default;
PersistentAllToAll& PersistentAllToAll::operator=(PersistentAllToAll&&) noexcept = default;
PersistentAllToAll::~PersistentAllToAll() = default;

void PersistentAllToAll::start(std::span<const std::span<const std::byte>> parts) {
  core_of(core_, "PersistentAllToAll::start").start(parts);
}
std::optional<AllToAllRound> PersistentAllToAll::poll() {
  return core_of(core_, "PersistentAllToAll::poll").poll();
}
AllToAllRound PersistentAllToAll::wait(Timeout timeout) {
  return core_of(core_, "PersistentAllToAll::wait").wait(timeout);
}
AllToAllRound PersistentAllToAll::run(std::span<const std::span<const std::byte>> parts,
                                      Timeout timeout) {
  detail::AllToAllCore& core = core_of(core_, "PersistentAllToAll::run");
  core.start(parts);
  return core.wait(timeout);
}

std::uint32_t PersistentAllToAll::rank() const {
  return core_of(core_, "PersistentAllToAll::rank").rank();
}
std::uint32_t PersistentAllToAll::world_size() const {
  return core_of(core_, "PersistentAllToAll::world_size").world_size();
}
const AllToAllSettings& PersistentAllToAll::settings() const {
  return core_of(core_, "PersistentAllToAll::settings").settings();
}
std::uint64_t PersistentAllToAll::rounds_started() const {
  return core_of(core_, "PersistentAllToAll::rounds_started").rounds_started();
}
bool PersistentAllToAll::failed() const {
  return core_of(core_, "PersistentAllToAll::failed").failed();
}
int PersistentAllToAll::completion_fd() const {
  return core_of(core_, "PersistentAllToAll::completion_fd").completion_fd();
}
void PersistentAllToAll::arm_completion_fd() {
  core_of(core_, "PersistentAllToAll::arm_completion_fd").arm_completion_fd();
}
std::size_t PersistentAllToAll::consume_completion_events() {
  return core_of(core_, "PersistentAllToAll::consume_completion_events")
      .consume_completion_events();
}

AllToAllRound::AllToAllRound(AllToAllRound&& other) noexcept
    : core_(std::exchange(other.core_, {})), number_(other.number_) {}

AllToAllRound& AllToAllRound::operator=(AllToAllRound&& other) noexcept {
  if (this != &other) {
    release();
    core_ = std::exchange(other.core_, {});
    number_ = other.number_;
  }
  return *this;
}

AllToAllRound::~AllToAllRound() { release(); }

std::span<const std::byte> AllToAllRound::part(std::uint32_t source) const {
  const std::shared_ptr<detail::AllToAllCore> core = core_.lock();
  if (!core) {
    throw Error(ErrorKind::state, "AllToAllRound::part", EPERM,
                "round " + std::to_string(number_) +
                    " holds no slots (released, moved from, or its all-to-all is gone)");
  }
  return core->part(number_, source);
}

void AllToAllRound::release() noexcept {
  if (const std::shared_ptr<detail::AllToAllCore> core = core_.lock()) core->release(number_);
  core_.reset();
}

}  // namespace ibv::net
