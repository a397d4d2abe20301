# SPDX-License-Identifier: MIT
"""bench/all_to_all/report.py: the report of bench/all_to_all/run from its raw results.

Usage: python3 bench/all_to_all/report.py WORK OUT

WORK holds one directory per boot: hosts-N/ (meta.json, runs.jsonl, boot.json) from the
throughput runs, callgrind-N/ (meta.json, {raw,ours}-{early,late}.tsv, boot.json) from
--callgrind. Writes OUT/all_to_all.json, OUT/all_to_all.md and WORK/plot.gp (gnuplot makes
OUT/all_to_all.png from it). A section whose raw results are not in WORK (the throughput
runs, or the callgrind counts) is kept from the all_to_all.json already in OUT, so that a
--callgrind run does not drop the throughput figures and the other way round.
"""

import json
import os
import re
import statistics
import sys

MIB = 1048576.0
TOOLS = ["ours", "ours_spin", "alltoall", "alltoallv", "persistent", "raw", "perftest"]
MPI_TOOLS = ["alltoall", "alltoallv", "persistent"]
LABELS = {
    "ours": "ours",
    "ours_spin": "ours, spin",
    "alltoall": "MPI_Alltoall (tcp)",
    "alltoallv": "MPI_Alltoallv (tcp)",
    "persistent": "MPIX_Alltoallv_init (tcp)",
    "raw": "raw verbs loop",
    "perftest": "perftest ring (limit)",
}
TARGET_SIZE = 65536


def median(values):
    return statistics.median(values) if values else None


def figure_of(record):
    """A run's figure: bytes per rank per second in MiB/s (perftest: the clients' mean)."""
    result = record.get("result") or {}
    if record.get("tool") == "perftest":
        clients = result.get("clients_MiBps") or []
        return sum(clients) / len(clients) if clients else None
    seconds = result.get("seconds") or []
    slowest = max(seconds) if seconds else 0
    if slowest <= 0:
        return None
    return result["bytes_per_rank"] / slowest / MIB


def read_jsonl(path):
    records = []
    if os.path.isfile(path):
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass
    return records


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def boots(work, kind):
    found = []
    if os.path.isdir(work):
        for name in os.listdir(work):
            m = re.fullmatch(kind + r"-(\d+)", name)
            if m and os.path.isfile(os.path.join(work, name, "meta.json")):
                found.append((int(m.group(1)), os.path.join(work, name)))
    return sorted(found)


# ---- throughput ---------------------------------------------------------------------------


def throughput_of(n, path):
    meta = read_json(os.path.join(path, "meta.json")) or {}
    boot = read_json(os.path.join(path, "boot.json")) or {}
    runs = read_jsonl(os.path.join(path, "runs.jsonl"))
    sizes = {}
    for record in runs:
        entry = sizes.setdefault(record["size"], {}).setdefault(
            record["tool"], {"runs": [], "failures": []}
        )
        value = figure_of(record) if record.get("status") == "ok" else None
        record_out = {
            "run": record.get("run"),
            "attempt": record.get("attempt"),
            "status": record.get("status"),
            "MiBps": round(value, 3) if value is not None else None,
            "wall_s": record.get("wall_s"),
            "veth_tx_bytes": record.get("veth_tx_bytes"),
        }
        if record.get("note"):
            record_out["note"] = record["note"]
        result = record.get("result") or {}
        for key in ("rounds", "bytes_per_rank", "seconds", "clients_MiBps", "window_s",
                    "peers_in_flight", "slots_per_peer", "in_flight", "wait", "library"):
            if key in result:
                record_out[key] = result[key]
        entry["runs"].append(record_out)
        if value is None:
            entry["failures"].append(record.get("note") or record.get("status"))
    table = []
    for size in sorted(sizes):
        row = {"bytes": size, "tools": {}}
        for tool, entry in sizes[size].items():
            values = [r["MiBps"] for r in entry["runs"] if r["MiBps"] is not None]
            # Where the traffic went: the bytes the hosts' netdevs sent during a run, against
            # the bytes the measured rounds alone moved between ranks (ranks x bytes per rank).
            crossing = [
                r["veth_tx_bytes"] / (n * r["bytes_per_rank"])
                for r in entry["runs"]
                if r["MiBps"] is not None and r.get("bytes_per_rank") and r.get("veth_tx_bytes") is not None
            ]
            row["tools"][tool] = {
                "median_MiBps": round(median(values), 3) if values else None,
                "min_MiBps": round(min(values), 3) if values else None,
                "max_MiBps": round(max(values), 3) if values else None,
                "ok_runs": len(values),
                "attempts": len(entry["runs"]),
                "veth_bytes_per_measured_byte": round(median(crossing), 2) if crossing else None,
                "unavailable": any(r["status"] == "unavailable" for r in entry["runs"]),
                "failures": entry["failures"],
                "each_run": entry["runs"],
            }
        t = row["tools"]

        def med(tool):
            return (t.get(tool) or {}).get("median_MiBps")

        mpi = {tool: med(tool) for tool in MPI_TOOLS if med(tool)}
        best_mpi = max(mpi, key=mpi.get) if mpi else None
        ratios = {}
        for ours in ("ours", "ours_spin", "raw"):
            if not med(ours):
                continue
            if med("perftest"):
                ratios[f"{ours}/perftest"] = round(med(ours) / med("perftest"), 3)
            for tool in MPI_TOOLS:
                if med(tool):
                    ratios[f"{ours}/{tool}"] = round(med(ours) / med(tool), 3)
            if best_mpi:
                ratios[f"{ours}/best_mpi"] = round(med(ours) / mpi[best_mpi], 3)
        if med("perftest") and best_mpi:
            ratios["perftest/best_mpi"] = round(med("perftest") / mpi[best_mpi], 3)
        row["best_mpi"] = best_mpi
        row["ratios"] = ratios
        table.append(row)
    return {"hosts": n, "meta": meta, "boot": boot, "sizes": table}


# ---- callgrind ----------------------------------------------------------------------------


def read_tsv(path):
    data = {"total": 0, "self": [], "incl": [], "calls": {}, "edges": []}
    if not os.path.isfile(path):
        return None
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "total":
                data["total"] = float(parts[1])
            elif parts[0] in ("self", "incl") and len(parts) >= 4:
                data[parts[0]].append((parts[1], parts[2], float(parts[3])))
            elif parts[0] == "calls" and len(parts) >= 3:
                data["calls"][parts[1]] = data["calls"].get(parts[1], 0) + float(parts[2])
            elif parts[0] == "edge" and len(parts) >= 5:
                data["edges"].append((parts[1], parts[2], float(parts[3]), float(parts[4])))
    return data


def group(obj, fn):
    if re.search(r"libibverbs-cpp", obj):
        return "ibverbs_cpp"
    if re.search(r"libibverbs|rdmav[0-9]", obj):
        return "verbs"
    if re.search(r"libc\.so", obj):
        if re.match(r"(malloc|free|cfree|calloc|realloc|_int_free|_int_malloc|tcache|__libc_malloc|__libc_free|malloc_consolidate)", fn):
            return "malloc"
        return "libc"
    if re.search(r"libstdc\+\+", obj):
        return "libstdcxx"
    if re.search(r"all_to_all_", obj):
        return "program"
    return "other"


ALLOCATORS = ("malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc")


def short(name):
    name = re.sub(r"\(anonymous namespace\)", "{anon}", name)
    name = re.sub(r" \[clone [^]]*\]$", "", name)
    while True:
        shorter = re.sub(r"<[^<>]*>", "\x01", name)
        if shorter == name:
            break
        name = shorter
    while True:
        shorter = re.sub(r"\([^()]*\)", "\x02", name)
        if shorter == name:
            break
        name = shorter
    return name.replace("\x01", "<>").replace("\x02", "()").removesuffix(" const")


def part_figures(data, rounds, peers, poll_function):
    settle = sum(ir for obj, fn, ir in data["incl"] if re.search(r"\bsettle\b", fn))
    work = data["total"] - settle
    mallocs = sum(count for fn, count in data["calls"].items() if fn in ALLOCATORS)
    frees = data["calls"].get("free", 0)
    polls = data["calls"].get(poll_function, 0) if poll_function else None
    by = {}
    for obj, fn, ir in data["self"]:
        if re.search(r"\bsettle\b", fn) or fn in ("nanosleep", "__nanosleep", "clock_nanosleep", "__clock_nanosleep"):
            continue  # the settling sleep, taken out above (its inclusive cost)
        key = group(obj, fn)
        by[key] = by.get(key, 0) + ir
    top = sorted(
        (
            (ir, obj, fn)
            for obj, fn, ir in data["self"]
            if ir >= 0.01 * work and not re.search(r"\bsettle\b", fn)
        ),
        reverse=True,
    )[:15]
    return {
        "instructions_per_round": round(work / rounds, 1),
        "instructions_per_peer_per_round": round(work / rounds / peers, 1),
        "settle_instructions_per_round": round(settle / rounds, 1),
        "mallocs_per_round": round(mallocs / rounds, 4),
        "frees_per_round": round(frees / rounds, 4),
        "cq_polls_per_round": round(polls / rounds, 3) if polls is not None else None,
        "by_object_per_round": {k: round(v / rounds, 1) for k, v in sorted(by.items())},
        "top_functions_per_round": [
            {"exclusive": round(ir / rounds, 1), "object": os.path.basename(obj), "function": short(fn)}
            for ir, obj, fn in top
        ],
    }


def callgrind_of(n, path):
    meta = read_json(os.path.join(path, "meta.json")) or {}
    boot = read_json(os.path.join(path, "boot.json")) or {}
    rounds = meta.get("rounds_per_part") or 1
    peers = max(1, n - 1)
    raw_early = read_tsv(os.path.join(path, "raw-early.tsv"))
    # The provider's poll function: what raw_loop.c's poll_completions calls in the verbs or
    # provider object (Soft-RoCE's provider has no symbols: callgrind names it by address).
    poll_function = None
    if raw_early:
        verbs = {fn for obj, fn, _ in raw_early["incl"] if re.search(r"libibverbs|rdmav[0-9]", obj)}
        for caller, callee, _, _ in raw_early["edges"]:
            if caller.startswith("poll_completions") and callee in verbs:
                poll_function = callee
    parts = {}
    for tool in ("raw", "ours"):
        for when in ("early", "late"):
            data = read_tsv(os.path.join(path, f"{tool}-{when}.tsv"))
            if data:
                parts[f"{tool}-{when}"] = part_figures(data, rounds, peers, poll_function)
    summary = {}
    for when in ("early", "late"):
        o, r = parts.get(f"ours-{when}"), parts.get(f"raw-{when}")
        if o and r:
            summary[when] = {
                "ours_per_peer": o["instructions_per_peer_per_round"],
                "raw_per_peer": r["instructions_per_peer_per_round"],
                "beyond_raw_per_peer": round(
                    o["instructions_per_peer_per_round"] - r["instructions_per_peer_per_round"], 1
                ),
                "ratio": round(o["instructions_per_round"] / r["instructions_per_round"], 3)
                if r["instructions_per_round"]
                else None,
            }
    for tool in ("ours", "raw"):
        e, l = parts.get(f"{tool}-early"), parts.get(f"{tool}-late")
        if e and l and e["instructions_per_round"]:
            summary[f"{tool}_late_over_early"] = round(
                l["instructions_per_round"] / e["instructions_per_round"], 4
            )
    return {"ranks": n, "meta": meta, "boot": boot, "poll_function": poll_function,
            "parts": parts, "summary": summary}


# ---- the report ---------------------------------------------------------------------------


def fmt(x, digits=1):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def size_text(b):
    if b >= MIB and b % int(MIB) == 0:
        return f"{b // int(MIB)} MiB"
    if b >= 1024 and b % 1024 == 0:
        return f"{b // 1024} KiB"
    return f"{b} B"


def cell(entry, planned):
    if entry is None:
        return "-"
    if entry.get("unavailable"):
        return "unavailable"
    if entry["median_MiBps"] is None:
        return "**failed**"
    text = fmt(entry["median_MiBps"])
    if entry["ok_runs"] > 1:
        text += f" ({fmt(entry['min_MiBps'])}-{fmt(entry['max_MiBps'])})"
    if planned and entry["ok_runs"] < planned:
        text += f", {entry['ok_runs']} of {planned} runs"
    return text


def ratio_text(x):
    return "-" if x is None else f"{x:.2f}x"


def write_plot(report, work, out):
    boots_ = report.get("throughput", {}).get("boots", [])
    if not boots_:
        return
    colors = {"ours": "#d62728", "ours_spin": "#ff7f0e", "alltoall": "#1f77b4",
              "alltoallv": "#17becf", "persistent": "#9467bd", "raw": "#8c564b",
              "perftest": "black"}
    panels_top, panels_bottom = [], []
    for b in boots_:
        n = b["hosts"]
        tools = [t for t in TOOLS if any(t in row["tools"] for row in b["sizes"])]
        data = os.path.join(work, f"plot-{n}.dat")
        with open(data, "w") as f:
            f.write("# bytes " + " ".join(tools) + " ours/perftest ours/best_mpi ours_spin/perftest\n")
            for row in b["sizes"]:
                values = [row["tools"].get(t, {}).get("median_MiBps") for t in tools]
                ratios = [row["ratios"].get(k) for k in ("ours/perftest", "ours/best_mpi", "ours_spin/perftest")]
                f.write(" ".join([str(row["bytes"])] + ["NaN" if v is None else str(v) for v in values + ratios]) + "\n")
        plots = []
        for i, t in enumerate(tools):
            style = "dt 2 lw 2 pt 6" if t == "perftest" else "lw 2 pt 7"
            plots.append(f"'{data}' using 1:{i + 2} with linespoints {style} ps 0.8 lc rgb '{colors[t]}' title '{LABELS[t]}'")
        panels_top.append((n, plots))
        k = len(tools) + 2
        ratio_plots = [
            f"'{data}' using 1:{k} with linespoints lw 2 pt 7 lc rgb '#d62728' title 'ours / perftest ring'",
            f"'{data}' using 1:{k + 1} with linespoints lw 2 pt 5 lc rgb '#1f77b4' title 'ours / best MPI (tcp)'",
            f"'{data}' using 1:{k + 2} with linespoints lw 1 dt 3 pt 6 lc rgb '#ff7f0e' title 'ours, spin / perftest ring'",
            "0.9 with lines dt 2 lc rgb 'gray40' title 'target 0.9x perftest'",
            "2.0 with lines dt 4 lc rgb 'gray60' title 'target 2x MPI tcp'",
        ]
        panels_bottom.append((n, ratio_plots))
    commit = report["throughput"].get("commit", "?")
    date = report["throughput"].get("date", "")
    width = 640 * len(boots_)
    lines = [
        f"set terminal pngcairo size {max(width, 900)},900 font 'sans,10' noenhanced",
        f"set output '{os.path.join(out, 'all_to_all.png')}'",
        "set datafile missing 'NaN'",
        f"set multiplot layout 2,{len(boots_)} title \"All-to-all per rank: ours, Open MPI over TCP and the perftest ring, "
        f"median of each tool's runs ({date}, library at {commit})\" noenhanced",
        "set logscale x 2",
        "set xtics ('4K' 4096, '16K' 16384, '64K' 65536, '256K' 262144, '1M' 1048576)",
        "set grid xtics ytics",
        "set key top left font ',8'",
        "set xlabel 'bytes per pair and round'",
    ]
    for n, plots in panels_top:
        lines += [f"set title '{n} hosts: bytes each rank sends the others per second'",
                  "set ylabel 'MiB/s per rank'", "set yrange [0:*]", "plot " + ", ".join(plots)]
    for (n, plots), b in zip(panels_bottom, boots_):
        # Room above the 2x line, or above the largest ratio.
        plotted = ("ours/perftest", "ours/best_mpi", "ours_spin/perftest")
        top = max([2.2] + [1.1 * row["ratios"][k] for row in b["sizes"] for k in plotted
                           if row["ratios"].get(k)])
        lines += [f"set title '{n} hosts: ratios of the medians'", "set ylabel 'ratio'",
                  f"set yrange [0:{top:.2f}]", "plot " + ", ".join(plots)]
    lines.append("unset multiplot")
    with open(os.path.join(work, "plot.gp"), "w") as f:
        f.write("\n".join(lines) + "\n")


def ours_shape(tp):
    """Ours' slots per peer, and per host count and size its peers and rounds in flight, as its
    runs' JSON says: ("8", "4 hosts: 4 KiB 3 peers, 7 rounds; ...")."""
    slots = "?"
    shapes = []
    for boot in tp.get("boots", []):
        sizes = []
        for row in boot.get("sizes", []):
            runs = [r for r in (row["tools"].get("ours") or {}).get("each_run", []) if "in_flight" in r]
            if not runs:
                continue
            slots = runs[0].get("slots_per_peer", slots)
            size = row["bytes"]
            label = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
            sizes.append(f"{label} {runs[0].get('peers_in_flight', '?')} peers, "
                         f"{runs[0]['in_flight']} rounds")
        if sizes:
            shapes.append(f"{boot['hosts']} hosts: " + ", ".join(sizes))
    return slots, "; ".join(shapes) or "?"


def markdown(report, out):
    lines = ["# All-to-all: PersistentAllToAll against Open MPI, beside the limit of the same boot", ""]
    tp = report.get("throughput")
    if tp:
        first = tp["boots"][0]["meta"] if tp["boots"] else {}
        slots, shapes = ours_shape(tp)
        lines += [
            f"Made by `{tp.get('command', 'bench/all_to_all/run')}` on {tp.get('date', '?')}, library at "
            f"commit {tp.get('commit', '?')}: kernel {first.get('kernel', '?')}, "
            f"{first.get('where', '?')}; path MTU {first.get('active_mtu', '?')}; perftest "
            f"{first.get('perftest', '?')}; {first.get('mpirun', '?')}. One boot per host count: "
            + ", ".join(
                f"{b['hosts']} hosts in {fmt((b['boot'] or {}).get('boot_seconds'), 0)} s"
                for b in tp["boots"]
            )
            + ".",
            "",
            "N ranks, one per testbed host (rank k on host k's Soft-RoCE device, its traffic crossing "
            "the testbed's bridge); every round each rank sends SIZE bytes to every rank (its own "
            "part copied locally by every tool). **Figure: bytes each rank sends the others per second, "
            "in MiB/s (2^20 bytes)**: for ours and MPI, R x (N - 1) x SIZE over the slowest rank's time "
            "for R rounds (after a warm-up and a barrier; R chosen so that the rounds take about "
            f"{first.get('seconds', '?')} s at the warm-up's pace, the same R on every rank); for the "
            "perftest ring, the mean over the hosts of each `ib_write_bw` client's BW average, every "
            f"host k writing to host k + 1 at once (`-D {first.get('seconds', 0) + 4}`: perftest measures "
            f"the middle {first.get('seconds', '?')} s, its 2 s margin at each end covering the clients' "
            "start). Size by size every tool takes its turn run by run (who goes first rotates), each "
            "run a fresh `mpirun` job or set of perftest processes; **a tool's figure is the median of "
            f"its runs** ({first.get('runs', '?')} asked per tool and size; min-max beside it), a ratio "
            "that of two medians. A failed run is tried once more, a failed ring twice more (with every "
            "host busy, Soft-RoCE now and then fails one of the ring's writers with \"remote invalid "
            "request\"; ours and MPI are retried alike).",
            "",
            f"- **ours**: `all_to_all_ours` (bench/all_to_all/ours.cpp), a PersistentAllToAll on a Node "
            f"booted by PMIx under mpirun, {slots} slots per peer, with these peers and rounds in "
            f"flight ({shapes}; round n + 1 started before round n is waited for), each round "
            f"released at once; waiting "
            f"`{first.get('ours_wait', '?')}` (the Channel's WaitMode)"
            + (f", with `{first['ours_args']}`" if first.get("ours_args") else "")
            + ". "
            "**ours, spin**: the same, busy-polling, as perftest's clients and Open MPI's progress do.",
            "- **MPI**: `all_to_all_mpi` (bench/all_to_all/mpi.c): MPI_Alltoall, MPI_Alltoallv, and "
            "MPIX_Alltoallv_init + MPI_Start/MPI_Wait, under `mpirun --mca pml ob1 --mca btl tcp,self` "
            "with each rank's `btl_tcp_if_include` its host's netdev (bench/all_to_all/rank), so that "
            "the TCP traffic crosses the bridge too (see \"Where the traffic went\"). Open MPI's "
            "RDMA transports did not run on these devices: bench/README.md says what was tried.",
            "- **perftest ring**: the limit of the same boot, every host writing to its ring "
            "neighbour at once (k = 1) with `ib_write_bw`, busy-polling.",
            "",
            "**Under the testbed (QEMU, Soft-RoCE) every packet is emulated CPU work on two vCPUs that "
            "all N ranks and the kernel's Soft-RoCE and TCP work share: absolute figures are small and "
            "move with the host's load; compare within a boot.** TCP over the veths moves 64 KiB "
            "segments (GSO) where Soft-RoCE computes a CRC over every 4 KiB packet, so Open MPI over "
            "TCP can be faster here than any RDMA transfer, the ring included: a target against MPI "
            "over TCP then cannot be met, and the report says so.",
            "",
            "## Per-rank throughput",
            "",
        ]
        for b in tp["boots"]:
            n = b["hosts"]
            meta = b["meta"]
            planned = meta.get("runs")
            tools = [t for t in TOOLS if any(t in row["tools"] for row in b["sizes"])]
            lines += [f"### {n} hosts", ""]
            header = "| size | " + " | ".join(LABELS[t] for t in tools) + " | ours / ring | ours / best MPI | ours, spin / ring |"
            lines += [header, "| ---: |" + " ---: |" * (len(tools) + 3)]
            for row in b["sizes"]:
                r = row["ratios"]
                best = row.get("best_mpi")
                lines.append(
                    f"| {size_text(row['bytes'])} | "
                    + " | ".join(cell(row["tools"].get(t), planned) for t in tools)
                    + f" | {ratio_text(r.get('ours/perftest'))} | {ratio_text(r.get('ours/best_mpi'))}"
                    + (f" ({best})" if best and r.get("ours/best_mpi") is not None else "")
                    + f" | {ratio_text(r.get('ours_spin/perftest'))} |"
                )
            lines.append("")
        lines += ["![per-rank throughput and ratios](all_to_all.png)", ""]

        # Targets.
        lines += ["## Targets", ""]
        for b in tp["boots"]:
            row = next((r for r in b["sizes"] if r["bytes"] == TARGET_SIZE), None)
            if not row:
                lines.append(f"- {b['hosts']} hosts: 64 KiB not measured in this run.")
                continue
            r = row["ratios"]
            limit_vs_mpi = r.get("perftest/best_mpi")
            vs_ring = r.get("ours/perftest")
            vs_mpi = r.get("ours/best_mpi")
            text = f"- {b['hosts']} hosts, 64 KiB per pair: ours {ratio_text(vs_ring)} the perftest ring "
            text += "(target 0.9x: " + ("met" if vs_ring is not None and vs_ring >= 0.9 else "**missed**") + ")"
            text += f"; {ratio_text(vs_mpi)} the best MPI variant over TCP ({row.get('best_mpi') or '-'}; target 2x: "
            if vs_mpi is not None and vs_mpi >= 2:
                text += "met)"
            elif limit_vs_mpi is not None and limit_vs_mpi < 2:
                text += f"missed, and out of reach in this boot: the ring itself is {ratio_text(limit_vs_mpi)} MPI over TCP)"
            else:
                text += "**missed**)"
            if r.get("ours_spin/perftest") is not None:
                text += f"; ours busy-polling {ratio_text(r.get('ours_spin/perftest'))} the ring."
            lines.append(text)
        lines.append("- At least 1.0x Open MPI over RDMA from 4 KiB: Open MPI's openib btl and UCX do not "
                     "run on these Soft-RoCE devices (bench/README.md), so there is nothing to compare.")
        cg = report.get("callgrind")
        if cg and cg.get("boots"):
            for c in cg["boots"]:
                o = c["parts"].get("ours-early")
                ol = c["parts"].get("ours-late")
                if o and ol:
                    lines.append(
                        f"- Allocations per round ({c['ranks']} ranks, callgrind): {o['mallocs_per_round']:g} "
                        f"in the first measured rounds, {ol['mallocs_per_round']:g} after "
                        f"{c['meta'].get('gap', '?')} more (target 0); a round's instructions "
                        f"{fmt(o['instructions_per_round'], 0)} then {fmt(ol['instructions_per_round'], 0)} "
                        f"({c['summary'].get('ours_late_over_early', 0):.3f}x: not growing with the rounds run).")
        lines.append("")

        # Where the traffic went.
        lines += ["## Where the traffic went", "",
                  "The bytes all hosts' netdevs (the veths on the bridge) sent during a run, over the bytes "
                  "the measured rounds moved between ranks (N x bytes per rank), median over the runs: "
                  "about 1 or more (warm-up, set-up and headers add to it) means the traffic crossed the "
                  "bridge; near 0 would mean it looped back inside the kernel.", ""]
        for b in tp["boots"]:
            tools = [t for t in TOOLS if t != "perftest" and any(t in row["tools"] for row in b["sizes"])]
            lines += [f"{b['hosts']} hosts:", "", "| size | " + " | ".join(LABELS[t] for t in tools) + " |",
                      "| ---: |" + " ---: |" * len(tools)]
            for row in b["sizes"]:
                lines.append(f"| {size_text(row['bytes'])} | " + " | ".join(
                    fmt((row["tools"].get(t) or {}).get("veth_bytes_per_measured_byte"), 2) for t in tools) + " |")
            lines.append("")

        failures = []
        for b in tp["boots"]:
            for row in b["sizes"]:
                for tool, entry in row["tools"].items():
                    for note in entry["failures"]:
                        failures.append(f"- {b['hosts']} hosts, {size_text(row['bytes'])}, {LABELS[tool]}: {note}")
        if failures:
            lines += ["## Failed runs", "", "Each failed attempt (the raw output of every run is in "
                      "`work/all_to_all/hosts-N/logs/` beside this report after a run).", ""]
            lines += failures[:60] + ([f"- ... and {len(failures) - 60} more"] if len(failures) > 60 else []) + [""]

    cg = report.get("callgrind")
    if cg and cg.get("boots"):
        lines += ["## Instructions per round (callgrind)", ""]
        for c in cg["boots"]:
            m = c["meta"]
            lines += [
                f"Made by `{m.get('command', '?')}` on {m.get('date', '?')}, library at commit "
                f"{m.get('commit', '?')} built {m.get('build_type', '?')}; {m.get('where', '?')}; "
                f"{m.get('valgrind', '?')}.",
                "",
                f"{c['ranks']} ranks under mpirun, rank 0 under `valgrind --tool=callgrind` (the others "
                f"natively): after 20 warm-up rounds, {m.get('rounds_per_part', '?')} rounds measured "
                f"(\"early\"), {m.get('gap', '?')} rounds not, {m.get('rounds_per_part', '?')} measured again "
                f"(\"late\"), {m.get('size', '?')} bytes per pair, own part empty (no local copy, in both "
                "programs). In every measured round each rank sleeps "
                f"{m.get('settle_us', 0) // 1000} ms between posting the round's writes and waiting for "
                "the round, so that the wait finds every completion there: the count is the work of a "
                "round (posting, taking the completions, the credits), not the spinning of a wait, "
                "which depends on the machine's timing; the sleep's own instructions are taken out. "
                "Every rank waits by blocking (`--wait block`), so that the ranks waiting for the slow "
                "one under callgrind leave the vCPUs to the kernel's Soft-RoCE work. A settled round "
                "polls the CQ once in both; a part with more polls per round had to wait for something "
                "the settling did not cover, and its count includes waiting. "
                "**ours** is `all_to_all_ours --callgrind` (start(), the sleep, wait(), the round "
                "released at once); **raw** is bench/all_to_all/raw_loop.c doing the same writes in "
                "libibverbs (one RDMA write with immediate per peer, ibv_poll_cq until the writes are "
                "complete and the peers' parts have landed, each landed part's receive posted again), "
                "without credits: it cannot let a caller hold a round, which is what ours' credits "
                "are for (since cb64fae they ride in the next round's parts, as here, where each round "
                "is released before the next starts; a credit no part carries costs a send with "
                "immediate and its receive).",
                "",
                "| part | instructions / round | per peer | raw per peer | beyond raw per peer | ratio | mallocs / round | frees / round | CQ polls / round |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            for when in ("early", "late"):
                o = c["parts"].get(f"ours-{when}")
                r = c["parts"].get(f"raw-{when}")
                s = c["summary"].get(when, {})
                for name, p in (("ours", o), ("raw", r)):
                    if not p:
                        continue
                    lines.append(
                        f"| {name}, {when} | {fmt(p['instructions_per_round'], 0)} | "
                        f"{fmt(p['instructions_per_peer_per_round'], 0)} | "
                        + (f"{fmt(s.get('raw_per_peer'), 0)} | {fmt(s.get('beyond_raw_per_peer'), 0)} | "
                           f"{s['ratio']:.2f} |" if name == "ours" and s else "- | - | - |")
                        + f" {p['mallocs_per_round']:g} | {p['frees_per_round']:g} | "
                        + f"{'-' if p['cq_polls_per_round'] is None else format(p['cq_polls_per_round'], 'g')} |"
                    )
            lines += ["", f"By object, per round ({c['ranks']} ranks): `verbs` is libibverbs and the "
                      "Soft-RoCE provider, `program` the benchmark's loop with what was inlined into it.", "",
                      "| part | verbs | ibverbs-cpp | libstdc++ | libc | malloc | program | other |",
                      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for key, p in sorted(c["parts"].items()):
                by = p["by_object_per_round"]
                lines.append(f"| {key} | " + " | ".join(
                    fmt(by.get(g), 0) for g in ("verbs", "ibverbs_cpp", "libstdcxx", "libc", "malloc", "program", "other")) + " |")
            o = c["parts"].get("ours-late")
            if o:
                lines += ["", "ours, late: functions above 1 % of a round's instructions (exclusive, per round):", "",
                          "| exclusive | object | function |", "| ---: | --- | --- |"]
                for f in o["top_functions_per_round"]:
                    name = f["function"].replace("|", "\\|")
                    lines.append(f"| {fmt(f['exclusive'], 0)} | {f['object']} | `{name}` |")
            lines.append("")
    here = os.path.dirname(os.path.abspath(__file__))
    readme = os.path.relpath(os.path.join(here, "..", "README.md"), out)
    notes = os.path.relpath(os.path.join(here, "notes.md"), out)
    lines += [f"How the figures were made, what was tried for Open MPI over RDMA, and how long a run "
              f"takes: [bench/README.md]({readme}), \"The all-to-all\". A reading of the figures, "
              f"written by hand and not regenerated with this report (it names the commit it read): "
              f"[bench/all_to_all/notes.md]({notes}).", ""]
    return "\n".join(lines)


def main():
    work, out = sys.argv[1], sys.argv[2]
    previous = read_json(os.path.join(out, "all_to_all.json")) or {}
    report = {"tool": "bench/all_to_all/run"}
    hosts = boots(work, "hosts")
    if hosts:
        boots_ = [throughput_of(n, path) for n, path in hosts]
        first = boots_[0]["meta"]
        report["throughput"] = {"commit": first.get("commit"), "command": first.get("command"),
                                "date": first.get("date"), "figure": "MiB/s per rank: bytes sent to the other ranks per second",
                                "targets": {"vs_perftest_ring_at_64KiB": 0.9, "vs_mpi_tcp_at_64KiB": 2.0},
                                "boots": boots_}
    elif previous.get("throughput"):
        report["throughput"] = previous["throughput"]
    cgs = boots(work, "callgrind")
    if cgs:
        report["callgrind"] = {"boots": [callgrind_of(n, path) for n, path in cgs]}
    elif previous.get("callgrind"):
        report["callgrind"] = previous["callgrind"]
    if "throughput" not in report and "callgrind" not in report:
        print(f"all_to_all/report.py: no raw results in {work}", file=sys.stderr)
        return 1
    with open(os.path.join(out, "all_to_all.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    if report.get("throughput"):
        write_plot(report, work, out)
    with open(os.path.join(out, "all_to_all.md"), "w") as f:
        f.write(markdown(report, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
