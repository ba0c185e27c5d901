#!/usr/bin/env bash
# bench/fleet_scale.sh: the fleet store at a million events, on this machine. Starts a private
# PostgreSQL (Debian's packages), fills it as 100 nodes would ship (100,000 jobs, 1,000,000
# events, heal attempts, config snapshots, GPU memory) through FleetStore::ship, then measures:
# one node catching up a 50,000-event backlog; `jobs --store` with each filter and `report
# --store`, p50/p99 over 30 runs each; and `serve`'s three pages under 20 keep-alive clients.
# The filled cluster is kept in $FLEET_DIR (default /tmp/oomtriage-fleet-bench) and reused by
# the next run; delete it to fill anew. About 15 minutes the first time.
# Usage: bench/fleet_scale.sh [NODES JOBS EVENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${1:-100}"
jobs="${2:-100000}"
events="${3:-1000000}"
[[ -x build/fleet_scale ]] || scripts/setup.sh
work="${FLEET_DIR:-/tmp/oomtriage-fleet-bench}"
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as=()
if [[ $(id -u) -eq 0 ]]; then as=(runuser -u postgres --); fi
port_file="$work/port"
fresh=0
if [[ ! -d "$work/data" ]]; then
  fresh=1
  mkdir -p "$work"
  chmod 755 "$work"
  [[ ${#as[@]} -eq 0 ]] || chown postgres "$work"
  echo "bench-secret" >"$work/pw"
  [[ ${#as[@]} -eq 0 ]] || chown postgres "$work/pw"
  "${as[@]}" "$bin/initdb" -D "$work/data" -U oomtriage --pwfile="$work/pw" --auth-local=trust \
    --auth-host=scram-sha-256 -E UTF8 >/dev/null
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' >"$port_file"
fi
port=$(cat "$port_file")
printf '127.0.0.1:%s:*:oomtriage:bench-secret\n127.0.0.1:%s:*:oomtriage_reader:reader-secret\n' \
  "$port" "$port" >"$work/pgpass"
chmod 600 "$work/pgpass"
# shared_buffers at a quarter of a small database server's memory; everything else as shipped.
"${as[@]}" "$bin/pg_ctl" -D "$work/data" -l "$work/server.log" \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $work -c shared_buffers=1GB" -w start >/dev/null
trap '"${as[@]}" "$bin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null; kill ${serve_pid:-0} 2>/dev/null || true' EXIT
url="postgresql://oomtriage@127.0.0.1:$port/postgres?passfile=$work/pgpass"
reader="postgresql://oomtriage_reader@127.0.0.1:$port/postgres?passfile=$work/pgpass"
psql=("$bin/psql" -X -A -t -q -h 127.0.0.1 -p "$port" -U oomtriage -d postgres)
export PGPASSFILE="$work/pgpass"

if ((fresh)); then
  echo "filling: $nodes nodes, $jobs jobs, $events events (two shippers at once) ..."
  half=$((nodes / 2))
  ./build/fleet_scale fill "$url" "$half" "$((jobs / 2))" "$((events / 2))" 90 0 2>/dev/null &
  first=$!
  ./build/fleet_scale fill "$url" "$((nodes - half))" "$((jobs - jobs / 2))" \
    "$((events - events / 2))" 90 "$half" 2>/dev/null
  wait "$first"
  "${psql[@]}" -c "VACUUM ANALYZE"
  "${psql[@]}" -c "CREATE ROLE oomtriage_reader LOGIN PASSWORD 'reader-secret'; GRANT USAGE ON SCHEMA oomtriage TO oomtriage_reader; GRANT SELECT ON ALL TABLES IN SCHEMA oomtriage TO oomtriage_reader;"
fi
echo "store: $("${psql[@]}" -c "SELECT (SELECT count(*) FROM oomtriage.jobs) || ' jobs, ' || (SELECT count(*) FROM oomtriage.events) || ' events, ' || (SELECT count(*) FROM oomtriage.runs) || ' runs, ' || (SELECT count(*) FROM oomtriage.heal_attempts) || ' heal attempts, ' || pg_size_pretty(pg_database_size('postgres'))")"

echo
echo "shipping: one node catching up a 50,000-event backlog"
./build/fleet_scale ship "$url" 50000

echo
echo "jobs --store and report --store (30 runs each; the process, its connection and the query)"
name=$("${psql[@]}" -c "SELECT name FROM oomtriage.jobs ORDER BY last_seen DESC OFFSET 500 LIMIT 1")
host=$("${psql[@]}" -c "SELECT host FROM oomtriage.jobs ORDER BY last_seen DESC OFFSET 500 LIMIT 1")
python3 - "$url" "$name" "$host" <<'PY'
import subprocess, sys, time
url, name, host = sys.argv[1:4]
cases = [
    ("jobs --limit 50", ["jobs", "--limit", "50"]),
    ("jobs --outcome crashed_oom", ["jobs", "--limit", "50", "--outcome", "crashed_oom"]),
    ("jobs --phase sampling", ["jobs", "--limit", "50", "--phase", "sampling"]),
    ("jobs --trainer kohya", ["jobs", "--limit", "50", "--trainer", "kohya"]),
    ("jobs --family wan2.1", ["jobs", "--limit", "50", "--family", "wan2.1"]),
    ("jobs --since 24h", ["jobs", "--limit", "50", "--since", "24h"]),
    ("jobs --name lora_0004", ["jobs", "--limit", "50", "--name", "lora_0004"]),
    ("jobs --host", ["jobs", "--limit", "50", "--host", host]),
    ("jobs all filters", ["jobs", "--limit", "50", "--outcome", "crashed_oom", "--phase", "train_step", "--family", "flux.1", "--since", "30d"]),
    ("jobs --outcome stopped (none)", ["jobs", "--limit", "50", "--outcome", "stopped"]),
    ("report NAME", ["report", name, "--json"]),
]
for label, args in cases:
    times = []
    for _ in range(30):
        start = time.perf_counter()
        out = subprocess.run(["./build/oomtriage", "--store", url] + args, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
        if out.returncode != 0:
            sys.exit(f"{label}: {out.stderr.decode()}")
    times.sort()
    print(f"{label:<34} p50={times[14]:6.1f} ms  p99={times[-1]:6.1f} ms")
PY

echo
echo "serve: 20 keep-alive clients for 30 s per page (read-only role, 4 threads)"
./build/oomtriage --store "$reader" serve --listen 127.0.0.1:0 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 100); do grep -q http:// "$work/serve.err" && break; sleep 0.1; done
address=$(grep -o '127.0.0.1:[0-9]*' "$work/serve.err" | head -1)
key=$("${psql[@]}" -c "SELECT store_id || '.' || id FROM oomtriage.jobs ORDER BY last_seen DESC OFFSET 500 LIMIT 1")
./build/fleet_scale load "$address" 20 30 / "/?outcome=crashed_oom" "/?phase=sampling" \
  "/?family=wan2.1" "/?trainer=kohya" "/?since=24h" "/?q=lora_0004" "/?host=$host" \
  "/?outcome=crashed_oom&phase=train_step&family=flux.1&since=30d" "/?page=40"
./build/fleet_scale load "$address" 20 30 "/job/$key"
./build/fleet_scale load "$address" 20 30 /fleet
kill "$serve_pid"
