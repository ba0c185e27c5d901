#!/usr/bin/env python3
"""Daemon load benchmark: N logs growing at R records/s each, then OOM latency.

Starts `oomtriage watch` on a fresh training folder of N jobs (AI Toolkit layout), appends a
progress frame to every log R times a second for SECONDS, and reads the daemon's CPU time and
RSS from /proc. Then appends an OOM line to one log at a time, INCIDENTS times, and measures the
time from the write to the event's row in the store (SQLite, read-only), while the load goes on.
Usage: daemon_load.py [N] [R] [SECONDS] [INCIDENTS]
"""
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "build", "oomtriage")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
       "capacity of 23.55 GiB of which 812.00 MiB is free.\n")


def proc_cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    incidents = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    work = tempfile.mkdtemp(prefix="oomtriage-bench-")
    out = os.path.join(work, "output")
    state = os.path.join(work, "state")
    os.makedirs(out)
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    daemon = subprocess.Popen([BINARY, "--state-dir", state, "watch", out],
                              stderr=open(os.path.join(work, "daemon.err"), "w"))
    time.sleep(0.5)
    files = []
    for i in range(n):
        d = os.path.join(out, f"job{i:04d}")
        os.makedirs(d)
        f = open(os.path.join(d, "log.txt"), "a", buffering=1)
        f.write(f"Running 1 job\n# Running job: job{i:04d}\n")
        files.append(f)
    time.sleep(2.0)  # let the daemon register every job

    def tick(step):
        for i, f in enumerate(files):
            f.write(f"\rjob{i:04d}:  10%|#         | {step}/30000 [01:00<09:00,  1.40s/it, lr: 1.0e-04 loss: 4.1e-01]")
            f.flush()

    step = 0
    cpu0, t0 = proc_cpu_seconds(daemon.pid), time.monotonic()
    rss_max = 0
    next_tick = time.monotonic()
    while time.monotonic() - t0 < seconds:
        step += 1
        tick(step)
        rss_max = max(rss_max, proc_rss_kib(daemon.pid))
        next_tick += 1.0 / rate
        time.sleep(max(0.0, next_tick - time.monotonic()))
    elapsed = time.monotonic() - t0
    cpu = proc_cpu_seconds(daemon.pid) - cpu0
    rss_end = proc_rss_kib(daemon.pid)

    # Latency: one OOM at a time into a different log, with the load still running between them.
    db = sqlite3.connect(f"file:{os.path.join(state, 'oomtriage.db')}?mode=ro", uri=True)
    latencies = []
    for k in range(incidents):
        before = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        f = files[(k * 37) % n]
        f.write("\n" + OOM)
        f.flush()
        start = time.monotonic()
        while db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == before:
            if time.monotonic() - start > 5:
                break
            time.sleep(0.001)
        latencies.append((time.monotonic() - start) * 1000)
        step += 1
        tick(step)
    daemon.terminate()
    daemon.wait(timeout=30)
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"logs {n}, {rate} records/s each ({n * rate} records/s), {elapsed:.1f} s")
    print(f"daemon CPU {100 * cpu / elapsed:.2f}% of one core, RSS end {rss_end / 1024:.1f} MiB, "
          f"max {rss_max / 1024:.1f} MiB")
    print(f"OOM line -> event in store, {incidents} incidents: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
          f"max {latencies[-1]:.1f} ms")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
