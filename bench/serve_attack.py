#!/usr/bin/env python3
"""`oomtriage serve` under hostile peers: what share of a legitimate client's requests is answered.

Starts `oomtriage serve` (its defaults, an access file with a token and a bcrypt user of cost 10)
over a store the daemon made, then runs for SECONDS:
- HALF_OPEN peers from ADDRESSES loopback addresses (127.0.0.2..) that connect, send half a
  request line and hold, and connect again when closed (after 20 ms);
- GUESSERS threads from 127.0.1.1.. guessing alice's password as fast as they are answered;
- a legitimate client on 127.0.0.1 that asks for `/` and `/healthz` in turn with the token and
  with alice's right password (signed in once before the attack), each on a new connection, 1 s
  allowed an answer.
Prints the client's answered share (200 within 1 s), its p50 and p99, what the guessers were told
and serve's CPU time.
Usage: serve_attack.py [HALF_OPEN] [ADDRESSES] [GUESSERS] [SECONDS]
"""
import base64
import ctypes
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("OOMTRIAGE", os.path.join(ROOT, "build", "oomtriage"))
TOKEN = "0123456789abcdef0123456789abcdef"


def bcrypt(password, cost):
    """A bcrypt hash from libcrypt (Python's crypt module is gone in 3.13)."""
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return lib.crypt(password.encode(), lib.crypt_gensalt(b"$2b$", cost, None, 0)).decode()


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(source, port, request, timeout):
    """The status of one request on a new connection (0: none within timeout)."""
    deadline = time.monotonic() + timeout
    try:
        s = socket.socket()
        s.bind((source, 0))
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
        s.sendall(request)
        data = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return 0
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
                if m and len(body) >= int(m.group(1)):
                    break
        return int(data[9:12]) if data.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        return 0
    finally:
        s.close()


def request(path, auth):
    return f"GET {path} HTTP/1.1\r\nHost: serve\r\nAuthorization: {auth}\r\n\r\n".encode()


def basic(user_password):
    return "Basic " + base64.b64encode(user_password.encode()).decode()


def half_open(port, count, addresses, stop, stats):
    peers = [None] * count
    again = [0.0] * count
    while not stop.is_set():
        now = time.monotonic()
        for i in range(count):
            if peers[i] is None and now >= again[i]:
                s = socket.socket()
                s.setblocking(False)
                try:
                    s.bind((f"127.0.0.{2 + i % addresses}", 0))
                    s.connect_ex(("127.0.0.1", port))
                    peers[i] = [s, False]
                except OSError:
                    s.close()
                    again[i] = now + 0.02
        writing = [p[0] for p in peers if p and not p[1]]
        reading = [p[0] for p in peers if p and p[1]]
        readable, writable, _ = select.select(reading, writing, [], 0.02)
        for i, p in enumerate(peers):
            if p is None:
                continue
            gone = False
            if p[0] in writable:
                try:
                    p[0].send(b"GET /healthz HT")
                    p[1] = True
                except OSError:
                    gone = True
            elif p[0] in readable:
                try:
                    gone = not p[0].recv(4096)
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
            if gone:
                stats["dropped"] += 1
                p[0].close()
                peers[i] = None
                again[i] = time.monotonic() + 0.02
    for p in peers:
        if p:
            p[0].close()


def guesser(port, source, stop, told):
    n = 0
    while not stop.is_set():
        status = ask(source, port, request("/", basic(f"alice:guess-{source}-{n}")), 5)
        told[status] = told.get(status, 0) + 1
        n += 1


def main():
    half, addresses, guessers, seconds = (list(map(int, sys.argv[1:])) + [200, 4, 48, 20][len(sys.argv) - 1:])[:4]
    work = tempfile.mkdtemp(prefix="oomtriage-serve-attack-")
    out = os.path.join(work, "out", "job1")
    os.makedirs(out)
    with open(os.path.join(out, "log.txt"), "w") as f:
        f.write("Running 1 job\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.\n")
    state = os.path.join(work, "state")
    watch = subprocess.Popen([BINARY, "--state-dir", state, "watch", "--backfill", os.path.join(work, "out")],
                             stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(os.path.join(state, "oomtriage.db")):
            break
        time.sleep(0.1)
    time.sleep(2)
    watch.terminate()
    watch.wait()
    access = os.path.join(work, "access")
    with open(os.path.join(access), "w") as f:
        f.write(f"token {TOKEN}\nalice:{bcrypt('right-password', 10)}\n")
    os.chmod(access, 0o600)
    serve = subprocess.Popen([BINARY, "--state-dir", state, "serve", "--listen", "127.0.0.1:0", "--access-file", access],
                             stderr=subprocess.PIPE, text=True)
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", serve.stderr.readline()).group(1))
    alice = basic("alice:right-password")
    assert ask("127.0.0.1", port, request("/healthz", alice), 5) == 200
    stop = threading.Event()
    stats = {"dropped": 0}
    told = {}
    threads = [threading.Thread(target=half_open, args=(port, half, addresses, stop, stats))]
    threads += [threading.Thread(target=guesser, args=(port, f"127.0.1.{1 + i}", stop, told)) for i in range(guessers)]
    for t in threads:
        t.start()
    time.sleep(2)
    cpu_before = cpu_seconds(serve.pid)
    started = time.monotonic()
    took = []
    ok = 0
    n = 0
    while time.monotonic() - started < seconds:
        t0 = time.monotonic()
        status = ask("127.0.0.1", port, request("/" if n % 2 == 0 else "/healthz", f"Bearer {TOKEN}" if n % 4 < 2 else alice), 1)
        ms = (time.monotonic() - t0) * 1000
        took.append(ms if status == 200 else 1e9)
        ok += status == 200 and ms <= 1000
        n += 1
    cpu = (cpu_seconds(serve.pid) - cpu_before) / (time.monotonic() - started)
    stop.set()
    for t in threads:
        t.join()
    serve.terminate()
    serve.wait()
    took.sort()
    p = lambda q: took[min(len(took) - 1, len(took) * q // 100)]
    fmt = lambda v: "none" if v >= 1e9 else f"{v:.1f} ms"
    print(f"half-open {half} from {addresses} addresses, {guessers} guessers, {seconds} s")
    print(f"legitimate client: {ok}/{n} answered 200 within 1 s ({100 * ok / max(n, 1):.1f}%), "
          f"p50 {fmt(p(50))}, p99 {fmt(p(99))}; half-open peers dropped {stats['dropped']}; "
          f"guessers told {dict(sorted(told.items()))}; serve CPU {100 * cpu:.0f}%")


if __name__ == "__main__":
    main()
