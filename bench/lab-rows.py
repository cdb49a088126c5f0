"""Markdown rows of a `fatpipe lab` result on a path of 1 Gbit/s, 100 ms (BDP 12.5 MB): loss,
case, whole-command Mbit/s, its share of the goodput ceiling (rate x 1448/1500 x (1 - loss)),
segments retransmitted, peak socket memory (client rb + server tb) in MiB and in BDPs.
Usage: python3 bench/lab-rows.py RESULTS_JSON LOSS [LABEL]   (LABEL: instead of the lab's)"""
import json
import sys

path, loss = sys.argv[1], float(sys.argv[2])
label = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
ceiling = 1000 * 1448 / 1500 * (1 - loss)
for d in json.load(open(path)):
    name = label or d["label"]
    for r in d["runs"]:
        whole = d["bytes"] * 8 / r["wall_seconds"] / 1e6
        mem = (r["peak_rb_receiver"] + r["peak_tb_sender"]) / 2**20
        print(f"| {loss:.0%} | {name} | {whole:.0f} | {whole / ceiling:.2f} | {r['retrans']} "
              f"| {mem:.0f} | {mem * 2**20 / 12.5e6:.1f} |")
    for f in d.get("failures", []):
        print(f"| {loss:.0%} | {name} | failed: {f} | | | | |")
