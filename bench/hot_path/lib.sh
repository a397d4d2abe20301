# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# bench/hot_path/lib.sh: callgrind runs of the hot-path programs, shared by bench/hot_path/run
# (the report) and bench/hot_path/guard (the regression guard). Sourced, not run.

# hot_path_callgrind DIR RUN NAMES COMMAND...: runs COMMAND (one program measuring several
# variants in turn) under callgrind, counting only the measured loops: callgrind starts a fresh
# count on entering a measured_* function and writes it out on entering end_of_measurement
# (--dump-before), so set-up and warm-ups are not counted. NAMES (space-separated) names the
# measured parts in the order the program measures them (the order of its arguments): the k-th
# part written on entering end_of_measurement is the k-th name's. Leaves DIR/RUN.log (the
# program's output) and, per name, DIR/NAME.out (its measured part) and DIR/NAME.tsv
# (callgrind.awk's figures); prints "NAME: FAILED ..." for each name without a part and returns
# 1 when the program failed or a part is missing (the parts written before a failure are kept).
# IBV_BENCH_RUN_TIMEOUT (1800 s) bounds the run.
hot_path_callgrind() {
  local dir=$1 run=$2 names=$3
  shift 3
  local awk_file
  awk_file="$(dirname "${BASH_SOURCE[0]}")/callgrind.awk"
  rm -f "$dir/$run.dump"*
  timeout "${IBV_BENCH_RUN_TIMEOUT:-1800}" valgrind --tool=callgrind \
    --dump-before='*measured_*' --dump-before='*end_of_measurement*' \
    --callgrind-out-file="$dir/$run.dump" "$@" >"$dir/$run.log" 2>&1
  local rc=$?
  # The parts that end where end_of_measurement begins are the measured loops, in order
  # (callgrind numbers its dumps .1, .2, ...).
  local -a parts
  mapfile -t parts < <(grep -l '^desc: Trigger: --dump-before=.*end_of_measurement' \
    "$dir/$run.dump".* 2>/dev/null | sort -V)
  local name k=0 missing=0
  for name in $names; do
    if [[ -n ${parts[k]:-} ]]; then
      mv "${parts[k]}" "$dir/$name.out"
      awk -f "$(dirname "$awk_file")/../callgrind_names.awk" -f "$awk_file" "$dir/$name.out" \
        >"$dir/$name.tsv"
    else
      rm -f "$dir/$name.out" "$dir/$name.tsv"
      echo "  $name: FAILED (exit $rc; $dir/$run.log)"
      missing=$((missing + 1))
    fi
    k=$((k + 1))
  done
  rm -f "$dir/$run.dump"*
  if ((rc != 0 || missing > 0)); then
    echo "  $run: exit $rc, $missing of the measurements missing"
    tail -n 5 "$dir/$run.log" | sed 's/^/    | /'
    return 1
  fi
}

# hot_path_total DIR NAME: all instructions of the measured loop of NAME (hot_path_callgrind).
hot_path_total() {
  awk -F'\t' '$1 == "total" { print $2 }' "$1/$2.tsv"
}

# hot_path_requests STYLE N: the requests a variant of STYLE measures when asked for N (the
# programs' first argument): N, or in a batch of 16 (batch16, raw-batch16), whole batches of 16,
# ceil(N / 16) of them.
hot_path_requests() {
  case $1 in
    batch16 | raw-batch16) echo $(((($2 + 15) / 16) * 16)) ;;
    *) echo "$2" ;;
  esac
}
