#!/usr/bin/env python3
"""Daemon load benchmark: N logs growing at R records/s each, and OOM latency under that load.

Starts `oomtriage watch` on a fresh training folder of N busy jobs and quiet ones (AI Toolkit
layout), appends a progress frame to every busy log R times a second for SECONDS, and reads the
daemon's CPU time, RSS, read system calls (/proc/PID/io syscr) and context switches from /proc.
Then, with the load still running, appends an OOM line INCIDENTS times, each to a quiet log (a
job that was between writes, the case an alert must be fast for) and then to a busy one, and
measures the time from the write to the event's row in the store (SQLite, read-only).
Usage: daemon_load.py [N] [R] [SECONDS] [INCIDENTS] [KEY=VALUE...]
Each KEY=VALUE is a daemon config setting (e.g. burst_check_ms=0); with any, the daemon runs as
`oomtriage daemon --config` on a config watching the same folder.
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


def proc_read_calls(pid):
    for line in open(f"/proc/{pid}/io"):
        if line.startswith("syscr:"):
            return int(line.split()[1])
    return 0


def proc_switches(pid):
    total = 0
    for line in open(f"/proc/{pid}/status"):
        if "ctxt_switches" in line:
            total += int(line.split()[1])
    return total


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
    settings = [arg.split("=", 1) for arg in sys.argv[5:]]
    command = [BINARY, "--state-dir", state, "watch", out]
    if settings:
        config = os.path.join(work, "oomtriage.yaml")
        with open(config, "w") as f:
            f.write(f"state_dir: {state}\nwatch:\n  - logs: {out}/*/log.txt\n")
            f.writelines(f"{key}: {value}\n" for key, value in settings)
        command = [BINARY, "daemon", "--config", config]
    daemon = subprocess.Popen(command, stderr=open(os.path.join(work, "daemon.err"), "w"))
    time.sleep(0.5)
    def job_log(name):
        d = os.path.join(out, name)
        os.makedirs(d)
        f = open(os.path.join(d, "log.txt"), "a", buffering=1)
        f.write(f"Running 1 job\n# Running job: {name}\n")
        return f

    files = [job_log(f"job{i:04d}") for i in range(n)]
    # One quiet job per incident: a second identical OOM in a log with nothing between is the
    # same incident to the analyzer (a re-raise, a doubled tee), not a new alert.
    quiet = [job_log(f"quiet{i:03d}") for i in range(max(20, incidents))]
    time.sleep(2.0)  # let the daemon register every job

    def tick(step):
        for i, f in enumerate(files):
            f.write(f"\rjob{i:04d}:  10%|#         | {step}/30000 [01:00<09:00,  1.40s/it, lr: 1.0e-04 loss: 4.1e-01]")
            f.flush()

    step = 0
    reads0, switches0 = proc_read_calls(daemon.pid), proc_switches(daemon.pid)
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
    reads = proc_read_calls(daemon.pid) - reads0
    switches = proc_switches(daemon.pid) - switches0
    rss_end = proc_rss_kib(daemon.pid)

    # Latency, with the load running between incidents (a tick after each): an OOM in a quiet
    # log, then one in a busy log.
    db = sqlite3.connect(f"file:{os.path.join(state, 'oomtriage.db')}?mode=ro", uri=True)

    def latency(f):
        nonlocal step
        before = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        f.write("\n" + OOM)
        f.flush()
        start = time.monotonic()
        took = None
        while time.monotonic() - start < 5:
            if db.execute("SELECT COUNT(*) FROM events").fetchone()[0] != before:
                took = (time.monotonic() - start) * 1000
                break
            time.sleep(0.001)
        step += 1
        tick(step)
        time.sleep(1.0 / rate)
        return took

    quiet_ms, busy_ms = [], []
    for k in range(incidents):
        quiet_ms.append(latency(quiet[k]))
        busy_ms.append(latency(files[(k * 37) % n]))
    daemon.terminate()
    daemon.wait(timeout=30)

    def percentiles(values):
        values = sorted(v for v in values if v is not None)
        return (values[len(values) // 2], values[min(len(values) - 1, int(len(values) * 0.99))],
                values[-1])

    print(f"logs {n}, {rate} records/s each ({n * rate} records/s), {elapsed:.1f} s")
    print(f"daemon CPU {100 * cpu / elapsed:.2f}% of one core, RSS end {rss_end / 1024:.1f} MiB, "
          f"max {rss_max / 1024:.1f} MiB, {reads / elapsed:.0f} read calls/s, "
          f"{switches / elapsed:.0f} context switches/s")
    for name, values in (("quiet", quiet_ms), ("busy", busy_ms)):
        p50, p99, top = percentiles(values)
        missing = sum(1 for v in values if v is None)
        print(f"OOM line -> event in store, {name} log, {incidents} incidents under load, "
              f"{missing} missing: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {top:.1f} ms")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
