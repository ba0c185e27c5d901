#!/usr/bin/env python3
"""Writes the golden logs under tests/testdata/logs/ and, beside each, NAME.expect.json.

Each scenario is built the way the trainer prints it (docs/ai-toolkit.md §3 and docs/formats.md
§3 give the exact strings: '\\r'-separated tqdm frames, AI Toolkit's banners and result block,
kohya's sample announcement, ...). The expectation is written from the scenario itself (where the
crash was put), never from oomtriage's output. Run it again after changing a scenario:
    python3 tests/testdata/make_golden_logs.py
"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "logs")

OOM_NEW = ("CUDA out of memory. Tried to allocate {req}. GPU 0 has a total capacity of 23.55 GiB of "
           "which {free} is free. Including non-PyTorch memory, this process has 22.51 GiB memory in "
           "use. Of the allocated memory 21.87 GiB is allocated by PyTorch, and 301.45 MiB is reserved "
           "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
           "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def bar(desc, n, total, rate="1.40s/it", postfix=None):
    pct = int(100 * n / total) if total else 0
    filled = int(10 * n / total) if total else 0
    barstr = "\u2588" * filled + " " * (10 - filled)
    head = f"{desc}: " if desc else ""
    tail = f", {postfix}" if postfix else ""
    return f"{head}{pct:3d}%|{barstr}| {n}/{total} [00:{n % 60:02d}<12:00, {rate}{tail}]"


def aitk_loss(n):
    """A loss that falls as training goes, with step-to-step noise; always 0.1..1, so that the
    frame's length (and every offset after it) does not depend on it."""
    return 0.16 + 0.26 * math.exp(-n / 700) + 0.04 * ((n * 7919) % 101) / 101


def aitk_frames(job, start, end, total):
    return "".join("\r" + bar(job, n, total, postfix=f"lr: 1.0e-04 loss: {aitk_loss(n):.3e}")
                   for n in range(start, end + 1))


def aitk_header(job, steps=3000, gc="true"):
    config = {"job": "extension", "config": {"name": job, "process": [{
        "type": "sd_trainer", "training_folder": "output", "device": "cuda:0",
        "train": {"batch_size": 1, "steps": steps, "gradient_checkpointing": gc == "true",
                  "lr": 1e-4, "dtype": "bf16"},
        "datasets": [{"folder_path": "/data/images", "caption_ext": "txt",
                      "cache_latents_to_disk": True, "resolution": [512, 768, 1024]}],
        "model": {"name_or_path": "black-forest-labs/FLUX.1-dev", "is_flux": True, "quantize": True},
        "sample": {"sample_every": 250, "width": 1024, "height": 1024, "sample_steps": 20}}]}}
    # AI Toolkit prints the process section (not the whole file) with json.dumps(indent=4).
    return ("Running 1 job\n" + json.dumps(config["config"]["process"][0], indent=4) + "\n"
            "#############################################\n"
            f"# Running job: {job}\n"
            "#############################################\n\n"
            "Running  1 process\n"
            "Loading Flux model\nLoading transformer\nQuantizing transformer\nLoading VAE\n"
            "Loading T5\nQuantizing T5\nLoading CLIP\nMaking pipe\nPreparing Model\n"
            "create LoRA network. base dim (rank): 16, alpha: 16\n"
            "Dataset: /data/images\n  -  Preprocessing image dimensions\n  -  Found 40 images\n"
            "Bucket sizes for /data/images:\n1024x1024: 40 files\n1 buckets made\n"
            "Caching latents for /data/images\n - Saving latents to disk\n"
            + "".join("\r" + bar("Caching latents to disk", n, 40, "12.10it/s") for n in range(0, 41, 10))
            + "\n")


def aitk_error_tail(message, frames, cls="torch.OutOfMemoryError", exit_line=True):
    tb = "".join(f'  File "/app/ai-toolkit/{path}", line {line}, in {fn}\n    {src}\n'
                 for path, line, fn, src in frames)
    out = (f"Error running job: {message}\n\n"
           "========================================\nResult:\n - 0 completed jobs\n - 1 failure\n"
           "========================================\n"
           "Traceback (most recent call last):\n"
           '  File "/app/ai-toolkit/run.py", line 120, in <module>\n    main()\n'
           '  File "/app/ai-toolkit/run.py", line 108, in main\n    raise e\n'
           '  File "/app/ai-toolkit/run.py", line 96, in main\n    job.run()\n'
           '  File "/app/ai-toolkit/jobs/ExtensionJob.py", line 22, in run\n    process.run()\n'
           + tb + f"{cls}: {message}\n")
    if exit_line:
        out += "\nJob process terminated with exit code 1.\n"
    return out


TRAIN_FRAMES = [("jobs/process/BaseSDTrainProcess.py", 2621, "run", "loss_dict = self.hook_train_loop(batch_list)"),
                ("extensions_built_in/sd_trainer/SDTrainer.py", 2180, "hook_train_loop", "loss = self.train_single_accumulation(batch)"),
                ("extensions_built_in/sd_trainer/SDTrainer.py", 2011, "train_single_accumulation", "self.accelerator.backward(loss)"),
                ("venv/lib/python3.11/site-packages/torch/_tensor.py", 581, "backward", "torch.autograd.backward(")]
SAMPLE_FRAMES = [("jobs/process/BaseSDTrainProcess.py", 2706, "run", "self.sample(self.step_num)"),
                 ("extensions_built_in/sd_trainer/DiffusionTrainer.py", 419, "sample", "super().sample(step, is_first)"),
                 ("jobs/process/BaseSDTrainProcess.py", 378, "sample", "self.sd.generate_images(gen_img_config_list, sampler=sample_config.sampler)"),
                 ("toolkit/models/base_model.py", 512, "generate_images", "img = pipeline(**extra)")]
QUANT_FRAMES = [("jobs/process/BaseSDTrainProcess.py", 1801, "run", "self.sd.load_model()"),
                ("toolkit/stable_diffusion_model.py", 702, "load_model", "quantize_model(self, transformer)"),
                ("toolkit/util/quantize.py", 461, "quantize_model", "block.to(\"cpu\")")]


def ev(kind, phase, step, recovered=False, **figures):
    e = {"kind": kind, "phase": phase, "step": step, "recovered": recovered}
    e.update(figures)
    return e


def scenarios():
    s = {}
    job = "flux_gc_off"
    s["aitk_gc_off_oom_step2"] = (
        aitk_header(job, gc="false") + "Skipping first sample due to config setting\n"
        + aitk_frames(job, 0, 2, 3000)
        + aitk_error_tail(OOM_NEW.format(req="2.00 GiB", free="1.02 GiB"), TRAIN_FRAMES),
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("cuda", "train_step", 2, tried_to_allocate_bytes=2147483648,
                       free_bytes=1095216660, total_capacity_bytes=25286619955)]})

    job = "my_lora"
    s["aitk_sampling_oom_step500"] = (
        aitk_header(job) + "Skipping first sample due to config setting\n"
        + aitk_frames(job, 0, 250, 3000)
        + "".join("\r" + bar("Generating Samples", n, 3, "12.1s/it") for n in range(0, 4)) + "\n\n"
        + "\nSaving at step 250\nSaved checkpoint to output/my_lora/my_lora_000000250.safetensors\n"
        + aitk_frames(job, 251, 500, 3000)
        + "\r" + bar("Generating Samples", 0, 3, "?it/s") + "\r" + bar("Generating Samples", 1, 3, "31.0s/it")
        + aitk_error_tail(OOM_NEW.format(req="1.50 GiB", free="812.00 MiB"), SAMPLE_FRAMES),
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("cuda", "sampling", 500, tried_to_allocate_bytes=1610612736)]})

    job = "ltx_lora"
    s["aitk_baseline_sample_oom"] = (
        aitk_header(job) + "Generating baseline samples before training\n"
        + "\r" + bar("Generating Samples", 0, 4, "?it/s")
        + aitk_error_tail(OOM_NEW.format(req="3.00 GiB", free="120.00 MiB"), SAMPLE_FRAMES),
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("cuda", "sampling", 0)]})

    job = "zimage_buckets"
    banner = ("\n################################################\n"
              "# OOM during training step, skipping batch {n}/3 #\n"
              "################################################\n\n")
    s["aitk_bucket_oom_random_step_abort"] = (
        aitk_header(job) + "Skipping first sample due to config setting\n"
        + aitk_frames(job, 0, 1337, 3000) + banner.format(n=1)
        + aitk_frames(job, 1338, 1338, 3000) + banner.format(n=2)
        + aitk_frames(job, 1339, 1339, 3000) + banner.format(n=3)
        + aitk_frames(job, 1340, 1340, 3000)
        + aitk_error_tail("OOM during training step 3 times in a row, aborting training",
                          TRAIN_FRAMES[:1], cls="RuntimeError"),
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("cuda", "train_step", 1337, True), ev("cuda", "train_step", 1338, True),
                    ev("cuda", "train_step", 1339, True), ev("cuda", "train_step", 1340)]})

    job = "wan_quantize"
    s["aitk_quantize_oom"] = (
        "Running 1 job\n#############################################\n"
        f"# Running job: {job}\n#############################################\n\nRunning  1 process\n"
        "Loading transformer 1\nQuantizing Transformer 1\n - quantizing 40 transformer blocks\n"
        + "".join("\r" + bar("", n, 40, "4.88s/it") for n in range(0, 13))
        + aitk_error_tail("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in "
                          "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for "
                          "more information.\nCUDA kernel errors might be asynchronously reported at some "
                          "other API call, so the stacktrace below might be incorrect.\nFor debugging "
                          "consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to "
                          "enable device-side assertions.", QUANT_FRAMES, cls="torch.AcceleratorError"),
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("cuda", "quantize", None)]})

    job = "qwen_recovered"
    s["aitk_recovered_then_completed"] = (
        aitk_header(job, steps=1000) + "Skipping first sample due to config setting\n"
        + aitk_frames(job, 0, 800, 1000) + banner.format(n=1) + aitk_frames(job, 801, 1000, 1000)
        + "\n\nSaving at step 1000\nSaved checkpoint to output/qwen_recovered/qwen_recovered.safetensors\n"
        + "\n========================================\nResult:\n - 1 completed job\n - 0 failures\n"
        "========================================\n",
        {"trainer": "ai-toolkit", "outcome": "completed", "job_name": job,
         "events": [ev("cuda", "train_step", 800, True)]})

    job = "qwen_edit_host"
    s["aitk_host_sigkill"] = (
        aitk_header(job) + "Skipping first sample due to config setting\n"
        + aitk_frames(job, 0, 120, 3000) + "\nJob process terminated with signal SIGKILL.\n",
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("host_killed", "train_step", 120)]})

    job = "stopped_lora"
    s["aitk_user_stop"] = (
        aitk_header(job) + "Skipping first sample due to config setting\n"
        + aitk_frames(job, 0, 42, 3000) + "\n"
        + aitk_error_tail("Job stopped", TRAIN_FRAMES[:1], cls="Exception", exit_line=False),
        {"trainer": "ai-toolkit", "outcome": "stopped", "job_name": job, "events": []})

    job = "done_lora"
    s["aitk_completed"] = (
        aitk_header(job, steps=500) + "Generating baseline samples before training\n"
        + "".join("\r" + bar("Generating Samples", n, 2, "9.1s/it") for n in range(0, 3)) + "\n\n"
        + aitk_frames(job, 0, 500, 500)
        + "\n\nSaving at step 500\nSaved checkpoint to output/done_lora/done_lora.safetensors\n"
        + "\n========================================\nResult:\n - 1 completed job\n - 0 failures\n"
        "========================================\n",
        {"trainer": "ai-toolkit", "outcome": "completed", "job_name": job, "events": []})

    # kohya sd-scripts: rich logging, a sampling OOM announced with its step.
    kohya = ("2026-02-16 08:00:01 INFO     prepare optimizer, data loader etc.        train_network.py:512\n"
             "2026-02-16 08:00:05 INFO     epoch 1/10                                train_network.py:1102\n"
             + "".join("\r" + bar("steps", n, 1000, "1.44it/s", f"avr_loss=0.{n % 97:03d}") for n in range(0, 501))
             + "\n2026-02-16 08:07:29 INFO                                                train_util.py:6393\n"
             "                    INFO     generating sample images at step / サンプル画像生成 ステップ: 500   train_util.py:6394\n"
             "                    INFO     prompt: a photo of sks dog                        train_util.py:6470\n"
             + "".join("\r" + bar("", n, 30, "4.20it/s") for n in range(0, 12))
             + "\nTraceback (most recent call last):\n"
             '  File "/w/sd-scripts/train_network.py", line 1251, in train\n    self.sample_images(accelerator, args, None, global_step)\n'
             '  File "/w/sd-scripts/library/train_util.py", line 6420, in sample_images\n    sample_image_inference(accelerator, args, pipeline)\n'
             "torch.OutOfMemoryError: " + OOM_NEW.format(req="640.00 MiB", free="402.00 MiB") + "\n"
             "steps:  50%|█████     | 500/1000 [05:47<05:47,  1.44it/s, avr_loss=0.115]\n")
    s["kohya_sample_oom_step500"] = (kohya, {"trainer": "sd-scripts", "outcome": "crashed_oom",
                                             "events": [ev("cuda", "sampling", 500)]})

    # diffusers DreamBooth LoRA: training-step OOM in backward, accelerate's timestamped logger.
    diffusers = ("08/23/2026 00:34:28 - INFO - __main__ - ***** Running training *****\n"
                 "08/23/2026 00:34:28 - INFO - __main__ -   Num examples = 40\n"
                 "08/23/2026 00:34:28 - INFO - __main__ -   Total optimization steps = 800\n"
                 + "".join("\r" + bar("Steps", n, 800, "1.10it/s", "loss=0.0873, lr=0.0001") for n in range(0, 38))
                 + "Traceback (most recent call last):\n"
                 '  File "/w/diffusers/examples/dreambooth/train_dreambooth_lora.py", line 1802, in main\n    accelerator.backward(loss)\n'
                 '  File "/venv/lib/python3.11/site-packages/accelerate/accelerator.py", line 2159, in backward\n    loss.backward(**kwargs)\n'
                 "torch.OutOfMemoryError: " + OOM_NEW.format(req="1.12 GiB", free="96.00 MiB") + "\n")
    s["diffusers_train_step_oom"] = (diffusers, {"trainer": "diffusers", "outcome": "crashed_oom",
                                                 "events": [ev("cuda", "train_step", 37)]})

    # SimpleTuner: ANSI colours kept when piped, [RANK 0] prefixes, validation OOM.
    st = ("\x1b[32m[RANK 0] 2026-08-22 10:00:00,000 [INFO] Training has started.\x1b[0m\n"
          + "".join("\r" + bar("Epoch 1/10 Steps", n, 2000, "1.44it/s", "lr=0.0001, step_loss=0.0873") for n in range(990, 1001))
          + "\n\x1b[32m[RANK 0] 2026-08-22 10:11:00,000 [INFO] Validation is starting.\x1b[0m\n"
          + "".join("\r" + bar("Processing validation prompts", n, 4, "8.00s/it") for n in range(0, 2))
          + "\n\x1b[31m[RANK 0] 2026-08-22 10:11:20,000 [ERROR] torch.OutOfMemoryError: "
          + OOM_NEW.format(req="2.50 GiB", free="1.00 GiB") + "\x1b[0m\n")
    s["simpletuner_validation_oom"] = (st, {"trainer": "simpletuner", "outcome": "crashed_oom",
                                            "events": [ev("cuda", "sampling", 1000)]})

    # OneTrainer: the inner bar counts the batches of the current epoch. In the first epoch
    # (the outer bar at 0/20) they are the global step; in a later one the step is unknown.
    def onetrainer(epoch):
        return ("".join("\r" + bar("epoch", epoch, 20, "?it/s"))
                + "".join("\r" + bar("step", n, 100, "1.20it/s", "loss=0.123, smooth loss=0.118")
                          for n in range(0, 57))
                + "\nTraceback (most recent call last):\n"
                '  File "/w/OneTrainer/modules/trainer/GenericTrainer.py", line 702, in train\n'
                "    self.model_setup.predict(self.model, batch, self.config, train_progress)\n"
                "torch.OutOfMemoryError: " + OOM_NEW.format(req="320.00 MiB", free="100.00 MiB") + "\n")
    s["onetrainer_per_epoch_step_oom"] = (onetrainer(0), {"trainer": "onetrainer", "outcome": "crashed_oom",
                                                          "events": [ev("cuda", "train_step", 56)]})
    s["onetrainer_later_epoch_step_unknown"] = (onetrainer(3), {
        "trainer": "onetrainer", "outcome": "crashed_oom", "events": [ev("cuda", "train_step", None)]})

    # HF Trainer under torchrun: evaluation OOM, each rank prints its own copy with [rankN]:.
    def rank_tb(r, gpu):
        msg = OOM_NEW.format(req="1.00 GiB", free="10.00 MiB").replace("GPU 0", f"GPU {gpu}")
        return (f"[rank{r}]: Traceback (most recent call last):\n"
                f'[rank{r}]:   File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 4020, in evaluate\n'
                f"[rank{r}]:     output = eval_loop(\n"
                f"[rank{r}]: torch.OutOfMemoryError: {msg}\n")
    hf = ("***** Running training *****\n  Num examples = 12,000\n  Total optimization steps = 1,500\n"
          + "".join("\r" + bar("", n, 1500, "1.26it/s") for n in range(490, 501))
          + "\n{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 4.9e-05, 'epoch': 0.33}\n"
          "***** Running Evaluation *****\n  Num examples = 400\n"
          + "".join("\r" + bar("", n, 50, "3.10it/s") for n in range(0, 4)) + "\n"
          + rank_tb(0, 0) + rank_tb(1, 1)
          + "E0825 10:00:00.000000 1234 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) local_rank: 0 (pid: 1234) of binary: /usr/bin/python3\n")
    s["hf_trainer_eval_oom_two_ranks"] = (hf, {"trainer": "transformers", "outcome": "crashed_oom",
                                               "events": [ev("cuda", "sampling", 500)]})

    # A doubled tee (old AI Toolkit UI wrote stderr twice): one incident, not two.
    job = "tee_lora"
    tail = aitk_error_tail(OOM_NEW.format(req="2.00 GiB", free="1.02 GiB"), TRAIN_FRAMES, exit_line=False)
    doubled = "".join(line + "\n" + line + "\n" for line in tail.splitlines())
    s["aitk_doubled_tee_one_incident"] = (
        aitk_header(job) + aitk_frames(job, 0, 7, 3000) + "\n" + doubled,
        {"trainer": "ai-toolkit", "outcome": "crashed_oom", "job_name": job,
         "events": [ev("cuda", "train_step", 7)]})

    # Near misses only: a crash that is not an OOM.
    s["not_oom_device_assert"] = (
        "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n"
        "| 58%   70C    P2    67W / 200W |   8108MiB /  8111MiB |     25%      Default |\n"
        + "".join("\r" + bar("steps", n, 100, "2.00it/s") for n in range(0, 11))
        + "\nTraceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    loss.backward()\n"
        "RuntimeError: CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
        {"trainer": "unknown", "outcome": "crashed_other", "events": []})
    return s


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (text, expect) in sorted(scenarios().items()):
        with open(os.path.join(OUT, name + ".log"), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        with open(os.path.join(OUT, name + ".expect.json"), "w", encoding="utf-8") as f:
            json.dump(expect, f, indent=2, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
