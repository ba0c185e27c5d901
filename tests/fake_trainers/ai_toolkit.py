#!/usr/bin/env python3
"""A stand-in for AI Toolkit's run.py for `oomtriage run --heal` tests (no GPU here).

It reads a job config (YAML or JSON, AI Toolkit's layout), prints what AI Toolkit prints (the
process config, "# Running job:", the caching bar, the training bar drawn by the real tqdm,
"Generating Samples", "Saving at step N" / "Saved checkpoint to ..."), saves checkpoints named as
AI Toolkit names them and resumes from the newest one the way AI Toolkit does ("Found step N in
metadata"), and dies with a real-format CUDA OOM when the config needs more than FAKE_VRAM_GIB:
in a training step (weights' quantization, batch x top bucket, gradient checkpointing) or in
preview sampling (sample size and steps). FAKE_RESUME_BROKEN=1 makes it start from step 0 whatever it finds (the restart
that would overwrite saves); FAKE_CRASH_OTHER=N dies of a RuntimeError at step N;
FAKE_STEP_SECONDS sleeps in every step; FAKE_LOAD_OOM_ONCE=FILE makes the first resumed start
that finds no FILE create it and die of an OOM while loading, before its training bar. Started by the UI's worker (AITK_JOB_ID set, the
config's sqlite_db_path naming the UI's database) it writes its status there as AI Toolkit's
DiffusionTrainer does (error with the exception's text, stopped, completed) and stops when the
job's `stop` is set. Usage: ai_toolkit.py CONFIG
"""
import glob
import json
import os
import sqlite3
import sys
import time

import tqdm
import yaml

GIB = 1 << 30


class UiJob:
    """The job's row in the UI's database, when the UI started this process."""

    def __init__(self, process):
        self.id = os.environ.get("AITK_JOB_ID")
        self.db = sqlite3.connect(process["sqlite_db_path"], timeout=30) \
            if self.id and process.get("sqlite_db_path") else None

    def set_status(self, status, info):
        if self.db:
            self.db.execute("UPDATE Job SET status = ?, info = ? WHERE id = ?", (status, info, self.id))
            self.db.commit()

    def should_stop(self):
        return bool(self.db) and self.db.execute(
            "SELECT stop FROM Job WHERE id = ?", (self.id,)).fetchone()[0] == 1


ui = None
resumed = False


def user_edit():
    spec = os.environ.get("FAKE_EDIT")
    if not spec or (os.environ.get("FAKE_EDIT_RESUMED_ONLY") == "1" and not resumed):
        return
    path, old, new = spec.split("|")
    with open(path) as f:
        text = f.read()
    if old in text:
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1))


def oom(tried_gib, vram_gib):
    return (f"CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU 0 has a total capacity of "
            f"{vram_gib:.2f} GiB of which 312.00 MiB is free. Including non-PyTorch memory, this process "
            f"has {vram_gib - 0.5:.2f} GiB memory in use. Of the allocated memory {vram_gib - 1.5:.2f} GiB "
            "is allocated by PyTorch, and 301.45 MiB is reserved by PyTorch but unallocated.")


def die(message, where):
    user_edit()
    if ui:
        ui.set_status("error", message)
    print(f"Error running job: {message}")
    print("\n========================================\nResult:\n - 0 completed jobs\n - 1 failure\n"
          "========================================")
    sys.stderr.write("Traceback (most recent call last):\n"
                     '  File "/app/ai-toolkit/run.py", line 96, in main\n    job.run()\n'
                     f'  File "/app/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2706, in {where}\n'
                     f"torch.OutOfMemoryError: {message}\n")
    sys.exit(1)


def main():
    path = sys.argv[1]
    with open(path) as f:
        doc = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
    config = doc["config"]
    name = config["name"]
    process = config["process"][0]
    global ui
    ui = UiJob(process)
    ui.set_status("running", "Starting")
    train, sample, dataset = process["train"], process.get("sample", {}), process["datasets"][0]
    save_every = process.get("save", {}).get("save_every", 250)
    steps = train.get("steps", 1000)
    vram = float(os.environ.get("FAKE_VRAM_GIB", "24"))
    folder = os.path.join(process["training_folder"], name)
    os.makedirs(folder, exist_ok=True)

    print("Running 1 job")
    print(json.dumps(process, indent=4))
    print(f"#############################################\n# Running job: {name}\n"
          "#############################################\nRunning  1 process\nLoading Flux model")
    sizes = dataset.get("resolution", [1024])
    sizes = sizes if isinstance(sizes, list) else [sizes]
    print(f"Bucket sizes for {dataset['folder_path']}:")
    for size in sizes:
        print(f"{size}x{size}: 10 files")
    print(f"{len(sizes)} buckets made")
    for _ in tqdm.tqdm(range(10), desc="Caching latents to disk", file=sys.stdout):
        pass

    start = 0
    saves = sorted(glob.glob(os.path.join(folder, f"{name}_*.safetensors")), key=os.path.getctime)
    if saves and os.environ.get("FAKE_RESUME_BROKEN") != "1":
        start = int(saves[-1].rsplit("_", 1)[1].split(".")[0])
        global resumed
        resumed = True
        print(f"#### IMPORTANT RESUMING FROM {saves[-1]} ####\nLoading from {saves[-1]}")
        print(f"Found step {start} in metadata, starting from there")
        marker = os.environ.get("FAKE_LOAD_OOM_ONCE")
        if marker and not os.path.exists(marker):
            open(marker, "w").close()
            print("Loading transformer")
            die(oom(2.0, vram), "load_model")

    # The transformer's weights: 8-bit by default, 4-bit with a uint4 qtype.
    base = 5 if "4" in str(process.get("model", {}).get("qtype", "qfloat8")) else 8
    per_sample = 1.0 * train.get("batch_size", 1) * (max(sizes) / 512) ** 2
    train_need = base + per_sample * (2 if train.get("gradient_checkpointing", True) else 6)
    sample_need = base + (sample.get("width", 1024) * sample.get("height", 1024) / (1024 * 1024)) * 6 \
        * (1 + sample.get("sample_steps", 20) / 40)
    fail_step = int(os.environ.get("FAKE_TRAIN_OOM_AT", "0")) or max(start + 1, steps // 2)
    bar = tqdm.tqdm(total=steps, initial=start, desc=name, file=sys.stdout, mininterval=0)
    crash_other = int(os.environ.get("FAKE_CRASH_OTHER", "0"))
    step_seconds = float(os.environ.get("FAKE_STEP_SECONDS", "0"))
    for step in range(start + 1, steps + 1):
        if step == crash_other:
            raise RuntimeError("Expected all tensors to be on the same device")
        if step_seconds:
            time.sleep(step_seconds)
        if ui.should_stop():
            bar.close()
            print("Job stopped")
            ui.set_status("stopped", "Job stopped")
            return
        if train_need > vram and step >= fail_step:
            bar.close()
            die(oom(train_need - vram + 0.5, vram), "train_single_accumulation")
        bar.set_postfix_str("lr: 1.0e-04 loss: 4.123e-01")
        bar.update(1)
        if step % sample.get("sample_every", 250) == 0 and not train.get("disable_sampling", False):
            print()
            for i in tqdm.tqdm(range(2), desc="Generating Samples", file=sys.stdout):
                if sample_need > vram:
                    die(oom(sample_need - vram + 0.5, vram), "sample")
        if step % save_every == 0:
            out = os.path.join(folder, f"{name}_{step:09d}.safetensors")
            open(out, "w").close()
            time.sleep(0.01)  # distinct ctimes
            print(f"\nSaving at step {step}\nSaved checkpoint to {out}")
    bar.close()
    ui.set_status("completed", "Training completed")
    print("\n========================================\nResult:\n - 1 completed jobs\n - 0 failure\n"
          "========================================")


if __name__ == "__main__":
    main()
