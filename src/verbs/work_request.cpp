// SendRequest's opcode names (the requests themselves are built inline: work_request.hpp).
#include "ibv/verbs/work_request.hpp"

namespace ibv {

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

}  // namespace ibv
