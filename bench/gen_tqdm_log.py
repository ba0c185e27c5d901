#!/usr/bin/env python3
"""Writes an AI Toolkit-style training log whose bars are drawn by the real tqdm (Debian's
python3-tqdm), for benchmarks beside gen_aitk_log.py's hand-drawn one.

tqdm.format_meter is the function tqdm itself draws each frame with: partial-block bars
('█▋'), the elapsed<remaining clock, rates in s/it or it/s, a postfix. One training frame per
step, a 'Generating Images' bar and 'Saving' lines every 250 steps, and a sampling OOM with its
traceback at the end. Usage: /usr/bin/python3 gen_tqdm_log.py OUT [SIZE_MIB]
"""
import sys

from tqdm import tqdm

OOM = ("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.55 GiB of "
       "which 812.00 MiB is free. Of the allocated memory 21.87 GiB is allocated by PyTorch, and "
       "301.45 MiB is reserved by PyTorch but unallocated.")


def main():
    out_path = sys.argv[1]
    target = int(sys.argv[2]) * 1024 * 1024 if len(sys.argv) > 2 else 1 << 30
    job = "tqdm_lora"
    total = 10_000_000
    meter = tqdm.format_meter
    with open(out_path, "w", encoding="utf-8", newline="") as out:
        out.write(f"Running 1 job\n# Running job: {job}\nRunning  1 process\nLoading Flux model\n"
                  "Loading transformer\nLoading VAE\n")
        written = out.tell()
        step = 0
        while written < target - 4096:
            chunk = []
            for _ in range(250):
                step += 1
                loss = 0.35 + (step * 7919 % 1000) / 10000
                chunk.append("\r" + meter(step, total, step * 1.41, prefix=job, unit="it",
                                          postfix=f"lr: 1.0e-04 loss: {loss:.3e}"))
            chunk.append("\n")
            chunk.append("".join("\r" + meter(i, 4, i * 9.1, prefix="Generating Images", unit="it")
                                 for i in range(5)))
            chunk.append(f"\nSaving at step {step}\n"
                         f"Saved checkpoint to output/{job}/{job}_{step:09d}.safetensors\n")
            text = "".join(chunk)
            out.write(text)
            written += len(text.encode("utf-8"))
        out.write("\r" + meter(1, 4, 31.0, prefix="Generating Images", unit="it") +
                  f"\nError running job: {OOM}\n\n"
                  "========================================\nResult:\n - 0 completed jobs\n - 1 failure\n"
                  "========================================\nTraceback (most recent call last):\n"
                  '  File "/app/ai-toolkit/toolkit/models/base_model.py", line 512, in generate_images\n'
                  f"torch.OutOfMemoryError: {OOM}\n")


if __name__ == "__main__":
    main()
