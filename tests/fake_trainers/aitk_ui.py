#!/usr/bin/env python3
"""A stand-in for AI Toolkit UI's HTTP routes (ui/src/app/api/...) for the daemon's healing tests,
doing to the UI's database what each real route does:

  GET  /api/jobs                  -> {"jobs": [every job]}          (api/jobs/route.ts GET)
  GET  /api/jobs?id=ID            -> the job, or null
  POST /api/jobs {id, name, gpu_ids, job_config}: name, gpu_ids and job_config = JSON.stringify(...)
  GET  /api/jobs/ID/start         -> queue_position = max + 1000, a Queue row (not running) if none,
                                     status queued, stop false, return_to_queue false, 'Job queued'
  GET  /api/queue/GPUS/start      -> Queue.is_running = true (created if missing)
  GET  /api/jobs/ID/stop          -> stop true, 'Stopping job...'; SIGINT to its pid when it has one
                                     (the fake worker keeps none), then stopped, 'Job stopped'

With AI_TOOLKIT_AUTH set, every /api/ route needs `Authorization: Bearer <token>` (middleware.ts),
else 401 {"error": "Unauthorized"}. Each request is appended to REQUEST_LOG as "METHOD PATH STATUS".

Usage: aitk_ui.py DB PORT_FILE REQUEST_LOG   (listens on 127.0.0.1, a free port written to PORT_FILE)
"""
import json
import os
import signal
import sqlite3
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DB = sys.argv[1]
TOKEN = os.environ.get("AI_TOOLKIT_AUTH")
COLUMNS = ["id", "name", "gpu_ids", "job_config", "created_at", "updated_at", "status", "stop",
           "return_to_queue", "step", "total_steps", "info", "speed_string", "queue_position", "pid",
           "job_type", "job_ref", "save_now", "sample_now"]
BOOLEANS = {"stop", "return_to_queue", "save_now", "sample_now"}


def now_ms():
    return int(time.time() * 1000)


def job_json(row):
    job = dict(zip(COLUMNS, row))
    for key in BOOLEANS:
        job[key] = bool(job[key])
    return job


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        with open(sys.argv[3], "a") as log:
            log.write(f"{self.command} {self.path} {status}\n")

    def authorized(self):
        if not TOKEN:
            return True
        header = self.headers.get("Authorization", "")
        if header.split(" ")[-1] == TOKEN and header.startswith("Bearer "):
            return True
        self.answer(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):
        if not self.authorized():
            return
        url = urllib.parse.urlparse(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        db = sqlite3.connect(DB, timeout=30)
        try:
            if parts == ["api", "jobs"]:
                query = urllib.parse.parse_qs(url.query)
                if "id" in query:
                    row = db.execute(f"SELECT {','.join(COLUMNS)} FROM Job WHERE id = ?",
                                     (query["id"][0],)).fetchone()
                    return self.answer(200, job_json(row) if row else None)
                rows = db.execute(f"SELECT {','.join(COLUMNS)} FROM Job ORDER BY created_at DESC")
                return self.answer(200, {"jobs": [job_json(r) for r in rows]})
            if len(parts) == 4 and parts[:2] == ["api", "jobs"] and parts[3] == "start":
                row = db.execute("SELECT gpu_ids FROM Job WHERE id = ?", (parts[2],)).fetchone()
                if row is None:
                    return self.answer(404, {"error": "Job not found"})
                top = db.execute("SELECT MAX(queue_position) FROM Job").fetchone()[0] or 0
                db.execute("UPDATE Job SET queue_position = ?, updated_at = ? WHERE id = ?",
                           (top + 1000, now_ms(), parts[2]))
                if db.execute("SELECT 1 FROM Queue WHERE gpu_ids = ?", (row[0],)).fetchone() is None:
                    db.execute("INSERT INTO Queue (gpu_ids, is_running) VALUES (?, 0)", (row[0],))
                db.execute("UPDATE Job SET status = 'queued', stop = 0, return_to_queue = 0, "
                           "info = 'Job queued', updated_at = ? WHERE id = ?", (now_ms(), parts[2]))
                db.commit()
                return self.answer(200, {"id": parts[2]})
            if len(parts) == 4 and parts[:2] == ["api", "jobs"] and parts[3] == "stop":
                row = db.execute("SELECT pid FROM Job WHERE id = ?", (parts[2],)).fetchone()
                if row is None:
                    return self.answer(404, {"error": "Job not found"})
                db.execute("UPDATE Job SET stop = 1, info = 'Stopping job...', updated_at = ? "
                           "WHERE id = ?", (now_ms(), parts[2]))
                if row[0] is not None:
                    try:
                        os.kill(row[0], signal.SIGINT)
                        db.execute("UPDATE Job SET status = 'stopped', info = 'Job stopped' "
                                   "WHERE id = ?", (parts[2],))
                    except OSError:
                        pass
                db.commit()
                return self.answer(200, {"id": parts[2]})
            if len(parts) == 4 and parts[:2] == ["api", "queue"] and parts[3] == "start":
                if db.execute("SELECT 1 FROM Queue WHERE gpu_ids = ?", (parts[2],)).fetchone():
                    db.execute("UPDATE Queue SET is_running = 1 WHERE gpu_ids = ?", (parts[2],))
                else:
                    db.execute("INSERT INTO Queue (gpu_ids, is_running) VALUES (?, 1)", (parts[2],))
                db.commit()
                return self.answer(200, {"gpu_ids": parts[2], "is_running": True})
            return self.answer(404, {"error": "no such route"})
        finally:
            db.close()

    def do_POST(self):
        if not self.authorized():
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if urllib.parse.urlparse(self.path).path != "/api/jobs" or "id" not in body:
            return self.answer(404, {"error": "no such route"})
        db = sqlite3.connect(DB, timeout=30)
        try:
            db.execute("UPDATE Job SET name = ?, gpu_ids = ?, job_config = ?, updated_at = ? "
                       "WHERE id = ?", (body["name"], body["gpu_ids"],
                                        json.dumps(body["job_config"]), now_ms(), body["id"]))
            db.commit()
            return self.answer(200, {"id": body["id"]})
        finally:
            db.close()


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()


if __name__ == "__main__":
    main()
