#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/wait_modes/report.py: turns the raw JSON lines of bench/wait_modes/run (one object per
wait_modes_pingpong run) into bench/results/wait_modes.md and wait_modes.json.

Usage: report.py RAW.jsonl MADE.txt COMMAND.txt OUT.md OUT.json
The report states only what the data computes; the hand-written reading is bench/wait_modes/notes.md.
Per mode and gap, each figure is the median over the repeats; every run is in the JSON."""
import json
import re
import statistics
import sys

raw_path, made_path, command_path, md_path, json_path = sys.argv[1:6]
runs = [json.loads(line) for line in open(raw_path, encoding="utf-8") if line.strip()]
made = open(made_path, encoding="utf-8").read().strip()
command = open(command_path, encoding="utf-8").read().strip()
found = re.search(r"library at (?:commit )?(\S+)$", made)
commit = found.group(1) if found else "unknown"
modes = ["spin", "block", "spin_then_block"]
figures = ["rtt_median_us", "rtt_p99_us", "cpu_process_us_per_rt", "cpu_user_us_per_rt",
           "cpu_system_us_per_rt", "cpu_ping_thread_us_per_rt", "cpu_pong_thread_us_per_rt"]
groups = {}
for run in runs:
    groups.setdefault((run["gap_us"], run["mode"]), []).append(run)
summary = []
for gap in sorted({g for g, _ in groups}):
    for mode in modes:
        group = groups.get((gap, mode))
        if not group:
            continue
        entry = {"mode": mode, "gap_us": gap, "runs": len(group),
                 "spin_us": group[0]["spin_us"], "iterations": group[0]["iterations"],
                 "size": group[0]["size"]}
        for figure in figures:
            entry[figure] = round(statistics.median(r[figure] for r in group), 2)
        entry["rtt_median_us_range"] = [min(r["rtt_median_us"] for r in group),
                                        max(r["rtt_median_us"] for r in group)]
        summary.append(entry)

with open(json_path, "w", encoding="utf-8") as out:
    json.dump({"tool": "bench/wait_modes/run", "command": command, "commit": commit,
               "made": made, "summary": summary, "runs": runs}, out, indent=2)
    out.write("\n")

lines = ["# Wait modes: latency and CPU time per round trip", "",
         "Made by `" + command + "` (see bench/README.md): " + made + ".", "",
         "Two threads of one process, each on one end of a loopback pair of Channels built with "
         "the mode, play ping-pong with small messages through the blocking calls (the pinger: "
         "send, wait for the answer; the ponger: wait, answer). *gap*: the pinger sleeps that "
         "long between round trips, so the ponger waits that long for each ping. Round-trip "
         "time as the pinger sees it (the gap not included); CPU time per round trip: the whole "
         "process (getrusage, user + system, which includes the Soft-RoCE kernel work done in "
         "the threads' system calls) and each thread (CLOCK_THREAD_CPUTIME_ID). Each figure is "
         "the median over the repeats (the range of the RTT median is given); every run is in "
         "`wait_modes.json`.", "",
         "| gap | mode | RTT median (us) | range | RTT p99 (us) | CPU/RT process (us) | user | system | ping thread | pong thread |",
         "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
for e in summary:
    mode = e["mode"] + (f" ({e['spin_us']} us)" if e["mode"] == "spin_then_block" else "")
    low, high = e["rtt_median_us_range"]
    lines.append(f"| {e['gap_us']} us | {mode} | {e['rtt_median_us']:.1f} | {low:.0f}-{high:.0f} | "
                 f"{e['rtt_p99_us']:.0f} | {e['cpu_process_us_per_rt']:.0f} | "
                 f"{e['cpu_user_us_per_rt']:.0f} | {e['cpu_system_us_per_rt']:.0f} | "
                 f"{e['cpu_ping_thread_us_per_rt']:.0f} | {e['cpu_pong_thread_us_per_rt']:.0f} |")
lines += ["", "A reading of these figures, written by hand and not regenerated with this report: "
          "[bench/wait_modes/notes.md](../wait_modes/notes.md).", ""]
with open(md_path, "w", encoding="utf-8") as out:
    out.write("\n".join(lines))
print(f"wait_modes: wrote {md_path} and {json_path} ({len(runs)} runs)")
