# shellcheck shell=bash
# bench/hot_path/lib.sh: one callgrind run of a hot-path program, shared by bench/hot_path/run
# (the report) and bench/hot_path/guard (the regression guard). Sourced, not run.

# hot_path_callgrind DIR NAME COMMAND...: runs COMMAND under callgrind, counting only the
# measured loop: callgrind starts a fresh count on entering the program's measured_* function
# and writes it out on entering end_of_measurement (--dump-before), so set-up and warm-up are
# not counted. Leaves DIR/NAME.log (the program's output), DIR/NAME.out (the measured part) and
# DIR/NAME.tsv (callgrind.awk's figures); prints "NAME: FAILED ..." and returns 1 when the
# program failed or nothing was measured. IBV_BENCH_RUN_TIMEOUT (900 s) bounds one run.
hot_path_callgrind() {
  local dir=$1 name=$2
  shift 2
  local awk_file
  awk_file="$(dirname "${BASH_SOURCE[0]}")/callgrind.awk"
  timeout "${IBV_BENCH_RUN_TIMEOUT:-900}" valgrind --tool=callgrind \
    --dump-before='*measured_*' --dump-before='*end_of_measurement*' \
    --callgrind-out-file="$dir/$name.dump" "$@" >"$dir/$name.log" 2>&1
  local rc=$?
  # The part that ends where end_of_measurement begins is the measured loop.
  local part
  part=$(grep -l '^desc: Trigger: --dump-before=.*end_of_measurement' "$dir/$name.dump"* 2>/dev/null | head -n 1)
  [[ -z $part ]] || mv "$part" "$dir/$name.out"
  rm -f "$dir/$name.dump"*
  if ((rc != 0)) || [[ ! -s $dir/$name.out ]]; then
    echo "  $name: FAILED (exit $rc; $dir/$name.log)"
    tail -n 5 "$dir/$name.log" | sed 's/^/    | /'
    return 1
  fi
  awk -f "$awk_file" "$dir/$name.out" >"$dir/$name.tsv"
}

# hot_path_total DIR NAME: all instructions of the measured loop of a hot_path_callgrind run.
hot_path_total() {
  awk -F'\t' '$1 == "total" { print $2 }' "$1/$2.tsv"
}
