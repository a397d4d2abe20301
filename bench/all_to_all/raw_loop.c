// SPDX-License-Identifier: MIT
// bench/all_to_all/raw_loop.c: the writes of a PersistentAllToAll round in raw libibverbs, the
// baseline bench/all_to_all/run --callgrind counts the library's instructions against. MPI
// starts the ranks and exchanges the queue pairs' endpoints and the receive memory once
// (MPI_Alltoall of one entry per peer); every round then uses verbs only: per peer (rank + 1,
// rank + 2, ... modulo N, all at once) one signaled RDMA write with immediate data (the round
// modulo 128 and the size, as the library encodes them) from the send memory into the peer's
// slot for this rank and round (two slots per peer), the own part copied locally, then
// ibv_poll_cq until the N - 1 writes are complete and N - 1 parts have landed, each landed part's
// receive posted again at once. No credits: a rank finishes round n only once every peer has
// started it, so no sender runs more than one round ahead and two slots are enough when nobody
// holds a round (the library's collective lets the caller hold rounds, hence its credits).
//
//   all_to_all_raw --size BYTES [--rounds R | --seconds T] [--warmup W] [--callgrind GAP]
//                  [--settle-us US] [--own-part yes|no] [--wait spin|block]
//
// --wait block: when a poll finds nothing, arm the CQ, poll once more, then sleep on its
// completion channel (default spin: poll again at once).
// Without --callgrind it times R rounds after W warm-up rounds and a barrier and rank 0 prints
// one JSON line like all_to_all_ours (--seconds T: as many rounds as take about T seconds at
// the pace of rank 0's warm-up, as there). With --callgrind GAP: R rounds in measured_early(), GAP
// not measured, R in measured_late(), each ended by end_of_measurement(), every measured round
// sleeping --settle-us (default 20000) in settle() between posting and polling, as ours.cpp
// does. Device: IBV_DEVICE, else IBV_TEST_DEVICE, else the first; GID index:
// IBV_TEST_GID_INDEX, else the first IPv4-mapped entry of port 1.
#define _POSIX_C_SOURCE 200809L  // nanosleep in C11 without extensions
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
  kPort = 1,
  kSlots = 2,
  kReceivesPerPeer = 4,  // parts of at most two rounds in flight per sender, and room
  kBatch = 32,
};

// What a rank tells each peer: the queue pair it made for that peer, its GID, its receive
// memory.
struct endpoint {
  uint32_t qp_num;
  uint32_t rkey;
  uint64_t address;
  uint8_t gid[16];
};

struct rank_state {
  int rank;
  int world;
  size_t size;
  int own_part;
  int blocking;  // --wait block
  struct ibv_context* context;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_comp_channel* channel;  // --wait block: sleep on it when a poll finds nothing
  struct ibv_qp** qps;               // [peer]; NULL for this rank
  struct ibv_mr* send_mr;
  struct ibv_mr* receive_mr;
  unsigned char* send;
  unsigned char* receive;
  struct endpoint* theirs;  // [peer]
  uint64_t round;
  int early;  // parts of the next round that landed while this one was awaited
};

static int fail(const char* what) {
  fprintf(stderr, "all_to_all_raw: %s (errno %d: %s)\n", what, errno, strerror(errno));
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

static struct ibv_context* open_device(void) {
  const char* name = getenv("IBV_DEVICE");
  if (name == NULL || *name == '\0') name = getenv("IBV_TEST_DEVICE");
  if (name != NULL && *name == '\0') name = NULL;
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

static int post_receive(struct rank_state* s, int peer) {
  struct ibv_recv_wr wr = {0};
  struct ibv_recv_wr* bad = NULL;
  wr.wr_id = (uint64_t)peer;
  return ibv_post_recv(s->qps[peer], &wr, &bad);
}

// Queue pairs per peer on one CQ, the endpoints exchanged, every queue pair connected
// (RESET -> INIT -> RTR -> RTS with the library's defaults: timeout 14, retry 6, RNR retry 7)
// and its receives posted; ends in a barrier.
static int set_up(struct rank_state* s) {
  s->context = open_device();
  if (s->context == NULL) return fail("cannot open the RDMA device");
  struct ibv_port_attr port;
  if (ibv_query_port(s->context, kPort, &port) != 0) return fail("cannot query port 1");
  const int gid_index = choose_gid_index(s->context, &port);
  union ibv_gid my_gid;
  if (ibv_query_gid(s->context, kPort, gid_index, &my_gid) != 0) return fail("no such GID");
  const int peers = s->world - 1;
  s->pd = ibv_alloc_pd(s->context);
  if (s->pd == NULL) return fail("ibv_alloc_pd");
  if (s->blocking) {
    s->channel = ibv_create_comp_channel(s->context);
    if (s->channel == NULL) return fail("ibv_create_comp_channel");
  }
  s->cq = ibv_create_cq(s->context, peers > 0 ? peers * (2 + kReceivesPerPeer) : 1, NULL,
                        s->channel, 0);
  if (s->cq == NULL) return fail("ibv_create_cq");
  const size_t send_bytes = s->size * (size_t)s->world;
  const size_t receive_bytes = s->size * (size_t)s->world * kSlots;
  s->send = malloc(send_bytes);
  s->receive = calloc(receive_bytes, 1);
  s->qps = calloc((size_t)s->world, sizeof *s->qps);
  s->theirs = calloc((size_t)s->world, sizeof *s->theirs);
  struct endpoint* mine = calloc((size_t)s->world, sizeof *mine);
  if (s->send == NULL || s->receive == NULL || s->qps == NULL || s->theirs == NULL ||
      mine == NULL) {
    return fail("out of memory");
  }
  for (size_t i = 0; i < send_bytes; ++i) s->send[i] = (unsigned char)(i * 7U + (unsigned)s->rank);
  s->send_mr = ibv_reg_mr(s->pd, s->send, send_bytes, IBV_ACCESS_LOCAL_WRITE);
  s->receive_mr = ibv_reg_mr(s->pd, s->receive, receive_bytes,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s->send_mr == NULL || s->receive_mr == NULL) return fail("ibv_reg_mr");
  for (int peer = 0; peer < s->world; ++peer) {
    if (peer == s->rank) continue;
    struct ibv_qp_init_attr init = {0};
    init.send_cq = s->cq;
    init.recv_cq = s->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 2;
    init.cap.max_recv_wr = kReceivesPerPeer;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    s->qps[peer] = ibv_create_qp(s->pd, &init);
    if (s->qps[peer] == NULL) return fail("ibv_create_qp");
    mine[peer].qp_num = s->qps[peer]->qp_num;
    mine[peer].rkey = s->receive_mr->rkey;
    mine[peer].address = (uint64_t)(uintptr_t)s->receive;
    memcpy(mine[peer].gid, my_gid.raw, sizeof mine[peer].gid);
  }
  const int rc = MPI_Alltoall(mine, (int)sizeof *mine, MPI_BYTE, s->theirs, (int)sizeof *mine,
                              MPI_BYTE, MPI_COMM_WORLD);
  free(mine);
  if (rc != MPI_SUCCESS) return fail("MPI_Alltoall of the endpoints");
  for (int peer = 0; peer < s->world; ++peer) {
    if (peer == s->rank) continue;
    struct ibv_qp* qp = s->qps[peer];
    struct ibv_qp_attr attr = {0};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = kPort;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
      return fail("INIT");
    }
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = port.active_mtu;
    attr.dest_qp_num = s->theirs[peer].qp_num;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = kPort;
    attr.ah_attr.is_global = 1;
    memcpy(attr.ah_attr.grh.dgid.raw, s->theirs[peer].gid, sizeof attr.ah_attr.grh.dgid.raw);
    attr.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    attr.ah_attr.grh.hop_limit = 64;
    if (ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
      return fail("RTR");
    }
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 6;
    attr.rnr_retry = 7;
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
      return fail("RTS");
    }
    for (int i = 0; i < kReceivesPerPeer; ++i) {
      if (post_receive(s, peer) != 0) return fail("ibv_post_recv");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

// Sleeps `us` microseconds (the callgrind mode: bench/all_to_all/run subtracts this function's
// instructions).
__attribute__((noinline)) static void settle(unsigned us) {
  struct timespec pause = {.tv_sec = (time_t)(us / 1000000U),
                           .tv_nsec = (long)(us % 1000000U) * 1000L};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
}

// ibv_poll_cq (inline) in a function of its own, so that bench/all_to_all/run finds the
// provider's poll function among its callees in the callgrind output (Soft-RoCE's provider has
// no symbols) and counts the polls of a round.
__attribute__((noinline)) static int poll_completions(struct ibv_cq* cq, struct ibv_wc* wc) {
  return ibv_poll_cq(cq, kBatch, wc);
}

// One round: the writes posted, [settle], then polled until this round is complete here.
static int round_trip(struct rank_state* s, unsigned settle_us) {
  const uint64_t round = s->round++;
  const size_t slot = (size_t)(round % kSlots);
  const uint32_t immediate = (uint32_t)((round & 0x7fU) << 24U) | (uint32_t)s->size;
  for (int step = 1; step < s->world; ++step) {
    const int peer = (s->rank + step) % s->world;
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(s->send + (size_t)peer * s->size),
                          .length = (uint32_t)s->size,
                          .lkey = s->send_mr->lkey};
    struct ibv_send_wr wr = {0};
    struct ibv_send_wr* bad = NULL;
    wr.wr_id = (uint64_t)peer;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(immediate);
    wr.wr.rdma.remote_addr =
        s->theirs[peer].address + (slot * (size_t)s->world + (size_t)s->rank) * s->size;
    wr.wr.rdma.rkey = s->theirs[peer].rkey;
    if (ibv_post_send(s->qps[peer], &wr, &bad) != 0) return fail("ibv_post_send");
  }
  if (s->own_part) {
    memcpy(s->receive + (slot * (size_t)s->world + (size_t)s->rank) * s->size,
           s->send + (size_t)s->rank * s->size, s->size);
  }
  if (settle_us > 0) settle(settle_us);
  int written = 0;
  int landed = s->early;
  int next = 0;
  const int peers = s->world - 1;
  struct ibv_wc wc[kBatch];
  while (written < peers || landed < peers) {
    int n = poll_completions(s->cq, wc);
    if (n == 0 && s->blocking) {
      // Arm, poll once more (a completion before the arming raises no event), then sleep.
      if (ibv_req_notify_cq(s->cq, 0) != 0) return fail("ibv_req_notify_cq");
      n = poll_completions(s->cq, wc);
      if (n == 0) {
        struct ibv_cq* event_cq = NULL;
        void* context = NULL;
        if (ibv_get_cq_event(s->channel, &event_cq, &context) != 0) return fail("ibv_get_cq_event");
        ibv_ack_cq_events(event_cq, 1);
        continue;
      }
    }
    if (n < 0) return fail("ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        fprintf(stderr, "all_to_all_raw: rank %d: completion from peer %d: %s\n", s->rank,
                (int)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (wc[i].opcode == IBV_WC_RDMA_WRITE) {
        ++written;
        continue;
      }
      // A part landed: this round's, or the next one's from a peer a round ahead.
      const uint32_t bits = (ntohl(wc[i].imm_data) >> 24U) & 0x7fU;
      if (bits == (round & 0x7fU)) {
        ++landed;
      } else {
        ++next;
      }
      if (post_receive(s, (int)wc[i].wr_id) != 0) return fail("ibv_post_recv");
    }
  }
  s->early = next;
  return 0;
}

static void rounds(struct rank_state* s, unsigned long long count, unsigned settle_us) {
  for (unsigned long long i = 0; i < count; ++i) round_trip(s, settle_us);
}

// The measured parts (callgrind starts a fresh count on entering measured_* and writes it out
// on entering end_of_measurement: bench/hot_path/lib.sh).
__attribute__((noinline)) void measured_early(struct rank_state* s, unsigned long long count,
                                              unsigned settle_us) {
  rounds(s, count, settle_us);
}
__attribute__((noinline)) void measured_late(struct rank_state* s, unsigned long long count,
                                             unsigned settle_us) {
  rounds(s, count, settle_us);
}
volatile int measurement_ended = 0;
__attribute__((noinline)) void end_of_measurement(void) { measurement_ended = 1; }

static int parse_count(const char* text, unsigned long long* value) {
  char* end = NULL;
  errno = 0;
  if (text == NULL || text[0] == '-' || text[0] == '\0') return 0;
  *value = strtoull(text, &end, 10);
  return end != text && *end == '\0' && errno == 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  struct rank_state s = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.world);
  unsigned long long size = 0;
  unsigned long long count = 100;
  unsigned long long warmup = 10;
  unsigned long long gap = 0;
  unsigned long long settle_us = 20000;
  double seconds_wanted = 0;
  int callgrind = 0;
  s.own_part = 1;
  const char* problem = NULL;
  for (int i = 1; i < argc && problem == NULL; i += 2) {
    const char* flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : NULL;
    if (value == NULL) {
      problem = "an option wants a value";
    } else if (strcmp(flag, "--size") == 0) {
      if (!parse_count(value, &size)) problem = "--size wants a whole number";
    } else if (strcmp(flag, "--rounds") == 0) {
      if (!parse_count(value, &count)) problem = "--rounds wants a whole number";
    } else if (strcmp(flag, "--warmup") == 0) {
      if (!parse_count(value, &warmup)) problem = "--warmup wants a whole number";
    } else if (strcmp(flag, "--seconds") == 0) {
      char* end = NULL;
      seconds_wanted = strtod(value, &end);
      if (end == value || *end != '\0' || !(seconds_wanted > 0 && seconds_wanted < 3600)) {
        problem = "--seconds wants a number of seconds above 0 and below 3600";
      }
    } else if (strcmp(flag, "--callgrind") == 0) {
      if (!parse_count(value, &gap)) problem = "--callgrind wants a whole number of rounds";
      callgrind = 1;
    } else if (strcmp(flag, "--settle-us") == 0) {
      if (!parse_count(value, &settle_us) || settle_us > 10000000ULL) {
        problem = "--settle-us wants a whole number up to 10000000";
      }
    } else if (strcmp(flag, "--wait") == 0) {
      if (strcmp(value, "spin") != 0 && strcmp(value, "block") != 0)
        problem = "--wait is spin or block";
      s.blocking = strcmp(value, "block") == 0;
    } else if (strcmp(flag, "--own-part") == 0) {
      if (strcmp(value, "yes") != 0 && strcmp(value, "no") != 0)
        problem = "--own-part is yes or no";
      s.own_part = strcmp(value, "yes") == 0;
    } else {
      problem = "unknown option";
    }
  }
  if (problem == NULL && (size == 0 || size >= (1ULL << 24U))) {
    problem = "--size must be from 1 to 2^24 - 1 (the immediate data's 24 bits)";
  }
  if (problem == NULL && count == 0) problem = "--rounds must be at least 1";
  if (problem == NULL && seconds_wanted > 0 && (warmup < 2 || callgrind)) {
    problem = "--seconds needs --warmup 2 or more, and no --callgrind";
  }
  if (problem != NULL) {
    if (s.rank == 0) {
      fprintf(stderr,
              "all_to_all_raw: %s\nusage: all_to_all_raw --size BYTES [--rounds R | --seconds T] "
              "[--warmup W] [--callgrind GAP] [--settle-us US] [--own-part yes|no] "
              "[--wait spin|block]\n",
              problem);
    }
    MPI_Finalize();
    return 2;
  }
  s.size = (size_t)size;
  if (set_up(&s) != 0) return 1;

  // The warm-up, its rounds after the first timed: the pace --seconds counts with.
  double paced_from = 0;
  for (unsigned long long i = 0; i < warmup; ++i) {
    if (i == 1) paced_from = MPI_Wtime();
    round_trip(&s, 0);
  }
  if (seconds_wanted > 0) {
    const double per_round = (MPI_Wtime() - paced_from) / (double)(warmup - 1);
    double wanted = ceil(seconds_wanted / (per_round > 1e-7 ? per_round : 1e-7));
    MPI_Bcast(&wanted, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);  // rank 0's count, on every rank
    count = wanted < 3 ? 3 : wanted > 1e7 ? 10000000ULL : (unsigned long long)wanted;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double seconds = 0;
  if (callgrind) {
    measured_early(&s, count, (unsigned)settle_us);
    end_of_measurement();
    rounds(&s, gap, 0);
    measured_late(&s, count, (unsigned)settle_us);
    end_of_measurement();
  } else {
    const double started = MPI_Wtime();
    rounds(&s, count, 0);
    seconds = MPI_Wtime() - started;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  double* all = s.rank == 0 ? malloc(sizeof(double) * (size_t)s.world) : NULL;
  MPI_Gather(&seconds, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (s.rank == 0) {
    printf(
        "{\"tool\":\"raw\",\"ranks\":%d,\"size\":%llu,\"rounds\":%llu,\"warmup\":%llu,"
        "\"bytes_per_rank\":%llu,\"seconds\":[",
        s.world, size, count, warmup, count * (unsigned long long)(s.world - 1) * size);
    for (int r = 0; r < s.world; ++r) printf("%s%.6f", r > 0 ? "," : "", all[r]);
    printf("],\"own_part\":%s,\"device\":\"%s\"}\n", s.own_part ? "true" : "false",
           ibv_get_device_name(s.context->device));
    free(all);
  }
  for (int peer = 0; peer < s.world; ++peer) {
    if (s.qps[peer] != NULL) ibv_destroy_qp(s.qps[peer]);
  }
  ibv_dereg_mr(s.send_mr);
  ibv_dereg_mr(s.receive_mr);
  ibv_destroy_cq(s.cq);
  if (s.channel != NULL) ibv_destroy_comp_channel(s.channel);
  ibv_dealloc_pd(s.pd);
  ibv_close_device(s.context);
  free(s.send);
  free(s.receive);
  free(s.qps);
  free(s.theirs);
  MPI_Finalize();
  return 0;
}
