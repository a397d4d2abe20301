// SendRequest and ReceiveRequest: filling in ibv_send_wr / ibv_recv_wr.
#include "ibv/verbs/work_request.hpp"

#include <arpa/inet.h>

namespace ibv {
namespace {

// GatherElement and ScatterElement are standard-layout wrappers of one ibv_sge: a span of
// them is an array of ibv_sge. ibv_post_send/recv only read sg_list, hence the const_cast.
template <typename Element>
ibv_sge* sge_array(std::span<const Element> elements) noexcept {
  if (elements.empty()) return nullptr;  // data() may be null: no element to take apart
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast)
  return const_cast<ibv_sge*>(&elements.front().native());
}

}  // namespace

std::string_view to_string(SendOpcode opcode) noexcept {
  switch (opcode) {
    case SendOpcode::send: return "send";
    case SendOpcode::send_with_immediate: return "send_with_immediate";
    case SendOpcode::rdma_write: return "rdma_write";
    case SendOpcode::rdma_write_with_immediate: return "rdma_write_with_immediate";
    case SendOpcode::rdma_read: return "rdma_read";
    case SendOpcode::atomic_fetch_and_add: return "atomic_fetch_and_add";
    case SendOpcode::atomic_compare_and_swap: return "atomic_compare_and_swap";
  }
  return "unknown";
}

SendRequest::SendRequest(std::uint64_t wr_id, SendOpcode opcode, const ibv_sge* elements,
                         std::size_t count, std::uint64_t length) noexcept
    : opcode_(opcode), length_(length) {
  wr_.wr_id = wr_id;
  wr_.sg_list = const_cast<ibv_sge*>(elements);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  wr_.num_sge = static_cast<int>(count);
  wr_.send_flags = IBV_SEND_SIGNALED;
  switch (opcode) {
    case SendOpcode::send: wr_.opcode = IBV_WR_SEND; break;
    case SendOpcode::send_with_immediate: wr_.opcode = IBV_WR_SEND_WITH_IMM; break;
    case SendOpcode::rdma_write: wr_.opcode = IBV_WR_RDMA_WRITE; break;
    case SendOpcode::rdma_write_with_immediate: wr_.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; break;
    case SendOpcode::rdma_read: wr_.opcode = IBV_WR_RDMA_READ; break;
    case SendOpcode::atomic_fetch_and_add: wr_.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; break;
    case SendOpcode::atomic_compare_and_swap: wr_.opcode = IBV_WR_ATOMIC_CMP_AND_SWP; break;
  }
}

SendRequest SendRequest::send(std::uint64_t wr_id, std::span<const GatherElement> data) noexcept {
  return {wr_id, SendOpcode::send, sge_array(data), data.size(), total_length(data)};
}

SendRequest SendRequest::send_with_immediate(std::uint64_t wr_id,
                                             std::span<const GatherElement> data,
                                             std::uint32_t immediate) noexcept {
  SendRequest request(wr_id, SendOpcode::send_with_immediate, sge_array(data), data.size(),
                      total_length(data));
  request.set_immediate(immediate);
  return request;
}

SendRequest SendRequest::write(std::uint64_t wr_id, std::span<const GatherElement> data,
                               const RemoteMemoryRegion& destination) noexcept {
  SendRequest request(wr_id, SendOpcode::rdma_write, sge_array(data), data.size(),
                      total_length(data));
  request.set_remote(destination);
  return request;
}

SendRequest SendRequest::write_with_immediate(std::uint64_t wr_id,
                                              std::span<const GatherElement> data,
                                              const RemoteMemoryRegion& destination,
                                              std::uint32_t immediate) noexcept {
  SendRequest request(wr_id, SendOpcode::rdma_write_with_immediate, sge_array(data), data.size(),
                      total_length(data));
  request.set_remote(destination);
  request.set_immediate(immediate);
  return request;
}

SendRequest SendRequest::read(std::uint64_t wr_id, std::span<const ScatterElement> into,
                              const RemoteMemoryRegion& source) noexcept {
  SendRequest request(wr_id, SendOpcode::rdma_read, sge_array(into), into.size(),
                      total_length(into));
  request.set_remote(source);
  return request;
}

SendRequest SendRequest::fetch_add(std::uint64_t wr_id, const ScatterElement& result,
                                   const RemoteMemoryRegion& target, std::uint64_t add) noexcept {
  SendRequest request(wr_id, SendOpcode::atomic_fetch_and_add, &result.native(), 1,
                      result.length());
  request.set_atomic(target, add, 0);
  return request;
}

SendRequest SendRequest::compare_swap(std::uint64_t wr_id, const ScatterElement& result,
                                      const RemoteMemoryRegion& target, std::uint64_t expected,
                                      std::uint64_t desired) noexcept {
  SendRequest request(wr_id, SendOpcode::atomic_compare_and_swap, &result.native(), 1,
                      result.length());
  request.set_atomic(target, expected, desired);
  return request;
}

void SendRequest::set_atomic(const RemoteMemoryRegion& target, std::uint64_t compare_add,
                             std::uint64_t swap) noexcept {
  // Host byte order: the provider puts them on the wire big-endian.
  wr_.wr.atomic.remote_addr = target.address();
  wr_.wr.atomic.rkey = target.rkey();
  wr_.wr.atomic.compare_add = compare_add;
  wr_.wr.atomic.swap = swap;
  remote_ = target;
}

void SendRequest::set_remote(const RemoteMemoryRegion& remote) noexcept {
  wr_.wr.rdma.remote_addr = remote.address();
  wr_.wr.rdma.rkey = remote.rkey();
  remote_ = remote;
}

void SendRequest::set_immediate(std::uint32_t immediate) noexcept {
  wr_.imm_data = htonl(immediate);  // the wire carries it big-endian
}

SendRequest& SendRequest::unsignaled() noexcept {
  wr_.send_flags &= ~static_cast<unsigned>(IBV_SEND_SIGNALED);
  return *this;
}
SendRequest& SendRequest::inline_data() noexcept {
  wr_.send_flags |= IBV_SEND_INLINE;
  return *this;
}
SendRequest& SendRequest::fence() noexcept {
  wr_.send_flags |= IBV_SEND_FENCE;
  return *this;
}
SendRequest& SendRequest::solicited() noexcept {
  wr_.send_flags |= IBV_SEND_SOLICITED;
  return *this;
}

ReceiveRequest::ReceiveRequest(std::uint64_t wr_id, std::span<const ScatterElement> into) noexcept
    : length_(total_length(into)) {
  wr_.wr_id = wr_id;
  wr_.sg_list = sge_array(into);
  wr_.num_sge = static_cast<int>(into.size());
}

}  // namespace ibv
