#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# bench/recovery/report.py WORK OUT: the recovery benchmark's report (bench/recovery/run) from
# every rank's JSON line in WORK/<case>/run<k>/rank<r>.json: OUT/recovery.md, recovery.json and
# recovery-plot.dat (the plot's data, which run turns into recovery.png).
import json
import os
import statistics
import sys

work, out = sys.argv[1], sys.argv[2]


def ms(ns):
    return ns / 1e6


def one_run(directory):
    """What one job gave: the times from the SIGKILL to the last survivor's steps, the fresh
    start, the failure-free medians; or why it did not recover."""
    lines = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("rank") and name.endswith(".json")):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            for text in f:
                text = text.strip()
                if text.startswith("{"):
                    try:
                        lines.append(json.loads(text))
                    except json.JSONDecodeError:
                        pass
    victims = [line for line in lines if "kill_ns" in line]
    survivors = [line for line in lines if "kill_ns" not in line]
    failed = [line for line in survivors if not line.get("ok") or "round_ns" not in line]
    world = max([line.get("world", 0) for line in lines] or [0])
    if len(victims) != 1 or failed or len(survivors) != world - 1:
        errors = sorted({line.get("error", "no line") for line in failed})
        return {"ok": False, "world": world, "lines": len(lines), "errors": errors[:3]}
    kill = victims[0]["kill_ns"]
    return {
        "ok": True,
        "world": world,
        "detected_ms": ms(max(line["error_ns"] for line in survivors) - kill),
        "shrunk_ms": ms(max(line["shrunk_ns"] for line in survivors) - kill),
        "rebuilt_ms": ms(max(line["rebuilt_ns"] for line in survivors) - kill),
        "running_ms": ms(max(line["round_ns"] for line in survivors) - kill),
        "shrink_only_ms": ms(max(line["shrunk_ns"] - line["error_ns"] for line in survivors)),
        "fresh_ms": ms(max(line["fresh_ns"] for line in lines) - min(line["start_ns"] for line in lines)),
        "fresh_process_ms": (ms(max(line["fresh_ns"] for line in lines)
                                - min(line["process_start_ns"] for line in lines))
                             if all(line.get("process_start_ns", -1) >= 0 for line in lines)
                             else None),
        "barrier_ms": ms(statistics.median(line["barrier_ns"] for line in lines)),
        "agree_ms": ms(statistics.median(line["agree_ns"] for line in lines)),
    }


def cases():
    for case in sorted(os.listdir(work)):
        path = os.path.join(work, case)
        if not os.path.isdir(path):
            continue
        kind, n, bootstrap = case.split("-", 2)
        runs = [one_run(os.path.join(path, r)) for r in sorted(os.listdir(path))
                if os.path.isdir(os.path.join(path, r))]
        yield {"kind": kind, "ranks": int(n), "bootstrap": bootstrap, "runs": runs}


KEYS = ["detected_ms", "shrunk_ms", "running_ms", "fresh_ms", "fresh_process_ms", "shrink_only_ms",
        "agree_ms", "barrier_ms"]
table = []
for case in cases():
    good = [r for r in case["runs"] if r["ok"]]
    row = {"kind": case["kind"], "ranks": case["ranks"], "bootstrap": case["bootstrap"],
           "runs": len(case["runs"]), "recovered": len(good),
           "failures": [r for r in case["runs"] if not r["ok"]]}
    for key in KEYS:
        values = [r[key] for r in good if r[key] is not None]
        row[key] = statistics.median(values) if values else None
    # Each run's recovery against its own fresh start; the worst run counts for the target.
    ratios = [r["running_ms"] / r["fresh_ms"] for r in good if r["fresh_ms"] > 0]
    row["ratio_median"] = statistics.median(ratios) if ratios else None
    row["ratio_worst"] = max(ratios) if ratios else None
    ratios = [r["running_ms"] / r["fresh_process_ms"] for r in good if r["fresh_process_ms"]]
    row["process_ratio_median"] = statistics.median(ratios) if ratios else None
    row["process_ratio_worst"] = max(ratios) if ratios else None
    row["agree_over_barrier"] = (row["agree_ms"] / row["barrier_ms"]
                                 if row["agree_ms"] and row["barrier_ms"] else None)
    table.append(row)
table.sort(key=lambda r: (r["kind"], r["ranks"], r["bootstrap"]))

commit = ""
commit_file = os.path.join(work, "commit")
if os.path.exists(commit_file):
    with open(commit_file, encoding="utf-8") as f:
        commit = f.read().strip()


def fmt(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


md = ["# Recovery: from a rank's SIGKILL to the survivors' all-to-all running again", "",
      f"Made by `bench/recovery/run`{', library at ' + commit if commit else ''}. "
      "Every rank (`recovery_rank`) starts a fault-tolerant Node (`NodeBuilder::fault_tolerance()`, "
      "default detector settings) and a PersistentAllToAll of 4 KiB per pair, times 20 "
      "failure-free dissemination barriers and 20 agreements (`Node::agree`), then runs rounds; "
      "the last rank kills itself (SIGKILL) at the start of round 5. The survivors' round ends "
      "(`peer_gone`), they call `Node::shrink()`, build the all-to-all again on the shrunken Node "
      "over the same memory (through `Node::in_band_bootstrap()`) and run a round with every "
      "byte checked. All ranks share one kernel (the testbed's hosts are one guest), so times "
      "are taken from the victim's SIGKILL on one clock, to the last survivor reaching each "
      "step. *fresh start*: from the first rank's `main` to the last rank's first round "
      "checked (device, memory, bootstrap, connection, the collective), the same job a restart "
      "would run; *with start-up*: from the first rank's process start (/proc/self/stat, to "
      "10 ms: loading the program and its libraries too; not mpirun's own start-up before it "
      "starts the ranks). *hosts*: one rank per testbed host (RDMA "
      "between hosts crosses a bridge); *local*: every rank a process on one Soft-RoCE device "
      "of one host, its channels and control queue pairs looped back in the device, with a "
      "failure detector for that crowd on two vCPUs (probes of 7 x 268 ms, a stall timeout of "
      "30 s: the defaults declare live ranks failed there). Figures "
      "are medians over the runs; *worst* is the run with the largest recovery against its own "
      "fresh start.", "",
      "## Recovery", "",
      "| where | ranks | bootstrap | recovered | detected (ms) | shrunk (ms) | running again (ms) "
      "| fresh start (ms) | with start-up (ms) | recovery / fresh, median, worst "
      "| recovery / with start-up, median, worst |",
      "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for r in table:
    md.append(f"| {r['kind']} | {r['ranks']} | {r['bootstrap']} | {r['recovered']} of {r['runs']} "
              f"| {fmt(r['detected_ms'])} | {fmt(r['shrunk_ms'])} | {fmt(r['running_ms'])} "
              f"| {fmt(r['fresh_ms'])} | {fmt(r['fresh_process_ms'])} "
              f"| {fmt(r['ratio_median'], 3)}, {fmt(r['ratio_worst'], 3)} "
              f"| {fmt(r['process_ratio_median'], 3)}, {fmt(r['process_ratio_worst'], 3)} |")
md += ["", "![recovery and fresh start against the number of ranks](recovery.png)", "",
       "## Agreement", "",
       "Failure-free `Node::agree()` beside a dissemination barrier at the same N (medians of "
       "every rank's median of 20), and the shrink alone (from the round's error to holding the "
       "shrunken Node: an agreement after a failure, the fence, the barrier's and control "
       "plane's new view), the slowest survivor.", "",
       "| where | ranks | bootstrap | agree (ms) | dissemination barrier (ms) | agree / barrier "
       "| shrink after the error (ms) |",
       "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
for r in table:
    md.append(f"| {r['kind']} | {r['ranks']} | {r['bootstrap']} | {fmt(r['agree_ms'], 2)} "
              f"| {fmt(r['barrier_ms'], 2)} | {fmt(r['agree_over_barrier'], 2)} "
              f"| {fmt(r['shrink_only_ms'])} |")

md += ["", "## Targets", ""]
for r in table:
    if r["kind"] == "hosts" and r["ranks"] == 8 and r["ratio_worst"] is not None:
        met = "met" if r["ratio_worst"] <= 0.2 else "not met"
        process = r["process_ratio_worst"]
        met_process = "-" if process is None else "met" if process <= 0.2 else "not met"
        md.append(f"- 8 hosts, {r['bootstrap']}: recovery at most a fifth of a fresh start: worst "
                  f"run {r['ratio_worst']:.3f} from `main` ({met}), {fmt(process, 3)} with "
                  f"start-up ({met_process}).")
for r in table:
    if r["kind"] == "local" and r["ratio_worst"] is not None:
        met = "met" if r["ratio_worst"] <= 1 / 3 else "not met"
        md.append(f"- {r['ranks']} ranks on one device: recovery at most a third of a fresh "
                  f"start (the target is for 256): worst run {r['ratio_worst']:.3f} ({met}).")
for r in table:
    if r["agree_over_barrier"] is not None:
        met = "met" if r["agree_over_barrier"] <= 2 else "not met"
        md.append(f"- {r['kind']} {r['ranks']}, {r['bootstrap']}: failure-free agreement at most "
                  f"twice a dissemination barrier: {r['agree_over_barrier']:.2f}x ({met}).")
failures = [(r, f) for r in table for f in r["failures"]]
if failures:
    md += ["", "## Runs that did not recover", ""]
    for r, f in failures:
        md.append(f"- {r['kind']} {r['ranks']}, {r['bootstrap']}: {f['lines']} lines of "
                  f"{f['world']} ranks; " + "; ".join(f"`{e[:300]}`" for e in f["errors"]))

with open(os.path.join(out, "recovery.md"), "w", encoding="utf-8") as f:
    f.write("\n".join(md) + "\n")
with open(os.path.join(out, "recovery.json"), "w", encoding="utf-8") as f:
    json.dump({"commit": commit, "cases": table}, f, indent=1)
with open(os.path.join(out, "recovery-plot.dat"), "w", encoding="utf-8") as f:
    for r in table:
        if r["running_ms"] is not None:
            f.write(f"{r['ranks']} {r['running_ms']:.3f} {r['fresh_ms']:.3f} "
                    f"{r['kind']}-{r['bootstrap']}\n")
sys.exit(0 if table and all(r["recovered"] == r["runs"] for r in table) else 1)
