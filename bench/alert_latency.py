#!/usr/bin/env python3
"""Alert latency: from an OOM line's write to the webhook's receipt, on loopback.

Starts a webhook receiver (Python's http.server) and `oomtriage daemon` with a webhook receiver
pointing at it, then writes INCIDENTS crash logs one after the other (each into a new job's
log.txt, as a crashing trainer does) and records, per incident, the time from the write of the
OOM line to the receipt of the alert. Prints p50/p99. With LOAD_LOGS, a separate process first
creates that many other jobs and grows each of their logs by a progress frame RATE times a second
for the whole run (docs/design.md: p99 under 50 ms "also while 1,000 other logs grow at 10 lines/s
each"). With HUPS, a thread sends the daemon that many SIGHUPs a second the whole time and
rewrites its config (a second receiver in it, then not) every tenth signal: a config-management
loop gone wrong (docs/daemon.md: reloads coalesce). Usage:
alert_latency.py [INCIDENTS] [LOAD_LOGS] [RATE] [HUPS]
"""
import http.server
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "build", "oomtriage")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
       "capacity of 23.55 GiB of which 812.00 MiB is free.\n")
received = {}
lock = threading.Lock()


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        now = time.monotonic()
        # The job's label (training_job: Prometheus keeps "job" for itself).
        job = body.split(b'"training_job":"', 1)[1].split(b'"', 1)[0].decode()
        with lock:
            received.setdefault(job, now)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


LOAD = r"""
import os, sys, time
out, n, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = []
for i in range(n):
    d = os.path.join(out, f"load{i:04d}")
    os.makedirs(d)
    f = open(os.path.join(d, "log.txt"), "a", buffering=1)
    f.write(f"Running 1 job\n# Running job: load{i:04d}\n")
    files.append(f)
step, next_tick = 0, time.monotonic()
while True:
    step += 1
    for i, f in enumerate(files):
        f.write(f"\rload{i:04d}:  10%|#         | {step}/30000 [01:00<09:00,  1.40s/it, loss: 4.1e-01]")
        f.flush()
    next_tick += 1.0 / rate
    time.sleep(max(0.0, next_tick - time.monotonic()))
"""


def main():
    incidents = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    load_logs = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    hups = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    work = tempfile.mkdtemp(prefix="oomtriage-alert-bench-")
    out = os.path.join(work, "output")
    os.makedirs(out)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = os.path.join(work, "oomtriage.yaml")
    def write_config(second):
        with open(config + ".tmp", "w") as f:
            f.write(f"watch:\n  - logs: {out}/*/log.txt\nalerts:\n  - type: webhook\n"
                    f"    url: http://127.0.0.1:{server.server_port}/oom\n")
            if second:
                f.write(f"  - name: second\n    type: webhook\n"
                        f"    url: http://127.0.0.1:{server.server_port}/second\n")
        os.rename(config + ".tmp", config)
    write_config(False)
    daemon = subprocess.Popen([BINARY, "--state-dir", os.path.join(work, "state"), "daemon",
                               "--config", config], stderr=open(os.path.join(work, "err"), "w"))
    time.sleep(0.5)
    load = None
    if load_logs:
        load = subprocess.Popen([sys.executable, "-c", LOAD, out, str(load_logs), str(rate)])
        time.sleep(5.0)  # every load job registered and growing
    storming = threading.Event()
    sent = [0]

    def storm():
        while not storming.is_set():
            os.kill(daemon.pid, signal.SIGHUP)
            sent[0] += 1
            if sent[0] % 10 == 0:
                write_config(sent[0] % 20 == 0)
            time.sleep(1.0 / hups)
    if hups:
        threading.Thread(target=storm, daemon=True).start()
    written = {}
    for i in range(incidents):
        job = f"job{i:04d}"
        os.makedirs(os.path.join(out, job))
        with open(os.path.join(out, job, "log.txt"), "a") as f:
            f.write("Running 1 job\n# Running job: " + job + "\n")
            f.flush()
            time.sleep(0.02)  # the job runs a moment before it crashes
            written[job] = time.monotonic()
            f.write(OOM)
            f.flush()
        deadline = time.monotonic() + 5
        while job not in received and time.monotonic() < deadline:
            time.sleep(0.0005)
    if load:
        load.kill()
        load.wait()
    storming.set()
    daemon.terminate()
    daemon.wait(timeout=30)
    server.shutdown()
    if not received:
        print("no alert received")
    latencies = sorted((received[j] - written[j]) * 1000 for j in written if j in received)
    missing = incidents - len(latencies)
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    under = f" while {load_logs} other logs grow at {rate}/s" if load_logs else ""
    if hups:
        with open(os.path.join(work, "err")) as f:
            reloads = f.read().count("SIGHUP: config reloaded")
        under += f", {sent[0]} SIGHUPs at {hups}/s made {reloads} reloads"
    print(f"{incidents} incidents{under}, {missing} missing: OOM line -> webhook receipt "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {latencies[-1]:.1f} ms")
    if os.environ.get("KEEP"):
        print("kept", work)
    else:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
