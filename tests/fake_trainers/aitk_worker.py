#!/usr/bin/env python3
"""A stand-in for AI Toolkit UI's worker (ui/cron/worker.ts, processQueue.ts, startJob.ts) for the
daemon's healing tests: it polls the UI's database and starts queued jobs the way the real one
does. For each Queue row: not running -> nothing; running with no job running or stopping on its
GPUs -> the queued job with the lowest queue_position is started, and with none left the queue is
set not running ("No more jobs in queue"). Starting a job: status running, info 'Starting job...',
<training folder>/<name>/.job_config.json written from Job.job_config with sqlite_db_path set,
an existing log.txt moved to logs/{n}_log.txt (lowest free n), the trainer started with stdout
and stderr appended to log.txt and AITK_JOB_ID in its environment. When a trainer exits while its
row still says running: error, 'Job process terminated with exit code N.'.

Usage: aitk_worker.py DB TRAINER_SCRIPT [SECONDS]   (polls every 0.2 s, exits after SECONDS)
"""
import json
import os
import sqlite3
import subprocess
import sys
import time


def start_job(db, job, trainer):
    job_id, name, gpu_ids, job_config = job
    config = json.loads(job_config)
    process = config["config"]["process"][0]
    process["sqlite_db_path"] = os.path.abspath(sys.argv[1])
    folder = os.path.join(process["training_folder"], name)
    os.makedirs(folder, exist_ok=True)
    db.execute("UPDATE Job SET status = 'running', stop = 0, info = 'Starting job...' WHERE id = ?",
               (job_id,))
    db.commit()
    config_path = os.path.join(folder, ".job_config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)
    log_path = os.path.join(folder, "log.txt")
    if os.path.exists(log_path):
        os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
        n = 0
        while os.path.exists(os.path.join(folder, "logs", f"{n}_log.txt")):
            n += 1
        os.rename(log_path, os.path.join(folder, "logs", f"{n}_log.txt"))
    log = open(log_path, "a")
    env = dict(os.environ, AITK_JOB_ID=job_id, CUDA_VISIBLE_DEVICES=gpu_ids, IS_AI_TOOLKIT_UI="1",
               PYTHONUNBUFFERED="1")
    child = subprocess.Popen([sys.executable, trainer, config_path], stdout=log, stderr=log, env=env)
    log.close()
    return child


def main():
    db = sqlite3.connect(sys.argv[1], timeout=30)
    trainer = sys.argv[2]
    deadline = time.monotonic() + float(sys.argv[3] if len(sys.argv) > 3 else 120)
    children = {}  # job id -> process
    while time.monotonic() < deadline:
        for job_id, child in list(children.items()):
            code = child.poll()
            if code is None:
                continue
            del children[job_id]
            db.execute("UPDATE Job SET status = 'error', info = ? WHERE id = ? AND status = 'running'",
                       (f"Job process terminated with exit code {code}.", job_id))
            db.commit()
        for gpu_ids, is_running in db.execute("SELECT gpu_ids, is_running FROM Queue ORDER BY id").fetchall():
            if is_running != 1:
                continue
            busy = db.execute("SELECT COUNT(*) FROM Job WHERE gpu_ids = ? AND status IN ('running', 'stopping')",
                              (gpu_ids,)).fetchone()[0]
            if busy:
                continue
            job = db.execute("SELECT id, name, gpu_ids, job_config FROM Job WHERE gpu_ids = ? AND "
                             "status = 'queued' ORDER BY queue_position LIMIT 1", (gpu_ids,)).fetchone()
            if job is None:
                print(f"No more jobs in queue {gpu_ids}, stopping queue", flush=True)
                db.execute("UPDATE Queue SET is_running = 0 WHERE gpu_ids = ?", (gpu_ids,))
                db.commit()
                continue
            children[job[0]] = start_job(db, job, trainer)
        time.sleep(0.2)
    for child in children.values():
        child.kill()


if __name__ == "__main__":
    main()
