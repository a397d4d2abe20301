// SPDX-License-Identifier: MIT
// bench/datagram_path/raw_ud_loop.c: the datagram path in raw libibverbs, the baseline that
// bench/datagram_path/run compares the library's UD layers with. One UD queue pair (its own send
// and receive completion queues) sends 8-byte datagrams to itself through an address handle to
// its own GID: per datagram an ibv_post_recv (40 bytes of GRH area plus the message), an
// ibv_post_send (signaled, to its own QPN with Q_Key 0x11111111, inline when the device grants
// inline data, as raw_loop.c and the library ask for it: 220 bytes, else 64, else none), then a
// busy ibv_poll_cq loop over the send and the receive CQ until both completions are in.
// Callgrind counts only the measured_datagrams function (bench/hot_path/lib.sh: set-up and a
// warm-up of 200 datagrams are not counted).
//
// Usage: datagram_path_raw DATAGRAMS
//   device: $IBV_TEST_DEVICE, else the first device; GID index: $IBV_TEST_GID_INDEX, else the
//   first IPv4-mapped GID of port 1 (the RoCE v2 entry the library picks by default).
// Prints one line: datagrams measured, CQ polls per datagram, whether the sends went inline.
// Exit status 0 on success.
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  kPort = 1,
  kQueueDepth = 128,  // UdQueuePairSettings: max_send_wr and max_recv_wr
  kBufferSize = 4096,
  kMessageSize = 8,
  kGrh = 40,  // every UD receive starts with the global route header area
  kInto = kBufferSize / 2,
  kWarmUp = 200,
};

static const uint32_t kQKey = 0x11111111;  // QKey::default_value()
// Upper bound of empty polls before a completion counts as lost (no clock in the hot loop).
static const uint64_t kMaxSpins = 2000000000ULL;

struct bench {
  struct ibv_context* context;
  struct ibv_pd* pd;
  struct ibv_cq* send_cq;
  struct ibv_cq* recv_cq;
  struct ibv_qp* qp;
  struct ibv_ah* ah;
  struct ibv_mr* mr;
  unsigned char* buffer;
  uint64_t polls;       // calls of ibv_poll_cq
  unsigned send_flags;  // IBV_SEND_SIGNALED, plus IBV_SEND_INLINE when the message fits
};

static int fail(const char* what) {
  fprintf(stderr, "datagram_path_raw: %s\n", what);
  return 1;
}

static struct ibv_context* open_device(const char* name) {
  int count = 0;
  struct ibv_device** devices = ibv_get_device_list(&count);
  if (devices == NULL) return NULL;
  struct ibv_context* context = NULL;
  for (int i = 0; i < count; ++i) {
    if (name == NULL || strcmp(ibv_get_device_name(devices[i]), name) == 0) {
      context = ibv_open_device(devices[i]);
      break;
    }
  }
  ibv_free_device_list(devices);
  return context;
}

// The GID index to use: $IBV_TEST_GID_INDEX, else the first IPv4-mapped entry (::ffff:a.b.c.d),
// as bench/hot_path/raw_loop.c picks it.
static int choose_gid_index(struct ibv_context* context, const struct ibv_port_attr* port) {
  const char* text = getenv("IBV_TEST_GID_INDEX");
  if (text != NULL && *text != '\0') return (int)strtol(text, NULL, 10);
  for (int i = 0; i < port->gid_tbl_len; ++i) {
    union ibv_gid gid;
    if (ibv_query_gid(context, kPort, i, &gid) != 0) continue;
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(gid.raw, kMapped, sizeof kMapped) == 0) return i;
  }
  return 0;
}

// Creates the CQs, the UD QP (RESET -> INIT -> RTR -> RTS, as UdQueuePairBuilder does), the
// address handle to the QP's own GID and the registered buffer.
static int set_up(struct bench* b) {
  const char* name = getenv("IBV_TEST_DEVICE");
  b->context = open_device(name != NULL && *name != '\0' ? name : NULL);
  if (b->context == NULL) return fail("cannot open the RDMA device");
  struct ibv_port_attr port;
  if (ibv_query_port(b->context, kPort, &port) != 0) return fail("cannot query the port");
  b->pd = ibv_alloc_pd(b->context);
  if (b->pd == NULL) return fail("cannot allocate the PD");
  b->send_cq = ibv_create_cq(b->context, kQueueDepth, NULL, NULL, 0);
  b->recv_cq = ibv_create_cq(b->context, kQueueDepth, NULL, NULL, 0);
  if (b->send_cq == NULL || b->recv_cq == NULL) return fail("cannot create the CQs");

  static const uint32_t kInlineTries[] = {220, 64, 0};
  struct ibv_qp_init_attr init = {0};
  for (size_t i = 0; i < sizeof kInlineTries / sizeof kInlineTries[0] && b->qp == NULL; ++i) {
    init = (struct ibv_qp_init_attr){
        .send_cq = b->send_cq,
        .recv_cq = b->recv_cq,
        .cap = {.max_send_wr = kQueueDepth,
                .max_recv_wr = kQueueDepth,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = kInlineTries[i]},
        .qp_type = IBV_QPT_UD,
    };
    b->qp = ibv_create_qp(b->pd, &init);
  }
  if (b->qp == NULL) return fail("cannot create the QP");
  b->send_flags = IBV_SEND_SIGNALED;
  if (init.cap.max_inline_data >= kMessageSize) b->send_flags |= IBV_SEND_INLINE;

  struct ibv_qp_attr attr = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = kPort, .qkey = kQKey};
  if (ibv_modify_qp(b->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) !=
      0) {
    return fail("cannot move the QP to INIT");
  }
  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(b->qp, &attr, IBV_QP_STATE) != 0) return fail("cannot move the QP to RTR");
  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0x1234;
  if (ibv_modify_qp(b->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
    return fail("cannot move the QP to RTS");
  }

  struct ibv_ah_attr ah = {.dlid = port.lid, .port_num = kPort};
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET || port.lid == 0) {
    const int gid_index = choose_gid_index(b->context, &port);
    union ibv_gid gid;
    if (ibv_query_gid(b->context, kPort, gid_index, &gid) != 0) return fail("cannot read the GID");
    ah.is_global = 1;
    ah.grh.dgid = gid;
    ah.grh.sgid_index = (uint8_t)gid_index;
    ah.grh.hop_limit = 64;
  }
  b->ah = ibv_create_ah(b->pd, &ah);
  if (b->ah == NULL) return fail("cannot create the address handle");

  b->buffer = calloc(kBufferSize, 1);
  if (b->buffer == NULL) return fail("out of memory");
  b->mr = ibv_reg_mr(b->pd, b->buffer, kBufferSize, IBV_ACCESS_LOCAL_WRITE);
  if (b->mr == NULL) return fail("cannot register the buffer");
  return 0;
}

static void tear_down(struct bench* b) {
  if (b->mr != NULL) ibv_dereg_mr(b->mr);
  free(b->buffer);
  if (b->ah != NULL) ibv_destroy_ah(b->ah);
  if (b->qp != NULL) ibv_destroy_qp(b->qp);
  if (b->recv_cq != NULL) ibv_destroy_cq(b->recv_cq);
  if (b->send_cq != NULL) ibv_destroy_cq(b->send_cq);
  if (b->pd != NULL) ibv_dealloc_pd(b->pd);
  if (b->context != NULL) ibv_close_device(b->context);
}

// Busy-polls the send and the receive CQ until one completion has arrived on each; 0 if both
// succeeded. Not inlined: bench/hot_path/lib.sh's hot_path_poll_function finds the provider's
// poll_cq as what wait_for calls.
__attribute__((noinline)) static int wait_for(struct bench* b) {
  struct ibv_wc wc;
  uint64_t spins = 0;
  int send_done = 0, recv_done = 0, failed = 0;
  while (!send_done || !recv_done) {
    int n = 0;
    if (!send_done) {
      ++b->polls;
      n = ibv_poll_cq(b->send_cq, 1, &wc);
      if (n < 0) return 1;
      if (n > 0) {
        send_done = 1;
        failed |= wc.status != IBV_WC_SUCCESS;
      }
    }
    if (!recv_done) {
      ++b->polls;
      const int m = ibv_poll_cq(b->recv_cq, 1, &wc);
      if (m < 0) return 1;
      if (m > 0) {
        recv_done = 1;
        failed |= wc.status != IBV_WC_SUCCESS || wc.byte_len != kGrh + kMessageSize;
      }
      n += m;
    }
    if (n == 0 && ++spins > kMaxSpins) return 1;
  }
  return failed;
}

// `count` datagrams, each a receive posted, a send to the QP itself, and both completions.
static inline __attribute__((always_inline)) int iterate(struct bench* b, long count) {
  for (long i = 0; i < count; ++i) {
    struct ibv_sge into = {
        .addr = (uintptr_t)(b->buffer + kInto), .length = kGrh + kMessageSize, .lkey = b->mr->lkey};
    struct ibv_recv_wr receive = {.wr_id = 2, .sg_list = &into, .num_sge = 1};
    struct ibv_recv_wr* bad_receive = NULL;
    if (ibv_post_recv(b->qp, &receive, &bad_receive) != 0) return 1;
    struct ibv_sge from = {
        .addr = (uintptr_t)b->buffer, .length = kMessageSize, .lkey = b->mr->lkey};
    struct ibv_send_wr send = {.wr_id = 1,
                               .sg_list = &from,
                               .num_sge = 1,
                               .opcode = IBV_WR_SEND,
                               .send_flags = b->send_flags};
    send.wr.ud.ah = b->ah;
    send.wr.ud.remote_qpn = b->qp->qp_num;
    send.wr.ud.remote_qkey = kQKey;
    struct ibv_send_wr* bad = NULL;
    if (ibv_post_send(b->qp, &send, &bad) != 0) return 1;
    if (wait_for(b) != 0) return 1;
  }
  return 0;
}

// The measured loop: bench/hot_path/lib.sh has callgrind start a fresh count on entering
// measured_* and write it out on entering end_of_measurement.
__attribute__((noinline)) int measured_datagrams(struct bench* b, long count);
__attribute__((noinline)) int measured_datagrams(struct bench* b, long count) {
  return iterate(b, count);
}
static int warm_up(struct bench* b, long count) { return iterate(b, count); }

__attribute__((noinline)) void end_of_measurement(void);
static volatile int measurement_ended;
__attribute__((noinline)) void end_of_measurement(void) { measurement_ended = 1; }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: datagram_path_raw DATAGRAMS\n");
    return 2;
  }
  const long datagrams = strtol(argv[1], NULL, 10);
  if (datagrams <= 0) return fail("DATAGRAMS must be positive");

  struct bench b;
  memset(&b, 0, sizeof b);
  int status = set_up(&b);
  if (status == 0) memset(b.buffer, 0x5a, kMessageSize);
  if (status == 0) status = warm_up(&b, kWarmUp);
  b.polls = 0;
  if (status == 0) {
    status = measured_datagrams(&b, datagrams);
    end_of_measurement();
  }
  if (status != 0) {
    fail("a datagram failed or did not complete");
  } else if (memcmp(b.buffer, b.buffer + kInto + kGrh, kMessageSize) != 0) {
    status = fail("the data did not arrive");
  } else {
    printf("raw datagrams %ld polls_per_datagram %.3f inline %s\n", datagrams,
           (double)b.polls / (double)datagrams,
           (b.send_flags & IBV_SEND_INLINE) != 0 ? "yes" : "no");
  }
  // Leave without tearing down when it went well (nothing after the measurement matters).
  fflush(stdout);
  if (status == 0) _Exit(0);
  tear_down(&b);
  return status;
}
