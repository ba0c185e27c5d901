#!/usr/bin/env python3
"""Writes an AI Toolkit-style training log of a given size (default 1 GiB) for benchmarks.

The log has AI Toolkit's shape (docs/ai-toolkit.md §3): the start-up lines, a latent-caching
bar, then the training bar redrawn with '\\r' once per step, a 'Generating Samples' bar every 250
steps, 'Saving at step N' lines, and at the very end one sampling OOM with its traceback.
Usage: gen_aitk_log.py OUT [SIZE_MIB]
"""
import sys

OOM = ("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.55 GiB of "
       "which 812.00 MiB is free. Of the allocated memory 21.87 GiB is allocated by PyTorch, and "
       "301.45 MiB is reserved by PyTorch but unallocated.")


def frame(desc, n, total, rate, postfix=""):
    pct = 100 * n // total
    filled = 10 * n // total
    bar = "\u2588" * filled + " " * (10 - filled)
    return f"\r{desc}: {pct:3d}%|{bar}| {n}/{total} [{n // 60 % 60:02d}:{n % 60:02d}<12:00, {rate}{postfix}]"


def main():
    out_path = sys.argv[1]
    target = int(sys.argv[2]) * 1024 * 1024 if len(sys.argv) > 2 else 1 << 30
    job = "bench_lora"
    total = 20_000_000
    with open(out_path, "w", encoding="utf-8", newline="") as out:
        out.write(f"Running 1 job\n# Running job: {job}\nRunning  1 process\nLoading Flux model\n"
                  "Loading transformer\nQuantizing transformer\nLoading VAE\nCaching latents for /data\n")
        out.write("".join(frame("Caching latents to disk", n, 40, "12.10it/s") for n in range(41)) + "\n")
        out.write("Generating baseline samples before training\n")
        out.write("".join(frame("Generating Samples", n, 3, "9.1s/it") for n in range(4)) + "\n\n")
        written = out.tell()
        n = 0
        while written < target - 4096:
            chunk = []
            for _ in range(1000):
                n += 1
                chunk.append(frame(job, n, total, "1.40s/it", ", lr: 1.0e-04 loss: 4.123e-01"))
                if n % 250 == 0:
                    chunk.append("".join(frame("Generating Samples", i, 3, "9.1s/it") for i in range(4)))
                    chunk.append(f"\n\nSaving at step {n}\nSaved checkpoint to output/{job}/{job}_{n:09d}.safetensors\n")
            text = "".join(chunk)
            out.write(text)
            written += len(text.encode("utf-8"))
        out.write(frame("Generating Samples", 1, 3, "31.0s/it") + f"Error running job: {OOM}\n\n"
                  "========================================\nResult:\n - 0 completed jobs\n - 1 failure\n"
                  "========================================\nTraceback (most recent call last):\n"
                  '  File "/app/ai-toolkit/toolkit/models/base_model.py", line 512, in generate_images\n'
                  f"torch.OutOfMemoryError: {OOM}\n\nJob process terminated with exit code 1.\n")


if __name__ == "__main__":
    main()
