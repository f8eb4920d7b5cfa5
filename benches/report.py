#!/usr/bin/env python3
"""Prints the timing-wheel benchmark table from criterion's saved estimates.

Run after `cargo bench -p phalanx-benches --bench wheel`. For every workload and size it shows
the median nanoseconds per operation of each structure and its ratio to the heap in the same
run (ratio > 1 means faster than the heap). Markdown, so it can be pasted into the README.

On a noisy machine one run is not enough to judge a ratio near a target. Save several runs
under names of their own and pass the names:

    cargo bench -p phalanx-benches --bench wheel -- --save-baseline r1   # likewise r2, r3
    python3 benches/report.py r1 r2 r3

Each cell is then the median over the runs, and the ratio columns give the median of the
per-run ratios with their range (lowest–highest) in brackets.
"""
import json
import pathlib
import statistics
import sys

root = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"
STRUCTURES = ["heap", "hashed", "hierarchical", "btree"]
ORDER = ["start", "cancel", "take", "fire", "fill_drain", "retransmit", "churn", "steady",
         "burst"]


def load(run):
    """One run's figures: ({(workload, size): {structure: ns}}, {structure: ns per link})."""
    rows, links = {}, {}
    for bench in root.glob("**/benchmark.json"):
        if bench.parent.name != run:
            continue
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        elements = (meta.get("throughput") or {}).get("Elements") or 1
        per_op = estimates["median"]["point_estimate"] / elements
        group, structure = meta["group_id"], meta["function_id"]
        if group == "per_link":
            links[structure] = per_op
            continue
        # `<workload>/<N>` groups with a function per structure (results of the older
        # `<structure>/<N>` layout, left in target/ by earlier runs, are skipped).
        if "/" not in group:
            continue
        workload, size = group.split("/", 1)
        if structure not in STRUCTURES or not size.isdigit():
            continue
        rows.setdefault((workload, int(size)), {})[structure] = per_op
    return rows, links


def ratio_cell(ratios):
    """The median ratio, and its range when there are several runs."""
    if not ratios:
        return "–"
    middle = f"{statistics.median(ratios):.2f}×"
    if len(ratios) == 1:
        return middle
    return f"{middle} [{min(ratios):.2f}–{max(ratios):.2f}]"


def ns_cell(values):
    return f"{statistics.median(values):.1f}" if values else "–"


runs = sys.argv[1:] or ["new"]
loaded = [load(run) for run in runs]
for run, (rows, links) in zip(runs, loaded):
    if not rows and not links:
        sys.exit(f"no criterion results named {run!r} under target/criterion: run the bench first")

keys = sorted({key for rows, _ in loaded for key in rows},
              key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1]))
print("| workload | N | " + " | ".join(f"{s} ns/op" for s in STRUCTURES)
      + " | hashed vs heap | hierarchical vs heap |")
print("|---|---:|" + "---:|" * (len(STRUCTURES) + 2))
for key in keys:
    cells = [rows.get(key, {}) for rows, _ in loaded]
    line = [key[0], f"{key[1]:,}"]
    line += [ns_cell([c[s] for c in cells if s in c]) for s in STRUCTURES]
    for s in ("hashed", "hierarchical"):
        line.append(ratio_cell([c["heap"] / c[s] for c in cells if "heap" in c and s in c]))
    print("| " + " | ".join(line) + " |")

if any(links for _, links in loaded):
    print()
    print("| per link per turn | ns | vs heap |")
    print("|---|---:|---:|")
    for s in ("heap", "hashed", "hierarchical"):
        values = [links[s] for _, links in loaded if s in links]
        ratios = [links["heap"] / links[s] for _, links in loaded if "heap" in links and s in links]
        if values:
            print(f"| {s} | {ns_cell(values)} | {ratio_cell(ratios)} |")
