#!/usr/bin/env python3
"""Prints the timing-wheel benchmark table from criterion's saved estimates.

Run after `cargo bench -p phalanx-benches --bench wheel`. For every workload and size it shows
the median nanoseconds per operation of each structure and its ratio to the heap in the same
run (ratio > 1 means faster than the heap). Markdown, so it can be pasted into the README.
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"
rows = {}
links = {}
for bench in root.glob("**/new/benchmark.json"):
    meta = json.loads(bench.read_text())
    estimates = json.loads((bench.parent / "estimates.json").read_text())
    group = meta["group_id"]
    if group == "per_link":
        elements = (meta.get("throughput") or {}).get("Elements") or 1
        links[meta["function_id"]] = estimates["median"]["point_estimate"] / elements
        continue
    if "/" not in group:
        continue
    structure, size = group.split("/", 1)
    if structure not in ("heap", "hashed", "hierarchical", "btree") or not size.isdigit():
        continue
    elements = (meta.get("throughput") or {}).get("Elements") or 1
    per_op = estimates["median"]["point_estimate"] / elements
    rows.setdefault((meta["function_id"], int(size)), {})[structure] = per_op

if not rows:
    sys.exit("no criterion results under target/criterion: run the bench first")

structures = ["heap", "hashed", "hierarchical", "btree"]
order = ["start", "cancel", "take", "fire", "fill_drain", "retransmit", "steady", "burst"]
print("| workload | N | " + " | ".join(f"{s} ns/op" for s in structures)
      + " | hashed vs heap | hierarchical vs heap |")
print("|---|---:|" + "---:|" * (len(structures) + 2))
for (workload, size) in sorted(rows, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1])):
    cells = rows[(workload, size)]
    heap = cells.get("heap")
    line = [workload, f"{size:,}"]
    line += [f"{cells[s]:.1f}" if s in cells else "–" for s in structures]
    for s in ("hashed", "hierarchical"):
        line.append(f"{heap / cells[s]:.2f}×" if heap and s in cells else "–")
    print("| " + " | ".join(line) + " |")

if links:
    heap = links.get("heap")
    print()
    print("| per link per turn | ns | vs heap |")
    print("|---|---:|---:|")
    for s in ("heap", "hashed", "hierarchical"):
        if s in links:
            ratio = f"{heap / links[s]:.2f}×" if heap else "–"
            print(f"| {s} | {links[s]:.1f} | {ratio} |")
