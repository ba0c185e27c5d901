#!/usr/bin/env python3
"""Cross-validates the memory model's verdict margin and shows its errors by class of job.

Usage: bench/vram_cv.py BINARY [ROWS.jsonl]   (default ../shared/data/vram/dev.jsonl)

Runs `BINARY check --spec ROW --gpu 80GiB --json` once per row (the spec route, as
../shared/tools/score-vram.py scores it) and prints:
  - the signed error (geometric mean and median of predicted / stated) by class: source, trainer,
    training type, quantization, checkpointing, offload, what was measured, how many of the fields
    that size activations the spec leaves unstated;
  - the dev score of the allocator reserve (the share of the card that usable_bytes() keeps back,
    triage/memory_model.cc) over a grid, recomputed from the JSON's peak without rebuilding:
    fits when peak <= card - 0.5 GiB - share x card;
  - leave-one-source-out and leave-one-family-out: for each source (repository and document) or
    model family, the share is chosen on the other rows and the held-out rows are judged with it;
    the held-out verdicts summed over all folds are what the margin does on rows it did not see.
The binary's own verdict uses the share compiled in; run this against a build to check that the
compiled share is the one the folds choose. docs/memory-model.md records the numbers.
"""
import collections
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

GIB = 1 << 30
CARDS = [12, 16, 24, 48, 80]
SHARES = [0.0, 0.02, 0.04, 0.06, 0.08, 0.10]


def estimate(binary, spec, tmp, i):
    path = os.path.join(tmp, f"spec{i}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([binary, "check", "--spec", path, "--gpu", "80GiB", "--json"],
                       capture_output=True, timeout=60)
    return json.loads(p.stdout)["peak_bytes"] / GIB


def pairs(row, peak, share):
    """(right, costly) per card with a clear answer, as score-vram.py counts them."""
    t = row["target"]
    v, q = t["gib"], t["qualifier"]
    out = []
    for c in CARDS:
        usable = c - 0.5
        if q in ("=", "~"):
            if abs(v - usable) < 0.1 * usable:
                continue
            truth = v < usable
        elif q in ("<=", "<"):
            if v > usable * 0.9:
                continue
            truth = True
        elif q in (">=", ">"):
            if not (v >= usable * 1.1 or (t["kind"] == "oom" and c <= v)):
                continue
            truth = False
        else:
            continue
        fits = peak <= c - 0.5 - share * c
        out.append((fits == truth, fits and not truth))
    return out


def summary(items, share):
    errs = [abs(p - r["target"]["gib"]) / r["target"]["gib"] for r, p in items
            if r["target"]["kind"] == "measurement" and r["target"]["qualifier"] in ("=", "~")]
    ps = [x for r, p in items for x in pairs(r, p, share)]
    right = sum(a for a, _ in ps)
    costly = sum(b for _, b in ps)
    return (statistics.median(errs) * 100 if errs else 0.0), right, len(ps), costly


def objective(s):
    """Fewer wrong verdicts, at most a third of them on the costly side."""
    _, right, n, costly = s
    wrong = n - right
    return -(wrong + 2 * max(0.0, costly - wrong / 3))


def fold(items, key):
    groups = collections.defaultdict(list)
    for r, p in items:
        groups[key(r)].append((r, p))
    held, chosen = [], collections.Counter()
    right = n = costly = 0
    for g, rows in groups.items():
        train = [x for h, xs in groups.items() if h != g for x in xs]
        best = max(SHARES, key=lambda k: objective(summary(train, k)))
        chosen[best] += 1
        for r, p in rows:
            for a, b in pairs(r, p, best):
                right += a
                n += 1
                costly += b
        held += rows
    return chosen, right, n, costly


def main():
    binary = sys.argv[1]
    rows_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "data", "vram", "dev.jsonl")
    rows = [json.loads(l) for l in open(rows_path) if l.strip()]
    rows = [r for r in rows if r["target"]["gib"] is not None]
    tmp = tempfile.mkdtemp(prefix="oomtriage-cv.")
    with ThreadPoolExecutor(2) as ex:
        peaks = list(ex.map(lambda ir: estimate(binary, ir[1]["spec"], tmp, ir[0]), enumerate(rows)))
    items = list(zip(rows, peaks))

    def measured(r):
        w = r["what_is_measured"].lower()
        if "reserved" in w:
            return "torch reserved"
        if "sweep" in w:
            return "torch allocated (sweep)"
        if "nvidia" in w or "observed" in w or "task manager" in w:
            return "nvidia-smi / observed"
        return "stated requirement / other"

    unstated = ("resolution", "batch_size", "gradient_checkpointing", "frames")
    classes = {
        "source": lambda r: r["source_repo"],
        "training type": lambda r: r["spec"].get("training_type"),
        "quantization": lambda r: r["spec"].get("quantization") or "null",
        "checkpointing": lambda r: str(r["spec"].get("gradient_checkpointing")),
        "offload": lambda r: (r["spec"].get("offload") or {}).get("kind", "null"),
        "measured": measured,
        "activation fields unstated": lambda r: sum(r["spec"].get(k) is None for k in unstated),
    }
    point = [(r, p) for r, p in items
             if r["target"]["kind"] == "measurement" and r["target"]["qualifier"] in ("=", "~")]
    print("predicted / stated on the point measurements, by class (geometric mean, median):")
    for name, key in classes.items():
        print(f"  {name}")
        groups = collections.defaultdict(list)
        for r, p in point:
            groups[key(r)].append(p / r["target"]["gib"])
        for g, ratios in sorted(groups.items(), key=lambda kv: str(kv[0])):
            gm = math.exp(statistics.mean(math.log(x) for x in ratios))
            print(f"    {str(g):32} n={len(ratios):3}  {gm:5.2f}  {statistics.median(ratios):5.2f}")
    print("allocator reserve share on all rows (median error, verdicts, costly):")
    for k in SHARES:
        med, right, n, costly = summary(items, k)
        print(f"  {k:4.2f}: median {med:.1f}%, verdicts {right}/{n}, wrong {n - right}, "
              f"costly {costly}")
    for name, key in (("source", lambda r: r["source_repo"] + "|" +
                       r["source_path_or_thread"].split(" (")[0]),
                      ("family", lambda r: r["spec"]["model_family"])):
        chosen, right, n, costly = fold(items, key)
        print(f"leave-one-{name}-out ({sum(chosen.values())} folds): shares chosen "
              f"{dict(sorted(chosen.items()))}; held-out verdicts {right}/{n} = "
              f"{100 * right / n:.1f}%, wrong {n - right}, costly {costly}")


if __name__ == "__main__":
    main()
