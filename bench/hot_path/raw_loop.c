// SPDX-License-Identifier: MIT
// bench/hot_path/raw_loop.c: the hot path of each operation the library's benchmark measures
// (an 8-byte RDMA write, a send with its receive, an RDMA read, a fetch-and-add, a
// compare-and-swap), written in raw libibverbs: ibv_post_send (and ibv_post_recv), or with
// $HOT_PATH_POST=extended the extended interface (ibv_wr_start, ibv_wr_rdma_write and the other
// builders, ibv_wr_complete) as the library posts with PostInterface::extended, then a busy
// ibv_poll_cq loop, on one RC queue pair connected to itself (a loopback, like the Channel in
// hot_path_channel) with the Channel's default settings, including its automatic inline: the
// 8-byte sends and writes go inline when the device grants inline data. Each operation also as
// a batch of 16: 16 requests in one post (one ibv_wr_start .. ibv_wr_complete, or linked in one
// ibv_post_send), only the last signaled (16 receives in
// one ibv_post_recv), then polled until the last has completed (and the 16 receives), the raw
// form of a scope that posts a list of 16, which signals the same way. It is the baseline
// that bench/hot_path/run compares the library with, counting instructions with callgrind in
// the measured_* functions only (set-up and warm-up are not counted).
//
// Usage: hot_path_raw REQUESTS VARIANT [VARIANT...]
//   VARIANT: OP or OP-batch16, OP one of write, send, read, fetch_add, compare_swap; each is
//   warmed up (200 requests) and measured (REQUESTS requests: in a batch of 16, REQUESTS / 16
//   batches rounded up) in turn, in one process (one callgrind part each).
//   device: $IBV_TEST_DEVICE, else the first device; GID index: $IBV_TEST_GID_INDEX, else the
//   first IPv4-mapped GID of port 1 (the RoCE v2 entry the library picks by default); post
//   interface: $HOT_PATH_POST (extended or classic), else classic, as the library's default.
// Prints a line per variant: its name, requests measured, requests per iteration, completion
// polls per iteration, whether the posts were inline, the post interface. Exit status 0 on
// success.
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
  uint64_t polls;         // calls of ibv_poll_cq
  unsigned send_flags;    // IBV_SEND_SIGNALED, plus IBV_SEND_INLINE when the message fits
  struct ibv_qp_ex* qpx;  // the extended post interface (ibv_wr_*) when posting with it, else NULL
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

// An RC QP with the extended post interface for the five operations, as the library creates
// one (QueuePairBuilder::build); NULL when the provider refuses.
static struct ibv_qp* create_extended_qp(struct bench* b, struct ibv_qp_init_attr* init) {
  struct ibv_qp_init_attr_ex extended = {0};
  extended.send_cq = init->send_cq;
  extended.recv_cq = init->recv_cq;
  extended.cap = init->cap;
  extended.qp_type = IBV_QPT_RC;
  extended.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  extended.pd = b->pd;
  extended.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
  struct ibv_qp* qp = ibv_create_qp_ex(b->context, &extended);
  if (qp != NULL) {
    init->cap = extended.cap;
    b->qpx = ibv_qp_to_qp_ex(qp);
  }
  return qp;
}

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
  // The post interface: $HOT_PATH_POST (extended or classic), else classic, as the library's
  // default (QueuePairSettings::post_interface).
  const char* post = getenv("HOT_PATH_POST");
  const int extended = post != NULL && strcmp(post, "extended") == 0;
  if (post != NULL && !extended && strcmp(post, "classic") != 0) {
    return fail("HOT_PATH_POST is extended or classic");
  }
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
    b->qp = extended ? create_extended_qp(b, &init) : ibv_create_qp(b->pd, &init);
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

enum op { kWrite, kSend, kRead, kFetchAdd, kCompareSwap };
static const char* const kOpNames[] = {"write", "send", "read", "fetch_add", "compare_swap"};
enum { kOps = 5, kBatch = 16, kResult = 1024, kWord = 3072 };

// Busy-polls until `expected` completions have arrived; 0 if all succeeded.
static int wait_for(struct bench* b, int expected) {
  struct ibv_wc wc[2 * kBatch];
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

// The send-queue request of `op` under a fresh wr_id, its element in `sge`: an 8-byte signaled
// write from the first half of the buffer into the second, a send from the first half, a read
// of the first half into the second, a fetch-and-add of 1 or a compare-and-swap (0 with 0) on
// the word at kWord, its old value landing at kResult. Sends and writes go inline when granted.
static inline __attribute__((always_inline)) void make_send(struct bench* b, enum op op,
                                                            struct ibv_send_wr* wr,
                                                            struct ibv_sge* sge) {
  const int atomic = op == kFetchAdd || op == kCompareSwap;
  const size_t local = op == kRead ? kHalf : atomic ? kResult : 0;
  *sge = (struct ibv_sge){
      .addr = (uintptr_t)(b->buffer + local), .length = kMessageSize, .lkey = b->mr->lkey};
  *wr = (struct ibv_send_wr){.wr_id = b->next_wr_id++, .sg_list = sge, .num_sge = 1};
  switch (op) {
    case kWrite:
      wr->opcode = IBV_WR_RDMA_WRITE;
      wr->send_flags = b->send_flags;
      wr->wr.rdma.remote_addr = (uintptr_t)(b->buffer + kHalf);
      wr->wr.rdma.rkey = b->mr->rkey;
      break;
    case kSend:
      wr->opcode = IBV_WR_SEND;
      wr->send_flags = b->send_flags;
      break;
    case kRead:
      wr->opcode = IBV_WR_RDMA_READ;
      wr->send_flags = IBV_SEND_SIGNALED;
      wr->wr.rdma.remote_addr = (uintptr_t)b->buffer;
      wr->wr.rdma.rkey = b->mr->rkey;
      break;
    case kFetchAdd:
    case kCompareSwap:
      wr->opcode = op == kFetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
      wr->send_flags = IBV_SEND_SIGNALED;
      wr->wr.atomic.remote_addr = (uintptr_t)(b->buffer + kWord);
      wr->wr.atomic.rkey = b->mr->rkey;
      wr->wr.atomic.compare_add = op == kFetchAdd ? 1 : 0;
      wr->wr.atomic.swap = 0;
      break;
  }
}

// make_send() through the extended post interface, between ibv_wr_start and ibv_wr_complete:
// the same request, given to the provider's builders instead of written into an ibv_send_wr.
static inline __attribute__((always_inline)) void put_send(struct bench* b, enum op op,
                                                           int signaled) {
  struct ibv_qp_ex* qpx = b->qpx;
  const int atomic = op == kFetchAdd || op == kCompareSwap;
  const size_t local = op == kRead ? kHalf : atomic ? kResult : 0;
  const unsigned flags = op == kWrite || op == kSend ? b->send_flags : IBV_SEND_SIGNALED;
  qpx->wr_id = b->next_wr_id++;
  qpx->wr_flags = signaled ? flags : flags & ~(unsigned)IBV_SEND_SIGNALED;
  switch (op) {
    case kWrite: ibv_wr_rdma_write(qpx, b->mr->rkey, (uintptr_t)(b->buffer + kHalf)); break;
    case kSend: ibv_wr_send(qpx); break;
    case kRead: ibv_wr_rdma_read(qpx, b->mr->rkey, (uintptr_t)b->buffer); break;
    case kFetchAdd:
      ibv_wr_atomic_fetch_add(qpx, b->mr->rkey, (uintptr_t)(b->buffer + kWord), 1);
      break;
    case kCompareSwap:
      ibv_wr_atomic_cmp_swp(qpx, b->mr->rkey, (uintptr_t)(b->buffer + kWord), 0, 0);
      break;
  }
  if ((flags & IBV_SEND_INLINE) != 0) {
    ibv_wr_set_inline_data(qpx, b->buffer + local, kMessageSize);
  } else {
    ibv_wr_set_sge(qpx, b->mr->lkey, (uintptr_t)(b->buffer + local), kMessageSize);
  }
}

// One request of `op` (a send: a receive into the second half first), waited for.
static inline __attribute__((always_inline)) int once(struct bench* b, enum op op) {
  if (op == kSend) {
    struct ibv_sge into = {
        .addr = (uintptr_t)(b->buffer + kHalf), .length = kMessageSize, .lkey = b->mr->lkey};
    struct ibv_recv_wr receive = {.wr_id = b->next_wr_id++, .sg_list = &into, .num_sge = 1};
    struct ibv_recv_wr* bad_receive = NULL;
    if (ibv_post_recv(b->qp, &receive, &bad_receive) != 0) return 1;
  }
  if (b->qpx != NULL) {
    ibv_wr_start(b->qpx);
    put_send(b, op, 1);
    if (ibv_wr_complete(b->qpx) != 0) return 1;
    return wait_for(b, op == kSend ? 2 : 1);
  }
  struct ibv_sge sge;
  struct ibv_send_wr wr;
  make_send(b, op, &wr, &sge);
  struct ibv_send_wr* bad = NULL;
  if (ibv_post_send(b->qp, &wr, &bad) != 0) return 1;
  return wait_for(b, op == kSend ? 2 : 1);
}

// 16 requests of `op` linked in one ibv_post_send, only the last signaled: RC completes in order,
// so its completion says all 16 are done (a failed one would report itself). A send: 16
// receives linked in one ibv_post_recv first. Then polled until all completions are in: the raw
// form of a scope that posts a list of 16 (ChannelScope::post_all signals the same way).
static inline __attribute__((always_inline)) int batch(struct bench* b, enum op op) {
  if (op == kSend) {
    struct ibv_sge into[kBatch];
    struct ibv_recv_wr receives[kBatch];
    for (int i = 0; i < kBatch; ++i) {
      into[i] = (struct ibv_sge){
          .addr = (uintptr_t)(b->buffer + kHalf), .length = kMessageSize, .lkey = b->mr->lkey};
      receives[i] = (struct ibv_recv_wr){.wr_id = b->next_wr_id++,
                                         .next = i + 1 < kBatch ? &receives[i + 1] : NULL,
                                         .sg_list = &into[i],
                                         .num_sge = 1};
    }
    struct ibv_recv_wr* bad_receive = NULL;
    if (ibv_post_recv(b->qp, receives, &bad_receive) != 0) return 1;
  }
  if (b->qpx != NULL) {
    ibv_wr_start(b->qpx);
    for (int i = 0; i < kBatch; ++i) put_send(b, op, i + 1 == kBatch);
    if (ibv_wr_complete(b->qpx) != 0) return 1;
    return wait_for(b, op == kSend ? kBatch + 1 : 1);
  }
  struct ibv_sge sges[kBatch];
  struct ibv_send_wr wrs[kBatch];
  for (int i = 0; i < kBatch; ++i) {
    make_send(b, op, &wrs[i], &sges[i]);
    wrs[i].next = i + 1 < kBatch ? &wrs[i + 1] : NULL;
    if (i + 1 < kBatch) wrs[i].send_flags &= ~(unsigned)IBV_SEND_SIGNALED;
  }
  struct ibv_send_wr* bad = NULL;
  if (ibv_post_send(b->qp, wrs, &bad) != 0) return 1;
  return wait_for(b, op == kSend ? kBatch + 1 : 1);
}

static inline __attribute__((always_inline)) int iterate(struct bench* b, enum op op, int batched,
                                                         long iterations) {
  for (long i = 0; i < iterations; ++i) {
    if ((batched ? batch(b, op) : once(b, op)) != 0) return 1;
  }
  return 0;
}

// The measured loops, one per variant, each with the operation as a constant (so that the
// request is built as the hand-written loop for that operation alone would build it).
// bench/hot_path/lib.sh has callgrind start a fresh count on entering measured_* and write it
// out on entering end_of_measurement, so that set-up, warm-up and what follows are not counted.
typedef int (*loop_function)(struct bench* b, long iterations);
#define LOOPS(NAME, OP)                                                                       \
  __attribute__((noinline)) int measured_##NAME(struct bench* b, long iterations);            \
  __attribute__((noinline)) int measured_##NAME(struct bench* b, long iterations) {           \
    return iterate(b, OP, 0, iterations);                                                     \
  }                                                                                           \
  __attribute__((noinline)) int measured_##NAME##_batch16(struct bench* b, long iterations);  \
  __attribute__((noinline)) int measured_##NAME##_batch16(struct bench* b, long iterations) { \
    return iterate(b, OP, 1, iterations);                                                     \
  }                                                                                           \
  static int warm_up_##NAME(struct bench* b, long iterations) {                               \
    return iterate(b, OP, 0, iterations);                                                     \
  }                                                                                           \
  static int warm_up_##NAME##_batch16(struct bench* b, long iterations) {                     \
    return iterate(b, OP, 1, iterations);                                                     \
  }
LOOPS(write, kWrite)
LOOPS(send, kSend)
LOOPS(read, kRead)
LOOPS(fetch_add, kFetchAdd)
LOOPS(compare_swap, kCompareSwap)
#undef LOOPS

// [op][batched]
static const loop_function kMeasured[kOps][2] = {
    {measured_write, measured_write_batch16},
    {measured_send, measured_send_batch16},
    {measured_read, measured_read_batch16},
    {measured_fetch_add, measured_fetch_add_batch16},
    {measured_compare_swap, measured_compare_swap_batch16},
};
static const loop_function kWarmUpLoops[kOps][2] = {
    {warm_up_write, warm_up_write_batch16},
    {warm_up_send, warm_up_send_batch16},
    {warm_up_read, warm_up_read_batch16},
    {warm_up_fetch_add, warm_up_fetch_add_batch16},
    {warm_up_compare_swap, warm_up_compare_swap_batch16},
};

__attribute__((noinline)) void end_of_measurement(void);
static volatile int measurement_ended;
__attribute__((noinline)) void end_of_measurement(void) { measurement_ended = 1; }

// Parses VARIANT (OP or OP-batch16); 0 if it names one.
static int parse_variant(const char* text, enum op* op, int* batched) {
  static const char kSuffix[] = "-batch16";
  const size_t length = strlen(text);
  const size_t suffix = sizeof kSuffix - 1;
  *batched = length > suffix && strcmp(text + length - suffix, kSuffix) == 0;
  const size_t name = *batched ? length - suffix : length;
  for (int i = 0; i < kOps; ++i) {
    if (strlen(kOpNames[i]) == name && strncmp(text, kOpNames[i], name) == 0) {
      *op = (enum op)i;
      return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  enum op ops[64];
  int batched[64];
  const int variants = argc - 2;
  int usage = argc < 3 || variants > 64;
  for (int i = 0; i < variants && !usage; ++i) {
    usage = parse_variant(argv[i + 2], &ops[i], &batched[i]);
  }
  if (usage) {
    fprintf(stderr,
            "usage: hot_path_raw REQUESTS VARIANT [VARIANT...]\n"
            "  VARIANT: OP or OP-batch16, OP one of write send read fetch_add compare_swap\n");
    return 2;
  }
  const long requests = strtol(argv[1], NULL, 10);
  if (requests <= 0) return fail("REQUESTS must be positive");

  struct bench b;
  memset(&b, 0, sizeof b);
  int status = set_up(&b);
  if (status == 0) memset(b.buffer, 0x5a, kMessageSize);
  for (int v = 0; v < variants && status == 0; ++v) {
    // Warm-up, not counted: first touches of the queues and the code.
    // Whole iterations: a batch of 16 runs ceil(requests / 16) of them.
    const long per = batched[v] ? kBatch : 1;
    const long iterations = (requests + per - 1) / per;
    status = kWarmUpLoops[ops[v]][batched[v]](&b, (kWarmUp + per - 1) / per);
    b.polls = 0;
    if (status == 0) {
      status = kMeasured[ops[v]][batched[v]](&b, iterations);
      end_of_measurement();
    }
    if (status != 0) {
      fail("a work request failed or did not complete");
    } else {
      const int inline_op = ops[v] == kWrite || ops[v] == kSend;
      printf(
          "raw %s%s requests %ld requests_per_iteration %ld polls_per_iteration %.3f inline %s "
          "post %s\n",
          kOpNames[ops[v]], batched[v] ? "-batch16" : "", iterations * per, per,
          (double)b.polls / (double)iterations,
          !inline_op                              ? "-"
          : (b.send_flags & IBV_SEND_INLINE) != 0 ? "yes"
                                                  : "no",
          b.qpx != NULL ? "extended" : "classic");
    }
  }
  if (status == 0 && memcmp(b.buffer, b.buffer + kHalf, kMessageSize) != 0) {
    status = fail("the data did not arrive");
  }
  // Leave without tearing down when it went well (nothing after the measurement matters).
  fflush(stdout);
  if (status == 0) _Exit(0);
  tear_down(&b);
  return status;
}
