// SPDX-License-Identifier: MIT
// bench/all_to_all/mpi.c: one rank of the all-to-all benchmark, Open MPI's side: per round
// every rank sends SIZE bytes to every rank with MPI_Alltoall, MPI_Alltoallv (counts SIZE,
// displacements r x SIZE), or the persistent MPIX_Alltoallv_init (Open MPI's mpi-ext.h; built
// once, then MPI_Start + MPI_Wait per round) when this Open MPI has it. After W warm-up rounds
// and an MPI_Barrier each rank times R rounds (MPI_Wtime); rank 0 prints one JSON line with
// every rank's seconds, in the same shape as all_to_all_ours (bench/all_to_all/ours.cpp).
//
//   all_to_all_mpi --variant alltoall|alltoallv|persistent --size BYTES
//                  [--rounds R | --seconds T] [--warmup W]
//
// --seconds T: as many rounds as take about T seconds at the pace of rank 0's warm-up (its
// rounds after the first; W at least 2), the same count on every rank (MPI_Bcast).
//
// Which transport MPI uses is mpirun's business (bench/all_to_all/run: --mca btl tcp,self);
// the JSON line names the variant only. Exit status 0 on success, 2 for a usage error, 3 when
// the persistent variant is asked for and this Open MPI lacks it.
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define A2A_HAVE_PERSISTENT 1
#else
#define A2A_HAVE_PERSISTENT 0
#endif

enum variant { kAlltoall, kAlltoallv, kPersistent };

static const char* const kVariantNames[] = {"alltoall", "alltoallv", "persistent"};

static int usage(int rank, const char* problem) {
  if (rank == 0) {
    fprintf(stderr,
            "all_to_all_mpi: %s\nusage: all_to_all_mpi --variant alltoall|alltoallv|persistent "
            "--size BYTES [--rounds R | --seconds T] [--warmup W]\n",
            problem);
  }
  return 2;
}

static int parse_count(const char* text, unsigned long long* value) {
  char* end = NULL;
  errno = 0;
  if (text == NULL || text[0] == '-' || text[0] == '\0') return 0;
  *value = strtoull(text, &end, 10);
  return end != text && *end == '\0' && errno == 0;
}

static int fail(const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fprintf(stderr, "all_to_all_mpi: %s failed: %s\n", what, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

// One round of the chosen variant.
static int one_round(int chosen, const unsigned char* send, unsigned char* receive, int size,
                     const int* counts, const int* displacements, MPI_Request* request) {
  switch (chosen) {
    case kAlltoall:
      return MPI_Alltoall(send, size, MPI_BYTE, receive, size, MPI_BYTE, MPI_COMM_WORLD);
    case kAlltoallv:
      return MPI_Alltoallv(send, counts, displacements, MPI_BYTE, receive, counts, displacements,
                           MPI_BYTE, MPI_COMM_WORLD);
    default: {
      const int rc = MPI_Start(request);
      return rc == MPI_SUCCESS ? MPI_Wait(request, MPI_STATUS_IGNORE) : rc;
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int chosen = -1;
  unsigned long long size = 0;
  unsigned long long rounds = 100;
  unsigned long long warmup = 10;
  double seconds_wanted = 0;
  int bad = 0;
  for (int i = 1; i < argc && !bad; i += 2) {
    const char* flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : NULL;
    if (value == NULL) {
      bad = usage(rank, "an option wants a value");
    } else if (strcmp(flag, "--variant") == 0) {
      for (int v = 0; v < 3; ++v) {
        if (strcmp(value, kVariantNames[v]) == 0) chosen = v;
      }
      if (chosen < 0) bad = usage(rank, "--variant is alltoall, alltoallv or persistent");
    } else if (strcmp(flag, "--size") == 0) {
      if (!parse_count(value, &size)) bad = usage(rank, "--size wants a whole number");
    } else if (strcmp(flag, "--rounds") == 0) {
      if (!parse_count(value, &rounds)) bad = usage(rank, "--rounds wants a whole number");
    } else if (strcmp(flag, "--warmup") == 0) {
      if (!parse_count(value, &warmup)) bad = usage(rank, "--warmup wants a whole number");
    } else if (strcmp(flag, "--seconds") == 0) {
      char* end = NULL;
      seconds_wanted = strtod(value, &end);
      if (end == value || *end != '\0' || !(seconds_wanted > 0 && seconds_wanted < 3600)) {
        bad = usage(rank, "--seconds wants a number of seconds above 0 and below 3600");
      }
    } else {
      bad = usage(rank, "unknown option");
    }
  }
  if (!bad && chosen < 0) bad = usage(rank, "--variant is needed");
  if (!bad && (size == 0 || size > (unsigned long long)INT32_MAX)) {
    bad = usage(rank, "--size must be from 1 to 2^31 - 1");
  }
  if (!bad && rounds == 0) bad = usage(rank, "--rounds must be at least 1");
  if (!bad && seconds_wanted > 0 && warmup < 2) {
    bad = usage(rank, "--seconds needs --warmup 2 or more");
  }
  if (bad) {
    MPI_Finalize();
    return bad;
  }
#if !A2A_HAVE_PERSISTENT
  if (chosen == kPersistent) {
    if (rank == 0) {
      fprintf(stderr, "all_to_all_mpi: this Open MPI has no MPIX_Alltoallv_init (mpi-ext.h)\n");
    }
    MPI_Finalize();
    return 3;
  }
#endif

  const size_t bytes = (size_t)size * (size_t)world;
  unsigned char* send = malloc(bytes);
  unsigned char* receive = malloc(bytes);
  int* counts = malloc(sizeof(int) * (size_t)world);
  int* displacements = malloc(sizeof(int) * (size_t)world);
  if (send == NULL || receive == NULL || counts == NULL || displacements == NULL) {
    fprintf(stderr, "all_to_all_mpi: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  for (size_t i = 0; i < bytes; ++i) send[i] = (unsigned char)(i * 7U + (unsigned)rank);
  memset(receive, 0, bytes);
  // Displacements are ints (MPI-3): a world x size over 2^31 does not fit.
  if ((unsigned long long)world * size > (unsigned long long)INT32_MAX) {
    if (rank == 0) fprintf(stderr, "all_to_all_mpi: world x size is over 2^31 - 1 bytes\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
  for (int r = 0; r < world; ++r) {
    counts[r] = (int)size;
    displacements[r] = (int)((unsigned long long)r * size);
  }

  MPI_Request request = MPI_REQUEST_NULL;
#if A2A_HAVE_PERSISTENT
  if (chosen == kPersistent) {
    const int rc =
        MPIX_Alltoallv_init(send, counts, displacements, MPI_BYTE, receive, counts, displacements,
                            MPI_BYTE, MPI_COMM_WORLD, MPI_INFO_NULL, &request);
    if (rc != MPI_SUCCESS) return fail("MPIX_Alltoallv_init", rc);
  }
#endif

  // The warm-up, its rounds after the first timed: the pace --seconds counts with.
  double paced_from = 0;
  for (unsigned long long i = 0; i < warmup; ++i) {
    if (i == 1) paced_from = MPI_Wtime();
    const int rc = one_round(chosen, send, receive, (int)size, counts, displacements, &request);
    if (rc != MPI_SUCCESS) return fail(kVariantNames[chosen], rc);
  }
  if (seconds_wanted > 0) {
    const double per_round = (MPI_Wtime() - paced_from) / (double)(warmup - 1);
    double wanted = ceil(seconds_wanted / (per_round > 1e-7 ? per_round : 1e-7));
    MPI_Bcast(&wanted, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);  // rank 0's count, on every rank
    rounds = wanted < 3 ? 3 : wanted > 1e7 ? 10000000ULL : (unsigned long long)wanted;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double started = MPI_Wtime();
  for (unsigned long long i = 0; i < rounds; ++i) {
    const int rc = one_round(chosen, send, receive, (int)size, counts, displacements, &request);
    if (rc != MPI_SUCCESS) return fail(kVariantNames[chosen], rc);
  }
  const double seconds = MPI_Wtime() - started;
  if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);

  double* all = rank == 0 ? malloc(sizeof(double) * (size_t)world) : NULL;
  MPI_Gather(&seconds, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(library, &length);
    for (int i = 0; i < length; ++i) {
      if (library[i] == '"' || library[i] == '\\' || (unsigned char)library[i] < 0x20) {
        library[i] = ' ';
      }
    }
    while (length > 0 && library[length - 1] == ' ') --length;
    library[length] = '\0';
    printf(
        "{\"tool\":\"%s\",\"ranks\":%d,\"size\":%llu,\"rounds\":%llu,\"warmup\":%llu,"
        "\"bytes_per_rank\":%llu,\"seconds\":[",
        kVariantNames[chosen], world, size, rounds, warmup,
        rounds * (unsigned long long)(world - 1) * size);
    for (int r = 0; r < world; ++r) printf("%s%.6f", r > 0 ? "," : "", all[r]);
    printf("],\"library\":\"%s\"}\n", library);
    free(all);
  }
  free(send);
  free(receive);
  free(counts);
  free(displacements);
  MPI_Finalize();
  return 0;
}
