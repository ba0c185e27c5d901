#!/usr/bin/env python3
# tests/real_trainers/plain_loop.py: a plain PyTorch training loop with a tqdm bar, as anyone
# writes one, that runs out of host memory at step 20 of 40 in the way `mode` names:
#   backward  the backward pass of a batch 500x the usual fails in c10's CPU allocator (the
#             address space is capped just above what the forward pass needs);
#   preview   a preview (a no-grad forward pass of a large batch) fails in the same allocator;
#   kill      the step hoards host memory until the kernel kills the process (run it in a memory
#             cgroup: tests/parsers/real_torch_test.cc does).
# Its bar is described by the job's name and carries the loss, as a home-made loop's does: no rule
# of any trainer names it. Needs python3-torch and python3-tqdm (scripts/setup.sh).
import resource
import sys

import torch
from tqdm import tqdm


def address_space_now():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def cap_address_space(headroom):
    limit = address_space_now() + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def preview(model, batch):
    with torch.no_grad():
        return model(torch.randn(batch, 256))


def main():
    mode = sys.argv[1]
    job = sys.argv[2] if len(sys.argv) > 2 else "my_job"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    big = 1 << 15
    bar = tqdm(range(40), desc=job)
    for step in bar:
        batch = 64
        if step == 20 and mode in ("backward", "preview"):
            # Room for the big batch's forward pass (about 290 MiB) but not its backward pass.
            cap_address_space(400 << 20)
            if mode == "backward":
                batch = big
        x = torch.randn(batch, 256)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.4f}")
        if step == 20 and mode == "preview":
            preview(model, big * 4)
        if step == 20 and mode == "kill":
            hoard = [torch.ones(1 << 26) for _ in range(64)]
            del hoard


if __name__ == "__main__":
    main()
