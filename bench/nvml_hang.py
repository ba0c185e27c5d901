#!/usr/bin/env python3
"""A wedged driver: what the daemon and `run` do while NVML does not answer.

Uses the stand-in NVML the tests build (build/tests/libnvidia-ml.so.1, tests/support/fake_nvml.cc),
whose `hang 0` line holds nvmlDeviceGetMemoryInfo until the line is gone, as a GPU off the bus
holds it. Two measurements:

1. daemon: a trainer process on the card, then the card hangs for HANG seconds; three OOMs
   (tracebacks, in three jobs) are written meanwhile and the time from each write to its row in
   the store is printed (the issue that asked for this measured 24.8 s when sampling ran on the
   event loop).
2. run: a trainer that prints STEPS progress lines at 100 a second under `oomtriage run` while
   the card hangs from its start; prints how many it wrote in its first 8 s (at full pace, ~784
   steps would be 800).

Usage: bench/nvml_hang.py [HANG_SECONDS]   (default 20)
"""
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "build", "oomtriage")
FAKE = os.path.join(ROOT, "build", "tests", "libnvidia-ml.so.1")
GIB = 1 << 30
OOM = ("Traceback (most recent call last):\n  File \"run.py\", line 1, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
       "capacity of 23.55 GiB of which 1.19 GiB is free. Of the allocated memory 21.80 GiB is "
       "allocated by PyTorch, and 95.43 MiB is reserved by PyTorch but unallocated.\n")


def set_cards(path, pid, hang):
    with open(path + ".tmp", "w") as f:
        f.write(f"gpu 0 {24 * GIB} {10 * GIB}\n")
        if pid:
            f.write(f"process 0 {pid} {10 * GIB}\n")
        if hang:
            f.write("hang 0\n")
    os.rename(path + ".tmp", path)


def daemon_case(work, hang_seconds):
    out = os.path.join(work, "output")
    cards = os.path.join(work, "cards")
    os.makedirs(os.path.join(out, "job1"))
    config = os.path.join(work, "oomtriage.yaml")
    with open(config, "w") as f:
        f.write(f"watch:\n  - logs: {out}/*/log.txt\ngpu_sample_ms: 1000\n")
    env = dict(os.environ, OOMTRIAGE_NVML_LIBRARY=FAKE, FAKE_NVML_STATE=cards)
    set_cards(cards, 0, False)
    err = open(os.path.join(work, "err"), "w")
    daemon = subprocess.Popen([BINARY, "--state-dir", os.path.join(work, "state"), "daemon",
                               "--config", config], stderr=err, env=env)
    log1 = os.path.join(out, "job1", "log.txt")
    trainer = subprocess.Popen(["sleep", "600"], stdout=open(log1, "a"))
    with open(log1, "a") as f:
        f.write("Running 1 job\n# Running job: job1\n")
    set_cards(cards, trainer.pid, False)
    time.sleep(2)
    set_cards(cards, trainer.pid, True)
    hung_at = time.monotonic()
    time.sleep(1.5)  # the sampler is inside the hanging call
    written = {}
    for n in (1, 2, 3):
        job = f"job{n}"
        os.makedirs(os.path.join(out, job), exist_ok=True)
        with open(os.path.join(out, job, "log.txt"), "a") as f:
            if n > 1:
                f.write(f"Running 1 job\n# Running job: {job}\n")
            f.flush()
            written[job] = time.monotonic()
            f.write(OOM)
    db = os.path.join(work, "state", "oomtriage.db")
    stored = {}
    while len(stored) < 3 and time.monotonic() - hung_at < hang_seconds + 30:
        if time.monotonic() - hung_at >= hang_seconds:
            set_cards(cards, trainer.pid, False)
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                for (name,) in c.execute("SELECT j.name FROM events e JOIN jobs j ON j.id = e.job_id"):
                    stored.setdefault(name, time.monotonic())
        except sqlite3.Error:
            pass
        time.sleep(0.02)
    still_hung = all(stored.get(j, 1e18) - hung_at < hang_seconds for j in written)
    set_cards(cards, trainer.pid, False)
    trainer.kill()
    daemon.terminate()
    daemon.wait(timeout=30)
    for job, at in written.items():
        took = f"{stored[job] - at:.2f} s" if job in stored else "never"
        print(f"daemon: {job}'s OOM stored {took} after its write")
    print(f"daemon: all three stored while NVML still hung ({hang_seconds} s): {still_hung}")


def run_case(work, hang_seconds):
    cards = os.path.join(work, "run-cards")
    set_cards(cards, 0, False)
    config = os.path.join(work, "run.yaml")
    with open(config, "w") as f:
        f.write(f"gpu_sample_ms: 100\nwatch:\n  - logs: {work}/*.log\n")
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write(f"""import os, sys, time
open({cards!r} + ".tmp", "w").write("gpu 0 {24 * GIB} 0\\nprocess 0 %d 1000\\nhang 0\\n" % os.getpid())
os.rename({cards!r} + ".tmp", {cards!r})
start = time.monotonic()
for step in range(1, 100000):
    sys.stdout.write("steps: %d%%|          | %d/3000 [00:01<00:10, 100.00it/s] " % (step // 30, step) + "x" * 200 + "\\n")
    sys.stdout.flush()
    if time.monotonic() - start >= 8:
        break
    time.sleep(0.01)
print("wrote", step, "steps in 8 s", flush=True)
open({cards!r} + ".tmp", "w").write("gpu 0 {24 * GIB} 0\\n")
os.rename({cards!r} + ".tmp", {cards!r})
""")
    env = dict(os.environ, OOMTRIAGE_NVML_LIBRARY=FAKE, FAKE_NVML_STATE=cards)
    said = subprocess.run(["timeout", "120", BINARY, "--state-dir", os.path.join(work, "rstate"),
                           "run", "--job", "paced", "--daemon-config", config, "--log",
                           os.path.join(work, "run.log"), "--", sys.executable, script],
                          env=env, capture_output=True, text=True)
    wrote = [l for l in said.stdout.splitlines() if l.startswith("wrote")]
    print(f"run: exit {said.returncode}; trainer {wrote[0] if wrote else 'never finished'}; "
          f"run said: {[l for l in said.stderr.splitlines() if 'not answering' in l]}")


def main():
    hang_seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
    if not os.path.exists(FAKE):
        sys.exit("build the tests first: build/tests/libnvidia-ml.so.1 is missing")
    work = tempfile.mkdtemp(prefix="oomtriage-nvml-hang-")
    try:
        daemon_case(work, hang_seconds)
        run_case(work, hang_seconds)
    finally:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
