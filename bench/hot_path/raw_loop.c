// bench/hot_path/raw_loop.c: the hot path of a small RDMA write, and of a send with its
// receive, written in raw libibverbs: ibv_post_send (and ibv_post_recv) then a busy
// ibv_poll_cq loop, on one RC queue pair connected to itself (a loopback, like the Channel in
// hot_path_channel) with the Channel's default settings, including its automatic inline: the
// 8-byte sends and writes go inline when the device grants inline data. It is the baseline that
// bench/hot_path/run compares the library with, counting instructions with callgrind in
// measured_write / measured_send only (set-up and warm-up are not counted).
//
// Usage: hot_path_raw {write|send} ITERATIONS
//   device: $IBV_TEST_DEVICE, else the first device; GID index: $IBV_TEST_GID_INDEX, else the
//   first IPv4-mapped GID of port 1 (the RoCE v2 entry the library picks by default).
// Prints one line: op, iterations, completion polls per iteration, whether the posts were
// inline. Exit status 0 on success.
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  kPort = 1,
  kQueueDepth = 128,  // QueuePairSettings: max_send_wr and max_recv_wr
  kBufferSize = 4096,
  kMessageSize = 8,  // a small message: 8 bytes
  kHalf = kBufferSize / 2,
  kWarmUp = 200,
};

// Upper bound of empty polls before a completion counts as lost (no clock in the hot loop).
static const uint64_t kMaxSpins = 2000000000ULL;

struct bench {
  struct ibv_context* context;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  unsigned char* buffer;
  uint64_t next_wr_id;
  uint64_t polls;       // calls of ibv_poll_cq
  unsigned send_flags;  // IBV_SEND_SIGNALED, plus IBV_SEND_INLINE when the message fits
};

static int fail(const char* what) {
  fprintf(stderr, "hot_path_raw: %s\n", what);
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

// The GID index to use: $IBV_TEST_GID_INDEX, else the first IPv4-mapped entry (::ffff:a.b.c.d).
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

static int min_int(int a, int b) { return a < b ? a : b; }

// Creates the CQ and the QP and connects the QP to itself (RESET -> INIT -> RTR -> RTS), with
// the attributes ibv::ChannelBuilder(pd).build() uses by default.
static int set_up(struct bench* b) {
  const char* name = getenv("IBV_TEST_DEVICE");
  b->context = open_device(name != NULL && *name != '\0' ? name : NULL);
  if (b->context == NULL) return fail("cannot open the RDMA device");
  struct ibv_device_attr device;
  struct ibv_port_attr port;
  if (ibv_query_device(b->context, &device) != 0 || ibv_query_port(b->context, kPort, &port) != 0) {
    return fail("cannot query the device");
  }
  b->pd = ibv_alloc_pd(b->context);
  b->cq = b->pd != NULL ? ibv_create_cq(b->context, 2 * kQueueDepth, NULL, NULL, 0) : NULL;
  if (b->cq == NULL) return fail("cannot create the PD or CQ");

  // Inline data as the Channel asks for it by default (and perftest's latency tests): 220
  // bytes, else 64, else none; small sends and writes then go inline (InlinePolicy::automatic).
  static const uint32_t kInlineTries[] = {220, 64, 0};
  struct ibv_qp_init_attr init = {0};
  for (size_t i = 0; i < sizeof kInlineTries / sizeof kInlineTries[0] && b->qp == NULL; ++i) {
    init = (struct ibv_qp_init_attr){
        .send_cq = b->cq,
        .recv_cq = b->cq,
        .cap = {.max_send_wr = kQueueDepth,
                .max_recv_wr = kQueueDepth,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = kInlineTries[i]},
        .qp_type = IBV_QPT_RC,
    };
    b->qp = ibv_create_qp(b->pd, &init);
  }
  if (b->qp == NULL) return fail("cannot create the QP");
  b->send_flags = IBV_SEND_SIGNALED;
  if (init.cap.max_inline_data >= kMessageSize) b->send_flags |= IBV_SEND_INLINE;

  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  struct ibv_qp_attr attr = {.qp_state = IBV_QPS_INIT,
                             .pkey_index = 0,
                             .port_num = kPort,
                             .qp_access_flags = (unsigned)access};
  if (ibv_modify_qp(b->qp, &attr,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    return fail("cannot move the QP to INIT");
  }

  const uint32_t psn = 0x1234;
  const int rd_atomic = min_int(device.max_qp_rd_atom, 16);
  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = port.active_mtu;
  attr.dest_qp_num = b->qp->qp_num;
  attr.rq_psn = psn;
  attr.max_dest_rd_atomic = (uint8_t)min_int(device.max_qp_init_rd_atom, 16);
  attr.min_rnr_timer = 16;
  attr.ah_attr.dlid = port.lid;
  attr.ah_attr.port_num = kPort;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    const int gid_index = choose_gid_index(b->context, &port);
    union ibv_gid gid;
    if (ibv_query_gid(b->context, kPort, gid_index, &gid) != 0) return fail("cannot read the GID");
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(b->qp, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    return fail("cannot move the QP to RTR");
  }
  memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 6;
  attr.sq_psn = psn;
  attr.max_rd_atomic = (uint8_t)rd_atomic;
  if (ibv_modify_qp(b->qp, &attr,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    return fail("cannot move the QP to RTS");
  }

  b->buffer = calloc(kBufferSize, 1);
  if (b->buffer == NULL) return fail("out of memory");
  b->mr = ibv_reg_mr(b->pd, b->buffer, kBufferSize, access);
  if (b->mr == NULL) return fail("cannot register the buffer");
  b->next_wr_id = 1;
  return 0;
}

static void tear_down(struct bench* b) {
  if (b->mr != NULL) ibv_dereg_mr(b->mr);
  free(b->buffer);
  if (b->qp != NULL) ibv_destroy_qp(b->qp);
  if (b->cq != NULL) ibv_destroy_cq(b->cq);
  if (b->pd != NULL) ibv_dealloc_pd(b->pd);
  if (b->context != NULL) ibv_close_device(b->context);
}

// Busy-polls until `expected` completions have arrived; 0 if all succeeded.
static int wait_for(struct bench* b, int expected) {
  struct ibv_wc wc[2];
  uint64_t spins = 0;
  int failed = 0;
  while (expected > 0) {
    ++b->polls;
    const int n = ibv_poll_cq(b->cq, expected, wc);
    if (n < 0) return 1;
    for (int i = 0; i < n; ++i) failed |= wc[i].status != IBV_WC_SUCCESS;
    expected -= n;
    if (n == 0 && ++spins > kMaxSpins) return 1;
  }
  return failed;
}

// One signaled 8-byte RDMA write from the first half of the buffer into the second, waited for.
static int write_once(struct bench* b) {
  struct ibv_sge sge = {.addr = (uintptr_t)b->buffer, .length = kMessageSize, .lkey = b->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = b->next_wr_id++,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = b->send_flags};
  wr.wr.rdma.remote_addr = (uintptr_t)(b->buffer + kHalf);
  wr.wr.rdma.rkey = b->mr->rkey;
  struct ibv_send_wr* bad = NULL;
  if (ibv_post_send(b->qp, &wr, &bad) != 0) return 1;
  return wait_for(b, 1);
}

// One receive into the second half, one signaled 8-byte send from the first, both waited for.
static int send_once(struct bench* b) {
  struct ibv_sge into = {
      .addr = (uintptr_t)(b->buffer + kHalf), .length = kMessageSize, .lkey = b->mr->lkey};
  struct ibv_recv_wr receive = {.wr_id = b->next_wr_id++, .sg_list = &into, .num_sge = 1};
  struct ibv_recv_wr* bad_receive = NULL;
  if (ibv_post_recv(b->qp, &receive, &bad_receive) != 0) return 1;
  struct ibv_sge from = {.addr = (uintptr_t)b->buffer, .length = kMessageSize, .lkey = b->mr->lkey};
  struct ibv_send_wr send = {.wr_id = b->next_wr_id++,
                             .sg_list = &from,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = b->send_flags};
  struct ibv_send_wr* bad_send = NULL;
  if (ibv_post_send(b->qp, &send, &bad_send) != 0) return 1;
  return wait_for(b, 2);
}

// The measured loops. bench/hot_path/run has callgrind start a fresh count on entering
// measured_* and write it out on entering end_of_measurement, so that set-up, warm-up and
// what follows are not counted.
__attribute__((noinline)) int measured_write(struct bench* b, long iterations);
__attribute__((noinline)) int measured_send(struct bench* b, long iterations);
__attribute__((noinline)) void end_of_measurement(void);

static volatile int measurement_ended;
__attribute__((noinline)) void end_of_measurement(void) { measurement_ended = 1; }

__attribute__((noinline)) int measured_write(struct bench* b, long iterations) {
  for (long i = 0; i < iterations; ++i) {
    if (write_once(b) != 0) return 1;
  }
  return 0;
}

__attribute__((noinline)) int measured_send(struct bench* b, long iterations) {
  for (long i = 0; i < iterations; ++i) {
    if (send_once(b) != 0) return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "send") != 0)) {
    fprintf(stderr, "usage: hot_path_raw {write|send} ITERATIONS\n");
    return 2;
  }
  const int is_write = strcmp(argv[1], "write") == 0;
  const long iterations = strtol(argv[2], NULL, 10);
  if (iterations <= 0) return fail("ITERATIONS must be positive");

  struct bench b;
  memset(&b, 0, sizeof b);
  int status = set_up(&b);
  if (status == 0) {
    memset(b.buffer, 0x5a, kMessageSize);
    // Warm-up, not counted: first touches of the queues and the code.
    for (int i = 0; i < kWarmUp && status == 0; ++i)
      status = is_write ? write_once(&b) : send_once(&b);
    b.polls = 0;
    if (status == 0) {
      status = is_write ? measured_write(&b, iterations) : measured_send(&b, iterations);
      end_of_measurement();
    }
    if (status != 0) {
      fail("a work request failed or did not complete");
    } else if (memcmp(b.buffer, b.buffer + kHalf, kMessageSize) != 0) {
      status = fail("the data did not arrive");
    } else {
      printf("raw %s iterations %ld polls_per_iteration %.3f inline %s\n", argv[1], iterations,
             (double)b.polls / (double)iterations,
             (b.send_flags & IBV_SEND_INLINE) != 0 ? "yes" : "no");
    }
  }
  // Leave without tearing down when it went well (nothing after the measurement matters).
  fflush(stdout);
  if (status == 0) _Exit(0);
  tear_down(&b);
  return status;
}
