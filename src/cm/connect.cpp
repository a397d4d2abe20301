// SPDX-License-Identifier: MIT
// Channel::connect: a Channel connected with rdma_cm (address and route resolution, then the
// connection handshake), and the channel building it shares with ChannelListener.
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <string>
#include <utility>

#include "channel/channel_core.hpp"
#include "cm/address.hpp"
#include "cm/cm_channel.hpp"
#include "ibv/error.hpp"
#include "ibv/verbs/device.hpp"

namespace ibv {
namespace detail {
namespace {

// rdma_resolve_addr's and rdma_resolve_route's timeout: whole milliseconds, rounded up, as an int.
int whole_milliseconds(Duration timeout) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(ms, INT_MAX));
}

std::string device_name(const rdma_cm_id& id) {
  if (id.verbs == nullptr) return "(none)";
  const char* name = ibv_get_device_name(id.verbs->device);
  return name != nullptr ? name : "(unnamed)";
}

void modify(ibv_qp* qp, rdma_cm_id* id, ibv_qp_attr& attr, ibv_qp_state state,
            const QueuePairSettings& settings, std::string_view step) {
  int mask = 0;
  attr.qp_state = state;
  if (rdma_init_qp_attr(id, &attr, &mask) != 0) {
    throw_cm_error("rdma_init_qp_attr", errno, std::string(step));
  }
  if (state == IBV_QPS_RTR) {
    attr.min_rnr_timer = settings.min_rnr_timer.code();
    mask |= IBV_QP_MIN_RNR_TIMER;
  } else if (state == IBV_QPS_RTS) {
    attr.timeout = settings.ack_timeout.exponent();  // local: how long we wait for ACKs
    mask |= IBV_QP_TIMEOUT;
  }
  if (const int rc = ibv_modify_qp(qp, &attr, mask); rc != 0) {
    throw Error(rc == EINVAL ? ErrorKind::invalid_argument : ErrorKind::driver, "ibv_modify_qp", rc,
                std::string(step) + " with the attributes rdma_cm gave",
                "the device refused rdma_cm's queue pair attributes; check that the settings "
                "(max_rd_atomic, mtu) fit the device");
  }
}

}  // namespace

PreparedChannel ChannelAccess::prepare(const rdma_cm_id& id, const ConnectOptions& options,
                                       std::string_view operation) {
  const std::string device = device_name(id);
  ProtectionDomain pd = [&] {
    if (!options.protection_domain) return ProtectionDomain(open_device(device));
    const std::string given = options.protection_domain->context().name();
    if (given != device) {
      throw_invalid_argument(operation, "protection_domain",
                             "is on device " + given + ", but the address resolves to device " +
                                 device + ": give a protection domain of " + device +
                                 " (or none, to have one made)");
    }
    return *options.protection_domain;
  }();
  ChannelSettings settings = options.channel;
  settings.queue_pair.port = PortNumber{id.port_num};
  return ChannelBuilder(std::move(pd)).settings(settings).build();
}

rdma_conn_param ChannelAccess::conn_param(const PreparedChannel& prepared) {
  const auto& s = prepared.qp_.settings();
  rdma_conn_param param{};
  param.qp_num = prepared.qp_.endpoint().qp_number;
  param.responder_resources = s.max_dest_rd_atomic->value();
  param.initiator_depth = s.max_rd_atomic->value();
  param.flow_control = 1;
  param.retry_count = std::min<std::uint8_t>(s.retry_count.value(), 7);
  param.rnr_retry_count = std::min<std::uint8_t>(s.rnr_retry.value(), 7);
  return param;
}

Channel ChannelAccess::connect(PreparedChannel&& prepared, CmEndpoint endpoint,
                               std::uint32_t remote_qp_number, std::string_view operation) {
  auto core = std::move(prepared.qp_).release();
  rdma_cm_id* id = endpoint.id.get();
  ibv_qp_attr rtr{};
  modify(core->qp.get(), id, rtr, IBV_QPS_RTR, core->settings,
         std::string(operation) + ": INIT -> RTR");
  ibv_qp_attr rts{};
  modify(core->qp.get(), id, rts, IBV_QPS_RTS, core->settings,
         std::string(operation) + ": RTR -> RTS");
  // What the queue pair now is: rdma_cm chose the GID, the PSNs and the path MTU.
  auto& s = core->settings;
  s.send_psn = Psn(rts.sq_psn);
  s.mtu = Mtu::from_native(rtr.path_mtu);
  s.max_dest_rd_atomic = ReadAtomicDepth(std::max<std::uint8_t>(rtr.max_dest_rd_atomic, 1));
  s.max_rd_atomic = ReadAtomicDepth(std::max<std::uint8_t>(rts.max_rd_atomic, 1));
  if (rtr.ah_attr.is_global != 0) {
    core->gid_index = rtr.ah_attr.grh.sgid_index;
    s.gid_index = core->gid_index;
    core->gid = core->pd.context().query_gid(core->gid_index, s.port).gid;
  }
  const Endpoint remote{remote_qp_number, rtr.ah_attr.dlid, Gid(rtr.ah_attr.grh.dgid), rtr.rq_psn};
  Channel channel(QueuePair(std::move(core), remote), std::move(prepared.cq_), prepared.timeouts_,
                  prepared.wait_, std::move(prepared.pool_));
  channel.core_->set_monitor(std::make_unique<CmConnection>(std::move(endpoint)));
  return channel;
}

}  // namespace detail

Channel Channel::connect(std::string_view address, std::uint16_t port,
                         const ConnectOptions& options) {
  constexpr std::string_view kOperation = "Channel::connect";
  // Everything that needs no device first: nothing is created for bad input.
  if (port == 0) {
    throw_invalid_argument(kOperation, "port 0", "is not a port a server can listen on");
  }
  detail::check_options(options, kOperation);
  auto destination = detail::parse_address(address, port, kOperation, false);
  const std::string& peer = destination.text;

  auto endpoint = detail::make_endpoint(kOperation);
  rdma_cm_id* id = endpoint.id.get();
  // A little longer than rdma_cm's own timeouts, so that their error events (with the reason)
  // arrive before our deadline does.
  constexpr auto kGrace = std::chrono::milliseconds(500);
  auto expect = [&](rdma_cm_event_type wanted, Duration timeout,
                    std::string_view phase) -> detail::CmEvent {
    const auto deadline = detail::CmClock::now() + timeout;
    for (;;) {
      auto event = detail::next_event(endpoint.channel.get(), deadline, kOperation);
      if (!event) {
        throw Error(
            ErrorKind::timeout, kOperation, ETIMEDOUT,
            std::string(phase) + " " + peer + " took longer than " + detail::duration_text(timeout),
            "is the peer up, and is the address reachable through an RDMA device? "
            "Raise the timeout in ConnectOptions for slow networks");
      }
      if ((*event)->event == wanted) return std::move(*event);
      detail::throw_event_error(**event, kOperation, phase, peer);
    }
  };

  if (rdma_resolve_addr(id, nullptr, destination.native(),
                        detail::whole_milliseconds(options.address_timeout)) != 0) {
    detail::throw_cm_error("rdma_resolve_addr", errno, "resolving " + peer,
                           "is the address reachable through an RDMA device's netdev?");
  }
  (void)expect(RDMA_CM_EVENT_ADDR_RESOLVED, options.address_timeout + kGrace,
               "resolving the address");
  if (rdma_resolve_route(id, detail::whole_milliseconds(options.route_timeout)) != 0) {
    detail::throw_cm_error("rdma_resolve_route", errno, "resolving the route to " + peer);
  }
  (void)expect(RDMA_CM_EVENT_ROUTE_RESOLVED, options.route_timeout + kGrace,
               "resolving the route to");

  PreparedChannel prepared = detail::ChannelAccess::prepare(*id, options, kOperation);
  rdma_conn_param param = detail::ChannelAccess::conn_param(prepared);
  if (rdma_connect(id, &param) != 0) {
    detail::throw_cm_error("rdma_connect", errno, "connecting to " + peer);
  }
  std::uint32_t remote_qp = 0;
  {
    const auto event =
        expect(RDMA_CM_EVENT_CONNECT_RESPONSE, options.connect_timeout, "connecting to");
    remote_qp = event->param.conn.qp_num;
  }
  Channel channel = detail::ChannelAccess::connect(std::move(prepared), std::move(endpoint),
                                                   remote_qp, kOperation);
  if (rdma_establish(id) != 0) {  // the RTU: the server's accept completes with it
    detail::throw_cm_error("rdma_establish", errno, "confirming the connection to " + peer);
  }
  return channel;
}

}  // namespace ibv
