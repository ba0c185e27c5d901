#!/usr/bin/python3
"""Writes tests/testdata/trainer-logs/NAME.log and NAME.expect.json: training logs rendered by the
real tqdm library (and the real rich, colorama, logging, warnings, multiprocessing and CPython
traceback printers), one log per scenario.

How: the generator lays out, in a temporary directory, small simulated trainers at the paths of the
real projects (sd-scripts/train_network.py + library/train_util.py, musubi-tuner/src/musubi_tuner/...,
diffusers/examples/dreambooth/..., SimpleTuner/simpletuner/..., OneTrainer/modules/trainer/...,
diffusion-pipe/train.py, a transformers Trainer script, a Lightning script, ComfyUI/execution.py with
ComfyUI-FluxTrainer nodes) and fake site-packages (torch, accelerate, transformers, diffusers,
deepspeed, lightning, mgds, optimum.quanto, safetensors) whose frames, banners, bar descriptions,
postfixes and logging formats follow the real ones (docs/formats.md section 3). Each scenario runs its
trainer as a subprocess with stdout and stderr going to one file (`python train.py > log 2>&1`), so
the ordering of bars, prints, warnings, logging and tracebacks is what the real programs produce:
tqdm's '\\r' frames, nested bars with '\\x1b[A', bars closed by the interpreter AFTER the traceback,
block-buffered stdout, colorama's codes, torch.distributed's '[rank0]:' excepthook, launchers that
print their own error after the child's traceback.

The OOM is raised by a fake torch op from C (ctypes PyErr_SetObject behind str.format), so the
traceback ends at the real-looking call site (`return F.linear(input, self.weight, self.bias)`),
exactly as with real torch; the exception class prints as `torch.OutOfMemoryError`.

A virtual clock (sitecustomize.py in the fake site-packages) replaces time.time, so tqdm's elapsed
times and rates, and every logging timestamp, are deterministic: the output is byte-identical from
run to run. Temp paths are rewritten to /home/user, /workspace or /opt.

The expectation (NAME.expect.json) is written from the scenario (where the crash was put), never from
oomtriage's output: {"family", "outcome", "events": [{"kind", "phase", "step", "recovered"}]}.

Run (Debian: apt-get install -y python3-tqdm python3-rich python3-colorama):
    /usr/bin/python3 tests/testdata/make_trainer_logs.py            # all scenarios
    /usr/bin/python3 tests/testdata/make_trainer_logs.py NAME...    # only these
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "trainer-logs")
MAX_LOG_BYTES = 40 * 1024

for _mod in ("tqdm", "rich", "colorama"):
    try:
        __import__(_mod)
    except ImportError:
        sys.exit(f"make_trainer_logs.py needs python3-{_mod}: apt-get install -y python3-{_mod}")


def place(src):
    """Lay out a source file so that the line after each `#@N` marker is line N (real-looking line
    numbers in tracebacks and in logging's %(lineno)d)."""
    out = []
    for line in src.lstrip("\n").split("\n"):
        m = re.match(r"^\s*#@(\d+)\s*$", line)
        if m:
            want = int(m.group(1))
            have = len(out) + 1
            if want < have:
                raise ValueError(f"#@{want} but already at line {have}: {src[:80]!r}")
            out.extend([""] * (want - have))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------
# OOM messages, PyTorch eras (docs/formats.md section 1)
# --------------------------------------------------------------------------------------------------
HINT_22 = ("If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
           "to avoid fragmentation.  See documentation for Memory Management  "
           "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
HINT_29 = ("If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True "
           "to avoid fragmentation.  See documentation for Memory Management  "
           "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
HINT_211 = ("If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "to avoid fragmentation.  See documentation for Memory Management  "
            "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)")


def oom(req, total, free, used=None, alloc="0 bytes", unalloc="0 bytes", gpu=0, others=(), hint=HINT_22,
        capacty=False):
    """≈2.2+ allocator message (2.1 with capacty=True). others: ((pid, size), ...) listed first."""
    proc = "".join(f"Process {pid} has {size} memory in use. " for pid, size in others)
    if used is not None:
        proc += f"Including non-PyTorch memory, this process has {used} memory in use. "
    if capacty:
        return (f"CUDA out of memory. Tried to allocate {req}. GPU {gpu} has a total capacty of {total} of which "
                f"{free} is free. {proc}Of the allocated memory {alloc} is allocated by PyTorch, and {unalloc} is "
                "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
                "PYTORCH_CUDA_ALLOC_CONF")
    return (f"CUDA out of memory. Tried to allocate {req}. GPU {gpu} has a total capacity of {total} of which {free} "
            f"is free. {proc}Of the allocated memory {alloc} is allocated by PyTorch, and {unalloc} is reserved by "
            f"PyTorch but unallocated. {hint}")


def oom_old(req, total, already, free, reserved, gpu=0, hint=True):
    """1.10 - 2.0 message, raised as RuntimeError (<=1.12) or torch.cuda.OutOfMemoryError (1.13-2.0)."""
    msg = (f"CUDA out of memory. Tried to allocate {req} (GPU {gpu}; {total} total capacity; {already} already "
           f"allocated; {free} free; {reserved} reserved in total by PyTorch)")
    if hint:
        msg += (" If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  "
                "See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")
    return msg


CUDA_ERROR_OOM = ("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in "
                  "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
                  "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                  "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                  "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
DEVICE_ASSERT = ("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at "
                 "some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
                 "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
ILLEGAL_ACCESS = ("CUDA error: an illegal memory access was encountered\nSearch for `cudaErrorIllegalAddress' in "
                  "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
                  "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                  "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                  "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
TRITON_OOR = ("out of resource: triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_2 Required: 147456 Hardware "
              "limit:101376 Reducing block sizes or `num_stages` may help.")


# --------------------------------------------------------------------------------------------------
# Fake site-packages. Only the frames that can end up in a traceback need real-looking source lines;
# everything else is the least code that lets the simulated trainers run.
# --------------------------------------------------------------------------------------------------
LIB = {}

LIB["sitecustomize.py"] = r'''
# Virtual clock for the simulated trainers: time.time() only moves when the harness ticks it, so
# tqdm's elapsed/rate fields and logging timestamps are the same on every run.
import os
import time as _time

_epoch = float(os.environ.get("SIM_EPOCH", "0") or 0)


class _Clock:
    now = _epoch


_clock_file = os.environ.get("SIM_CLOCK_FILE")
if _epoch and _clock_file and os.path.exists(_clock_file):
    with open(_clock_file) as _f:
        _Clock.now = max(_epoch, float(_f.read() or 0))


def _publish_at_exit():
    if _clock_file and os.getpid() == _start_pid:
        with open(_clock_file, "w") as f:
            f.write(repr(_Clock.now))


_start_pid = os.getpid()
if _epoch:
    import atexit
    atexit.register(_publish_at_exit)
    _time.time = lambda: _Clock.now
    _time.time_ns = lambda: int(_Clock.now * 1e9)
    try:
        import tqdm as _tqdm
        _tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass
'''

LIB["_simharness.py"] = r'''
# Scenario plan for the simulated trainers (never shown in a traceback: nothing here raises).
import collections
import ctypes
import functools
import importlib
import json
import os

import sitecustomize

PLAN = json.loads(os.environ.get("SIM_PLAN", "{}"))


def knob(name, default=None):
    return PLAN.get(name, default)


def tick(seconds):
    sitecustomize._Clock.now += seconds


def now():
    return sitecustomize._Clock.now


def publish_clock():
    """Before starting a child process: the child's virtual clock starts where ours is."""
    path = os.environ.get("SIM_CLOCK_FILE")
    if path:
        with open(path, "w") as f:
            f.write(repr(sitecustomize._Clock.now))


def sync_clock():
    """After a child process ended: our clock moves on to where the child's stopped."""
    path = os.environ.get("SIM_CLOCK_FILE")
    if path and os.path.exists(path):
        with open(path) as f:
            sitecustomize._Clock.now = max(sitecustomize._Clock.now, float(f.read() or 0))


_set_error = ctypes.pythonapi.PyErr_SetObject
_set_error.argtypes = [ctypes.py_object, ctypes.py_object]
_set_error.restype = None


def _raiser(cls, msg):
    # A C-level callable taking any arguments that raises cls(msg): no Python frame of its own, so
    # the traceback ends at the call site, as it does for a real torch op.
    return functools.partial("{_K[x]}".format, _K=collections.defaultdict(functools.partial(_set_error, cls, msg)))


def _resolve(dotted):
    if "." not in dotted:
        return getattr(__import__("builtins"), dotted)
    mod, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(mod), name)


# op name -> (object holding the op, attribute, is a method of a class)
_OPS = {
    "linear": ("torch.nn.functional", "linear", False),
    "conv2d": ("torch.nn.functional", "conv2d", False),
    "conv3d": ("torch.nn.functional", "conv3d", False),
    "sdpa": ("torch.nn.functional", "scaled_dot_product_attention", False),
    "interpolate": ("torch.nn.functional", "interpolate", False),
    "group_norm": ("torch.nn.functional", "group_norm", False),
    "cross_entropy": ("torch._C:_nn", "cross_entropy_loss", False),
    "run_backward": ("torch.autograd.graph:engine", "run_backward", False),
    "zeros_like": ("torch", "zeros_like", False),
    "empty": ("torch", "empty", False),
    "cat": ("torch", "cat", False),
    "baddbmm": ("torch", "baddbmm", False),
    "foreach_lerp": ("torch", "_foreach_lerp_", False),
    "tensor_to": ("torch._tensor:Tensor", "to", True),
    "tensor_item": ("torch._tensor:Tensor", "item", True),
    "tensor_contiguous": ("torch._tensor:Tensor", "contiguous", True),
    "tensor_float": ("torch._tensor:Tensor", "float", True),
    "get_tensor": ("safetensors:safe_open", "get_tensor", True),
    "quanto_quantize": ("torch._ops:quanto_quantize_symmetric", "_op", False),
    "triton_run": ("torch._inductor.runtime.triton_heuristics:CachingAutotuner", "run", True),
}
_saved = []
_seen = {}


def _target(spec):
    mod, _, attr = spec.partition(":")
    obj = importlib.import_module(mod)
    if attr == "engine":
        return obj.Variable._execution_engine
    if attr:
        obj = getattr(obj, attr)
    return obj


def disarm():
    while _saved:
        obj, attr, old, had = _saved.pop()
        if had:
            setattr(obj, attr, old)
        else:
            delattr(obj, attr)


def at(where, index=None, **ctx):
    """Called by the simulated trainers at each point a fault may be planned: disarms the previous
    fault, then arms the one planned here (if any). Returns the fault or None."""
    disarm()
    ctx["index"] = index
    for i, fault in enumerate(PLAN.get("faults", [])):
        if fault["where"] != where:
            continue
        if any(k in fault and fault[k] != v for k, v in ctx.items()):
            continue
        seen = _seen.get(i, 0)
        _seen[i] = seen + 1
        if "nth" in fault and fault["nth"] != seen:
            continue
        spec, attr, method = _OPS[fault["op"]]
        obj = _target(spec)
        had = attr in vars(obj)
        _saved.append((obj, attr, vars(obj).get(attr), had))
        if fault.get("stderr"):
            import sys
            sys.stderr.write(fault["stderr"])
            sys.stderr.flush()
        raiser = _raiser(_resolve(fault.get("cls", "torch.OutOfMemoryError")), fault["msg"])
        setattr(obj, attr, staticmethod(raiser) if method else raiser)
        return fault
    return None
'''

LIB["torch/__init__.py"] = r'''
import contextlib as _contextlib
import os as _os

import _simharness

__version__ = _simharness.knob("torch_version", "2.5.1+cu124")


class OutOfMemoryError(RuntimeError):
    pass


OutOfMemoryError.__module__ = "torch"


class AcceleratorError(RuntimeError):
    pass


AcceleratorError.__module__ = "torch"


class dtype:
    def __init__(self, name, is_floating_point=True):
        self.name = name
        self.is_floating_point = is_floating_point

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32")
float16 = dtype("float16")
bfloat16 = dtype("bfloat16")
float8_e4m3fn = dtype("float8_e4m3fn")
int64 = dtype("int64", False)
float = float32  # noqa: A001
half = float16
long = int64
preserve_format = object()


class device:
    def __init__(self, type="cuda", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if ":" in str(type):
            type, index = type.split(":")
            index = int(index)
        self.type, self.index = type, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}', index={self.index})" if self.index is not None else f"device(type='{self.type}')"


class Size(tuple):
    def __repr__(self):
        return f"torch.Size({list(self)})"


from torch._tensor import Tensor  # noqa: E402
from torch import _C, cuda, nn, optim, autograd, distributed, utils, amp, backends, ops  # noqa: E402,F401
from torch.nn.parameter import Parameter  # noqa: E402,F401


def _t(*shape, **kw):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return Tensor(shape, dtype=kw.get("dtype"))


zeros = ones = empty = randn = rand = _t


def zeros_like(t, **kw):
    return Tensor(t.shape, dtype=t.dtype)


randn_like = ones_like = empty_like = zeros_like


def tensor(data, **kw):
    import builtins
    return Tensor((), value=data if isinstance(data, (builtins.int, builtins.float)) else 0.0)


def cat(tensors, dim=0):
    return tensors[0]


stack = cat


def baddbmm(input, batch1, batch2, **kw):
    return input


def _foreach_lerp_(*args, **kw):
    return None


def is_tensor(x):
    return isinstance(x, Tensor)


def manual_seed(seed):
    return None


def compile(model=None, **kw):
    return model


def load(f, map_location=None, weights_only=False):
    return {}


def save(obj, f):
    return None


from torch.autograd.grad_mode import no_grad, inference_mode, enable_grad  # noqa: E402


class autocast(no_grad):
    def __init__(self, *a, **k):
        pass


def set_grad_enabled(mode):
    return no_grad()


def get_default_dtype():
    return float32


def is_grad_enabled():
    return True
'''

LIB["torch/_C/__init__.py"] = r'''
def _get_tracing_state():
    return None


class _nn:
    @staticmethod
    def cross_entropy_loss(input, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
        from torch._tensor import Tensor
        return Tensor((), value=2.31)
'''

LIB["torch/_tensor.py"] = r'''
import torch


class Tensor:
    def __init__(self, shape=(), dtype=None, device=None, value=0.1):
        self.shape = torch.Size(shape)
        self.dtype = dtype or torch.bfloat16
        self.device = device
        self._value = value
        self.grad = None
        self.requires_grad = False

    def to(self, *args, **kwargs):
        return self

    def cuda(self, *a, **k):
        return self

    def cpu(self):
        return self

    def float(self):
        return self

    def half(self):
        return self

    def contiguous(self, *a, **k):
        return self

    def detach(self):
        return self

    def clone(self, *a, **k):
        return self

    def view(self, *a):
        return self

    reshape = permute = transpose = flatten = unflatten = unsqueeze = squeeze = view

    def mean(self, *a, **k):
        return self

    sum = mul = mul_ = add = add_ = sample = mode = square = sqrt = mean

    def item(self):
        return self._value

    def requires_grad_(self, requires_grad=True):
        return self

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_floating_point(self):
        return True

    def is_complex(self):
        return False

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def __getitem__(self, idx):
        return self

    def __len__(self):
        return self.shape[0] if self.shape else 1

    def __iter__(self):
        return iter([Tensor(self.shape[1:], self.dtype) for _ in range(len(self))])

    def _op(self, *other):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __pow__ = __neg__ = _op
    __matmul__ = _op

    def __float__(self):
        return float(self._value)

    #@570
    def backward(
        self, gradient=None, retain_graph=None, create_graph=False, inputs=None
    ):
        r"""Computes the gradient of current tensor wrt graph leaves."""
        if gradient is not None and not isinstance(gradient, Tensor):
            raise TypeError("gradient must be a Tensor")
        #@581
        torch.autograd.backward(
            self, gradient, retain_graph, create_graph, inputs=inputs
        )
'''

LIB["torch/autograd/__init__.py"] = r'''
import torch
from torch.autograd import graph
from torch.autograd.graph import _engine_run_backward
from torch.autograd import function  # noqa: F401


def _make_grads(outputs, grads, is_grads_batched):
    return grads


#@260
def backward(
    tensors,
    grad_tensors=None,
    retain_graph=None,
    create_graph=False,
    grad_variables=None,
    inputs=None,
):
    r"""Compute the sum of gradients of given tensors with respect to graph leaves."""
    if isinstance(tensors, torch.Tensor):
        tensors = (tensors,)
    grad_tensors_ = _make_grads(tensors, grad_tensors, is_grads_batched=False)
    if retain_graph is None:
        retain_graph = create_graph
    inputs = tuple(inputs) if inputs is not None else tuple()

    # The reason we repeat the same comment below is that
    # some Python versions print out the first line of a multi-line function
    # calls in the traceback and some print out the last line
    #@347
    _engine_run_backward(
        tensors,
        grad_tensors_,
        retain_graph,
        create_graph,
        inputs,
        allow_unreachable=True,
        accumulate_grad=True,
    )
'''

LIB["torch/autograd/graph.py"] = r'''
class _ImperativeEngine:
    def run_backward(self, *args, **kwargs):
        return None


class Variable:
    _execution_engine = _ImperativeEngine()


#@810
def _engine_run_backward(
    t_outputs,
    *args,
    **kwargs,
):
    attach_logging_hooks = False
    if attach_logging_hooks:
        unregister_hooks = None
    try:
        #@825
        return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
            t_outputs, *args, **kwargs
        )  # Calls into the C++ engine to run the backward pass
    finally:
        if attach_logging_hooks:
            unregister_hooks()  # type: ignore[possibly-undefined]
'''

LIB["torch/autograd/function.py"] = r'''
class Function:
    @classmethod
    def apply(cls, *args, **kwargs):
        return cls.forward(None, *args, **kwargs)
'''

LIB["torch/cuda/__init__.py"] = r'''
import torch
from torch import OutOfMemoryError  # noqa: F401  (alias since 2.4, as in real torch)


class _LegacyOutOfMemoryError(RuntimeError):
    pass


# torch 1.13 - 2.3 printed the class as torch.cuda.OutOfMemoryError
_LegacyOutOfMemoryError.__qualname__ = "OutOfMemoryError"
_LegacyOutOfMemoryError.__name__ = "OutOfMemoryError"
_LegacyOutOfMemoryError.__module__ = "torch.cuda"


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return 0


def get_device_name(i=0):
    return "NVIDIA GeForce RTX 4090"


def empty_cache():
    return None


def synchronize(device=None):
    return None


def ipc_collect():
    return None


def memory_allocated(device=None):
    return 21 * 1024 ** 3


def max_memory_allocated(device=None):
    return 22 * 1024 ** 3


def reset_peak_memory_stats(device=None):
    return None


def set_device(i):
    return None


def mem_get_info(device=None):
    return (1024 ** 3, 24 * 1024 ** 3)

'''

LIB["torch/amp/__init__.py"] = r'''
from torch.amp.grad_scaler import GradScaler  # noqa: F401


class autocast:
    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        self.device_type, self.dtype = device_type, dtype

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
'''

LIB["torch/amp/grad_scaler.py"] = r'''
import torch


class GradScaler:
    def __init__(self, *a, **k):
        pass

    def scale(self, loss):
        return loss

    #@240
    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        per_device_inv_scale = inv_scale
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if (not allow_fp16) and param.grad.dtype == torch.float16:
                    #@260
                    raise ValueError("Attempting to unscale FP16 gradients.")
        return per_device_inv_scale

    #@283
    def unscale_(self, optimizer):
        inv_scale = 1.0
        found_inf = 0.0
        #@338
        optimizer_state = self._unscale_grads_(
            optimizer, inv_scale, found_inf, False
        )

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        return None
'''

LIB["torch/backends/__init__.py"] = r'''
class cuda:
    class matmul:
        allow_tf32 = False


class cudnn:
    allow_tf32 = False
    benchmark = False
'''

LIB["torch/ops/__init__.py"] = r'''
'''

LIB["torch/_ops.py"] = r'''
class OpOverloadPacket:
    def __init__(self, qualified_op_name):
        self._qualified_op_name = qualified_op_name

    def _op(self, *args, **kwargs):
        from torch._tensor import Tensor
        return Tensor()

    #@1110
    def __call__(self, /, *args, **kwargs):
        # overloading __call__ to ensure torch.ops.foo.bar()
        # is still callable from JIT
        # We save the function ptr as the `op` attribute on
        # OpOverloadPacket to access it here.
        #@1116
        return self._op(*args, **(kwargs or {}))


quanto_quantize_symmetric = OpOverloadPacket("quanto::quantize_symmetric")
'''

LIB["torch/nn/__init__.py"] = r'''
from torch.nn.modules.module import Module  # noqa: F401
from torch.nn.modules.linear import Linear, Identity  # noqa: F401
from torch.nn.modules.conv import Conv2d, Conv3d  # noqa: F401
from torch.nn.modules.container import ModuleList, Sequential  # noqa: F401
from torch.nn.modules.normalization import LayerNorm, GroupNorm  # noqa: F401
from torch.nn.parameter import Parameter  # noqa: F401
from torch.nn import functional, utils  # noqa: F401
'''

LIB["torch/nn/utils/__init__.py"] = r'''
def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    import torch
    return torch.Tensor((), value=0.83)
'''

LIB["torch/nn/parameter.py"] = r'''
from torch._tensor import Tensor


class Parameter(Tensor):
    def __init__(self, data=None, requires_grad=True):
        shape = data.shape if data is not None else ()
        super().__init__(shape)
        self.requires_grad = requires_grad
'''

LIB["torch/nn/functional.py"] = r'''
from torch._C import _nn


def linear(input, weight, bias=None):
    return input


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return input


conv3d = conv2d


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return query


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    return input


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    return input


def silu(input, inplace=False):
    return input


gelu = relu = softmax = silu


_loss_calls = [0]


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    # a loss that looks like one: deterministic, noisy, slowly decreasing
    import math
    n = _loss_calls[0] = _loss_calls[0] + 1
    value = 0.06 + 0.09 * abs(math.sin(n * 12.9898) * 43758.5453 % 1.0) * (1.0 - min(n, 800) / 1600.0)
    from torch._tensor import Tensor
    return Tensor((), value=value)


#@3086
def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    r"""Compute the cross entropy loss between input logits and target."""
    reduction_enum = 1
    #@3104
    return torch._C._nn.cross_entropy_loss(
        input,
        target,
        weight,
        reduction_enum,
        ignore_index,
        label_smoothing,
    )


import torch  # noqa: E402
'''

LIB["torch/nn/modules/__init__.py"] = r'''
from torch.nn.modules.module import Module  # noqa: F401
'''

LIB["torch/nn/modules/module.py"] = r'''
import itertools
from collections import OrderedDict

import torch
from torch.nn.parameter import Parameter

_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()


class Module:
    training = True
    _compiled_call_impl = None

    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_parameters", OrderedDict())
        self._backward_hooks = OrderedDict()
        self._backward_pre_hooks = OrderedDict()
        self._forward_hooks = OrderedDict()
        self._forward_pre_hooks = OrderedDict()

    def __setattr__(self, name, value):
        if isinstance(value, Module) and "_modules" in self.__dict__:
            self._modules[name] = value
        elif isinstance(value, Parameter) and "_parameters" in self.__dict__:
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def add_module(self, name, module):
        self._modules[name] = module

    def children(self):
        return iter(self._modules.values())

    def modules(self):
        yield self
        for m in self._modules.values():
            yield from m.modules()

    def named_parameters(self, prefix="", recurse=True):
        for n, p in self._parameters.items():
            yield (prefix + n, p)
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self, recurse=True):
        for _, p in self.named_parameters():
            yield p

    def state_dict(self, *a, **k):
        return OrderedDict(self.named_parameters())

    def load_state_dict(self, state_dict, strict=True, assign=False):
        return None

    def requires_grad_(self, requires_grad=True):
        return self

    def train(self, mode=True):
        self.training = mode
        return self

    def eval(self):
        return self.train(False)

    def cuda(self, device=None):
        return self.to("cuda")

    def half(self):
        return self

    def float(self):
        return self

    def forward(self, *input):
        raise NotImplementedError

    #@891
    def _apply(self, fn, recurse=True):
        if recurse:
            for module in self.children():
                #@900
                module._apply(fn)

        def compute_should_use_set_data(tensor, tensor_applied):
            return False

        should_use_swap_tensors = False

        for key, param in self._parameters.items():
            if param is None:
                continue
            # Tensors stored in modules are graph leaves, and we don't want to
            # track autograd history of `param_applied`, so we have to use
            # `with torch.no_grad():`
            with torch.no_grad():
                #@927
                param_applied = fn(param)
            p_should_use_set_data = compute_should_use_set_data(param, param_applied)

        return self

    #@1174
    def to(self, *args, **kwargs):
        r"""Move and/or cast the parameters and buffers."""
        device = args[0] if args else kwargs.get("device")
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        non_blocking = kwargs.get("non_blocking", False)
        convert_to_format = None

        #@1316
        def convert(t):
            try:
                if convert_to_format is not None and t.dim() in (4, 5):
                    return t.to(
                        device,
                        dtype if t.is_floating_point() or t.is_complex() else None,
                        non_blocking,
                        memory_format=convert_to_format,
                    )
                #@1326
                return t.to(
                    device,
                    dtype if t.is_floating_point() or t.is_complex() else None,
                    non_blocking,
                )
            except NotImplementedError as e:
                raise

        #@1340
        return self._apply(convert)

    #@1732
    def _wrapped_call_impl(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)  # type: ignore[misc]
        else:
            #@1736
            return self._call_impl(*args, **kwargs)

    # torchrec tests the code consistency with the following code
    # fmt: off
    def _call_impl(self, *args, **kwargs):
        forward_call = (self._slow_forward if torch._C._get_tracing_state() else self.forward)
        # If we don't have any hooks, we want to skip the rest of the logic in
        # this function, and just call forward.
        if not (self._backward_hooks or self._backward_pre_hooks or self._forward_hooks or self._forward_pre_hooks
                or _global_backward_pre_hooks or _global_backward_hooks
                or _global_forward_hooks or _global_forward_pre_hooks):
            #@1747
            return forward_call(*args, **kwargs)

    __call__ = _wrapped_call_impl
'''

LIB["torch/nn/modules/container.py"] = r'''
from torch.nn.modules.module import Module


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        self._list = []
        for i, m in enumerate(modules or []):
            self.add_module(str(i), m)
            self._list.append(m)

    def __iter__(self):
        return iter(self._list)

    def __len__(self):
        return len(self._list)

    def __getitem__(self, i):
        return self._list[i]


class Sequential(ModuleList):
    def __init__(self, *modules):
        super().__init__(list(modules))

    #@244
    def forward(self, input):
        for module in self:
            #@250
            input = module(input)
        return input
'''

LIB["torch/nn/modules/linear.py"] = r'''
import torch
from torch.nn import functional as F
from torch.nn.modules.module import Module
from torch.nn.parameter import Parameter


class Identity(Module):
    def forward(self, input):
        return input


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.empty((out_features, in_features)))
        self.bias = Parameter(torch.empty(out_features)) if bias else None

    #@124
    def forward(self, input):
        return F.linear(input, self.weight, self.bias)
'''

LIB["torch/nn/modules/conv.py"] = r'''
import torch
from torch.nn import functional as F
from torch.nn.modules.module import Module
from torch.nn.parameter import Parameter


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
        super().__init__()
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.padding_mode = "zeros"
        self.weight = Parameter(torch.empty((out_channels, in_channels, kernel_size, kernel_size)))
        self.bias = Parameter(torch.empty(out_channels)) if bias else None

    #@538
    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            return F.conv2d(
                F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode),
                weight,
                bias,
                self.stride,
                (0, 0),
                self.dilation,
                self.groups,
            )
        #@549
        return F.conv2d(
            input, weight, bias, self.stride, self.padding, self.dilation, self.groups
        )

    #@553
    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv3d(Conv2d):
    #@706
    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            return F.conv3d(
                F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode),
                weight,
                bias,
                self.stride,
                (0, 0, 0),
                self.dilation,
                self.groups,
            )
        #@720
        return F.conv3d(
            input, weight, bias, self.stride, self.padding, self.dilation, self.groups
        )

    #@724
    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)
'''

LIB["torch/nn/modules/normalization.py"] = r'''
import torch
from torch.nn import functional as F
from torch.nn.modules.module import Module
from torch.nn.parameter import Parameter


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()

    def forward(self, input):
        return input


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        self.num_groups, self.eps = num_groups, eps
        self.weight = Parameter(torch.empty(num_channels))
        self.bias = Parameter(torch.empty(num_channels))

    #@312
    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)
'''

LIB["torch/optim/__init__.py"] = r'''
from torch.optim.optimizer import Optimizer  # noqa: F401
from torch.optim.adamw import AdamW  # noqa: F401
from torch.optim import lr_scheduler  # noqa: F401
'''

LIB["torch/optim/optimizer.py"] = r'''
import functools

import torch


#@80
def _use_grad_for_differentiable(func):
    def _use_grad(self, *args, **kwargs):
        import torch._dynamo
        prev_grad = torch.is_grad_enabled()
        try:
            # Note on graph break below:
            # we need to graph break to ensure that aot respects the no_grad annotation.
            #@91
            ret = func(self, *args, **kwargs)
        finally:
            pass
        return ret

    functools.update_wrapper(_use_grad, func)
    return _use_grad


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = {}
        params = list(params)
        if params and isinstance(params[0], dict):
            self.param_groups = params
        else:
            self.param_groups = [{"params": params, **defaults}]

    @staticmethod
    def profile_hook_step(func):
        @functools.wraps(func)
        #@465
        def wrapper(*args, **kwargs):
            self, *_ = args
            profile_name = f"Optimizer.step#{self.__class__.__name__}.step"
            for pre_hook in ():
                pass
            out = None
            if True:
                # in the case of a step hook
                #@487
                out = func(*args, **kwargs)
            return out

        return wrapper

    def zero_grad(self, set_to_none=True):
        return None

    def state_dict(self):
        return {"state": {}, "param_groups": []}

    def load_state_dict(self, sd):
        return None
'''

LIB["torch/optim/adamw.py"] = r'''
import torch
from torch.optim.optimizer import Optimizer, _use_grad_for_differentiable


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    #@115
    def _init_group(
        self,
        group,
        params_with_grad,
        grads,
        amsgrad,
        exp_avgs,
        exp_avg_sqs,
        max_exp_avg_sqs,
        state_steps,
    ):
        has_complex = False
        for p in group["params"]:
            if p.grad is None and not getattr(p, "requires_grad", False):
                continue
            params_with_grad.append(p)
            grads.append(p.grad)
            state = self.state.setdefault(id(p), {})

            # State initialization
            if len(state) == 0:
                # note(crcrpar): Deliberately host `step` on CPU if both capturable and fused are off.
                # This is because kernel launches are costly on CUDA and XLA.
                state["step"] = torch.tensor(0.0, dtype=torch.float32)
                # Exponential moving average of gradient values
                #@152
                state["exp_avg"] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )
                # Exponential moving average of squared gradient values
                state["exp_avg_sq"] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
        return has_complex

    @_use_grad_for_differentiable
    #@179
    def step(self, closure=None):
        """Perform a single optimization step."""
        self._cuda_graph_capture_health_check() if hasattr(self, "_cuda_graph_capture_health_check") else None

        loss = None
        if closure is not None:
            with torch.enable_grad():
                #@194
                loss = closure()

        for group in self.param_groups:
            params_with_grad = []
            grads = []
            exp_avgs = []
            exp_avg_sqs = []
            max_exp_avg_sqs = []
            state_steps = []
            amsgrad = False
            beta1, beta2 = group["betas"]

            #@209
            has_complex = self._init_group(
                group,
                params_with_grad,
                grads,
                amsgrad,
                exp_avgs,
                exp_avg_sqs,
                max_exp_avg_sqs,
                state_steps,
            )

        return loss


AdamW.step = Optimizer.profile_hook_step(AdamW.step)
'''

LIB["torch/optim/lr_scheduler.py"] = r'''
class LRScheduler:
    def __init__(self, optimizer, *a, **k):
        self.optimizer = optimizer
        self._step = 0

    def step(self, *a):
        self._step += 1

    def get_last_lr(self):
        return [1e-4]


LambdaLR = ConstantLR = LinearLR = CosineAnnealingLR = LRScheduler
'''

LIB["torch/_dynamo/__init__.py"] = r'''
from torch._dynamo import eval_frame  # noqa: F401
'''

LIB["torch/_dynamo/eval_frame.py"] = r'''
import functools


class OptimizeContext:
    def __init__(self, compiled):
        self.compiled = compiled

    def __call__(self, fn):
        compiled = self.compiled

        @functools.wraps(fn)
        #@556
        def _fn(*args, **kwargs):
            prior = None
            try:
                #@574
                return compiled(*args, **kwargs)
            finally:
                pass

        return _fn


class DisableContext:
    def __call__(self, fn):
        @functools.wraps(fn)
        #@615
        def _fn(*args, **kwargs):
            prior = None
            try:
                #@632
                return fn(*args, **kwargs)
            finally:
                pass

        return _fn
'''

LIB["torch/_compile.py"] = r'''
import functools


def _disable_dynamo(fn=None, recursive=True):
    @functools.wraps(fn)
    #@22
    def inner(*args, **kwargs):
        # cache this on the first invocation to avoid adding too much overhead.
        disable_fn = getattr(fn, "__dynamo_disable", None)
        if disable_fn is None:
            import torch._dynamo.eval_frame
            disable_fn = torch._dynamo.eval_frame.DisableContext()(fn)
            fn.__dynamo_disable = disable_fn
        #@32
        return disable_fn(*args, **kwargs)

    return inner
'''

LIB["torch/utils/__init__.py"] = r'''
from torch.utils import checkpoint, data  # noqa: F401
'''

LIB["torch/utils/checkpoint.py"] = r'''
import torch
from torch._compile import _disable_dynamo


#@58
def _checkpoint_without_reentrant_generator(fn, preserve_rng_state=True, context_fn=None, determinism_check=None,
                                             debug=None, *args, **kwargs):
    yield


#@389
@_disable_dynamo
def checkpoint(
    function,
    *args,
    use_reentrant=None,
    context_fn=None,
    determinism_check="default",
    debug=False,
    **kwargs
):
    r"""Checkpoint a model or part of the model."""
    if use_reentrant is None:
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    gen = _checkpoint_without_reentrant_generator(
        function, preserve, context_fn, determinism_check, debug, *args, **kwargs
    )
    # Runs pre-forward logic
    next(gen)
    #@496
    ret = function(*args, **kwargs)
    # Runs post-forward logic
    try:
        next(gen)
    except StopIteration:
        return ret
'''

LIB["torch/utils/data/__init__.py"] = r'''
class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0, collate_fn=None, **kw):
        self.dataset = dataset
        self.batch_size = batch_size

    def __iter__(self):
        return iter(self.dataset)

    def __len__(self):
        return len(self.dataset)


class Dataset:
    pass
'''

LIB["torch/distributed/__init__.py"] = r'''
from torch.distributed.distributed_c10d import (  # noqa: F401
    init_process_group, is_initialized, is_available, get_rank, get_world_size, barrier, destroy_process_group,
)
'''

LIB["torch/distributed/distributed_c10d.py"] = r'''
import io
import sys

_state = {"initialized": False, "rank": 0, "world": 1}


def is_available():
    return True


def is_initialized():
    return _state["initialized"]


def get_rank(group=None):
    return _state["rank"]


def get_world_size(group=None):
    return _state["world"]


def barrier(*a, **k):
    return None


def destroy_process_group(*a, **k):
    _state["initialized"] = False


def _add_excepthook(rank):
    # torch/distributed/distributed_c10d.py (PR #118190): every non-empty line of an uncaught
    # exception's traceback gets "[rank{N}]: ".
    excepthook_prefix = f"[rank{rank}]"
    _excepthook = sys.excepthook

    def _distributed_excepthook(*args):
        old_stderr = sys.stderr
        sys.stderr = buf = io.StringIO()
        try:
            _excepthook(*args)
        finally:
            sys.stderr.flush()
            sys.stderr = old_stderr
        msg = buf.getvalue()
        msg = "\n".join(
            f"{excepthook_prefix}: {s}" if s != "" else "" for s in msg.split("\n")
        )
        sys.stderr.write(msg)
        sys.stderr.flush()

    sys.excepthook = _distributed_excepthook


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, **kw):
    import os
    _state["initialized"] = True
    _state["rank"] = int(os.environ.get("RANK", 0))
    _state["world"] = int(os.environ.get("WORLD_SIZE", 1))
    _add_excepthook(_state["rank"])
'''

LIB["torch/_inductor/__init__.py"] = ""
LIB["torch/_inductor/runtime/__init__.py"] = ""
LIB["torch/_inductor/runtime/triton_heuristics.py"] = r'''
class CachingAutotuner:
    def __init__(self, fn_name):
        self.fn_name = fn_name

    def run(self, *args, grid=None, stream=None, **kwargs):
        return None
'''

LIB["safetensors/__init__.py"] = r'''
import torch as _torch


class safe_open:
    def __init__(self, filename, framework="pt", device="cpu"):
        self.filename, self.device = filename, device
        self._keys = [f"double_blocks.{i}.img_attn.qkv.weight" for i in range(19)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return list(self._keys)

    def metadata(self):
        return {}

    def get_tensor(self, name):
        return _torch.Tensor((3072, 3072))
'''

LIB["safetensors/torch.py"] = r'''
import torch

import _simharness
from safetensors import safe_open


#@290
def load_file(filename, device="cpu"):
    result = {}
    with safe_open(filename, framework="pt", device=device) as f:
        for k in f.keys():
            _simharness.at("load_tensor", k)
            #@313
            result[k] = f.get_tensor(k)
    return result


def save_file(tensors, filename, metadata=None):
    return None
'''

LIB["torch/utils/_contextlib.py"] = r'''
import functools


def context_decorator(ctx, func):
    @functools.wraps(func)
    #@113
    def decorate_context(*args, **kwargs):
        with ctx_factory():
            #@116
            return func(*args, **kwargs)

    ctx_factory = ctx
    return decorate_context


class _DecoratorContextManager:
    def __call__(self, orig_func):
        return context_decorator(self.clone, orig_func)

    def clone(self):
        return self.__class__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
'''

LIB["torch/autograd/grad_mode.py"] = r'''
from torch.utils._contextlib import _DecoratorContextManager


class no_grad(_DecoratorContextManager):
    pass


class enable_grad(_DecoratorContextManager):
    pass


class inference_mode(_DecoratorContextManager):
    def __init__(self, mode=True):
        self.mode = mode

    def clone(self):
        return self.__class__(self.mode)
'''

LIB["torch/utils/_pytree.py"] = r'''
import warnings


def _register_pytree_node(cls, flatten_fn, unflatten_fn, **kw):
    warnings.warn(
        "torch.utils._pytree._register_pytree_node is deprecated. "
        "Please use torch.utils._pytree.register_pytree_node instead.",
        category=FutureWarning,
        stacklevel=2,
    )


def register_pytree_node(cls, flatten_fn, unflatten_fn, **kw):
    return None
'''

# ---------------------------------------------------------------- accelerate
LIB["accelerate/__init__.py"] = r'''
__version__ = "1.2.1"
from accelerate.accelerator import Accelerator  # noqa: F401,E402
from accelerate.state import PartialState, DistributedType  # noqa: F401,E402
from accelerate.utils.memory import find_executable_batch_size  # noqa: F401,E402
'''

LIB["accelerate/state.py"] = r'''
import enum
import os


class DistributedType(str, enum.Enum):
    NO = "NO"
    MULTI_GPU = "MULTI_GPU"
    DEEPSPEED = "DEEPSPEED"
    MEGATRON_LM = "MEGATRON_LM"


class PartialState:
    def __init__(self, *a, **k):
        self.process_index = int(os.environ.get("RANK", 0))
        self.local_process_index = int(os.environ.get("LOCAL_RANK", 0))
        self.num_processes = int(os.environ.get("WORLD_SIZE", 1))
        self.distributed_type = DistributedType.MULTI_GPU if self.num_processes > 1 else DistributedType.NO
        self.is_main_process = self.process_index == 0
        self.is_local_main_process = self.local_process_index == 0

    def __repr__(self):
        rep = (f"Distributed environment: {self.distributed_type.value}{'  Backend: nccl' if self.num_processes > 1 else ''}\n"
               f"Num processes: {self.num_processes}\nProcess index: {self.process_index}\n"
               f"Local process index: {self.local_process_index}\nDevice: cuda:{self.local_process_index}\n")
        if getattr(self, "mixed_precision", None) is not None:
            rep += f"\nMixed precision type: {self.mixed_precision}\n"
        return rep


AcceleratorState = PartialState
'''

LIB["accelerate/logging.py"] = r'''
import logging
import os

import _simharness


class MultiProcessAdapter(logging.LoggerAdapter):
    @staticmethod
    def _should_log(main_process_only):
        return int(os.environ.get("RANK", 0)) == 0 or not main_process_only

    def log(self, level, msg, *args, **kwargs):
        main_process_only = kwargs.pop("main_process_only", True)
        in_order = kwargs.pop("in_order", False)
        kwargs.setdefault("stacklevel", 2)
        if self.isEnabledFor(level):
            if self._should_log(main_process_only):
                if _simharness.knob("accelerate_rank_prefix"):
                    # accelerate >= 1.13
                    msg = f"[RANK {int(os.environ.get('RANK', 0))}] {msg}"
                msg, kwargs = self.process(msg, kwargs)
                self.logger.log(level, msg, *args, **kwargs)


def get_logger(name, log_level=None):
    if log_level is None:
        log_level = os.environ.get("ACCELERATE_LOG_LEVEL", None)
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
        logger.root.setLevel(log_level.upper())
    return MultiProcessAdapter(logger, {})
'''

LIB["accelerate/optimizer.py"] = r'''
class AcceleratedOptimizer:
    def __init__(self, optimizer, device_placement=True, scaler=None):
        self.optimizer = optimizer
        self.scaler = scaler
        self.param_groups = optimizer.param_groups

    def zero_grad(self, set_to_none=None):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def train(self):
        return None

    def eval(self):
        return None

    #@153
    def step(self, closure=None):
        if self.scaler is not None:
            self.optimizer.step = self._optimizer_patched_step_method
            self.scaler.step(self.optimizer, closure)
            self.scaler.update()
        else:
            #@178
            self.optimizer.step(closure)
'''

LIB["accelerate/utils/__init__.py"] = r'''
import random

from accelerate.state import DistributedType  # noqa: F401
from accelerate.utils.memory import find_executable_batch_size, release_memory  # noqa: F401


def set_seed(seed, device_specific=False, deterministic=False):
    random.seed(seed)


class ProjectConfiguration:
    def __init__(self, project_dir=None, logging_dir=None, **kw):
        self.project_dir, self.logging_dir = project_dir, logging_dir


class DistributedDataParallelKwargs:
    def __init__(self, **kw):
        pass


InitProcessGroupKwargs = DistributedDataParallelKwargs
'''

LIB["accelerate/utils/memory.py"] = r'''
import functools
import gc
import inspect

import torch


def clear_device_cache(garbage_collection=False):
    if garbage_collection:
        gc.collect()
    torch.cuda.empty_cache()


def release_memory(*objects):
    clear_device_cache(garbage_collection=True)
    return [None] * len(objects)


def should_reduce_batch_size(exception: Exception) -> bool:
    _statements = [
        " out of memory.",  # OOM for CUDA, HIP, XPU
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.",  # CUDNN SNAFU
        "DefaultCPUAllocator: can't allocate memory",  # CPU OOM
        "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed",  # HPU OOM
    ]
    if isinstance(exception, RuntimeError) and len(exception.args) == 1:
        return any(err in exception.args[0] for err in _statements)
    return False


def find_executable_batch_size(function=None, starting_batch_size=128, reduce_batch_size_fn=None):
    if function is None:
        return functools.partial(find_executable_batch_size, starting_batch_size=starting_batch_size,
                                 reduce_batch_size_fn=reduce_batch_size_fn)

    batch_size = starting_batch_size
    if reduce_batch_size_fn is None:

        def reduce_batch_size_fn():
            nonlocal batch_size
            batch_size = batch_size // 2
            return batch_size

    #@140
    def decorator(*args, **kwargs):
        nonlocal batch_size
        clear_device_cache(garbage_collection=True)
        params = list(inspect.signature(function).parameters.keys())
        # Guard against user error
        if len(params) < (len(args) + 1):
            arg_str = ", ".join([f"{arg}={value}" for arg, value in zip(params[1:], args[1:])])
            raise TypeError(
                f"Batch size was passed into `{function.__name__}` as the first argument when called."
                f"Remove this as the decorator already does so: `{function.__name__}({arg_str})`"
            )
        while True:
            if batch_size == 0:
                #@158
                raise RuntimeError("No executable batch size found, reached zero.")
            try:
                #@160
                return function(batch_size, *args, **kwargs)
            except Exception as e:
                if should_reduce_batch_size(e):
                    clear_device_cache(garbage_collection=True)
                    batch_size = reduce_batch_size_fn()
                else:
                    raise

    return decorator
'''

LIB["accelerate/utils/modeling.py"] = r'''
import torch


#@215
def set_module_tensor_to_device(
    module,
    tensor_name,
    device,
    value=None,
    dtype=None,
    fp16_statistics=None,
    tied_params_map=None,
):
    """A helper function to set a given tensor (parameter of buffer) of a module on a specific device."""
    if value is None:
        value = torch.Tensor()
    old_value = value
    param_cls = type(value)
    with torch.no_grad():
        #@329
        new_value = value.to(device)
    return new_value
'''

LIB["accelerate/accelerator.py"] = r'''
import contextlib
import os

import torch
from accelerate.optimizer import AcceleratedOptimizer
from accelerate.state import DistributedType, PartialState


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1, mixed_precision=None, log_with=None, project_config=None,
                 kwargs_handlers=None, **kw):
        if "LOCAL_RANK" in os.environ and not torch.distributed.is_initialized():
            torch.distributed.init_process_group(backend="nccl")
        self.state = PartialState()
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.mixed_precision = mixed_precision or os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        self.state.mixed_precision = self.mixed_precision
        self.distributed_type = self.state.distributed_type
        self.device = torch.device("cuda", 0)
        self.sync_gradients = True
        self.native_amp = self.mixed_precision in ("fp16", "bf16")
        self.scaler = torch.amp.GradScaler() if self.mixed_precision == "fp16" else None
        self._optimizers = []
        self.has_lomo_optimizer = False
        self.trackers = []
        self._step = 0

    @property
    def is_main_process(self):
        return self.state.is_main_process

    @property
    def is_local_main_process(self):
        return self.state.is_local_main_process

    @property
    def num_processes(self):
        return self.state.num_processes

    @property
    def process_index(self):
        return self.state.process_index

    def prepare(self, *args, device_placement=None):
        out = tuple(AcceleratedOptimizer(a) if isinstance(a, torch.optim.Optimizer) else a for a in args)
        self._optimizers.extend(o for o in out if isinstance(o, AcceleratedOptimizer))
        return out if len(out) > 1 else out[0]

    def prepare_model(self, model, device_placement=None, evaluation_mode=False):
        return model

    def unwrap_model(self, model, keep_fp32_wrapper=True):
        return model

    def register_save_state_pre_hook(self, hook):
        return None

    register_load_state_pre_hook = register_save_state_pre_hook

    def init_trackers(self, project_name, config=None, init_kwargs=None):
        return None

    def log(self, values, step=None, log_kwargs=None):
        return None

    def wait_for_everyone(self):
        return None

    def end_training(self):
        return None

    def save_state(self, output_dir=None, **kw):
        return None

    def load_state(self, input_dir=None, **kw):
        return None

    def gather(self, t):
        return t

    gather_for_metrics = reduce = gather

    def print(self, *args, **kwargs):
        if self.is_local_main_process:
            print(*args, **kwargs)

    @contextlib.contextmanager
    def accumulate(self, *models):
        self._step += 1
        self.sync_gradients = self._step % self.gradient_accumulation_steps == 0
        yield

    @contextlib.contextmanager
    def autocast(self, autocast_handler=None):
        yield


    def get_state_dict(self, model, unwrap=True):
        return model.state_dict()

    #@2225
    def backward(self, loss, **kwargs):
        """Scales the gradients in accordance to the `GradientAccumulationPlugin` and calls the correct
        `backward()` based on the configuration passed to `Accelerator`."""
        learning_rate = kwargs.get("learning_rate")

        if self.distributed_type != DistributedType.DEEPSPEED:
            # deepspeed handles loss scaling by gradient_accumulation_steps in its `backward`
            loss = loss / self.gradient_accumulation_steps
        if self.distributed_type == DistributedType.DEEPSPEED:
            self.deepspeed_engine_wrapped.backward(loss, **kwargs)
        elif self.distributed_type == DistributedType.MEGATRON_LM:
            return
        elif self.scaler is not None:
            self.scaler.scale(loss).backward(**kwargs)
        elif learning_rate is not None and self.has_lomo_optimizer:
            self.lomo_backward(loss, learning_rate)
        else:
            #@2248
            loss.backward(**kwargs)

    #@2340
    def unscale_gradients(self, optimizer=None):
        if self.native_amp and self.mixed_precision == "fp16":
            if optimizer is None:
                # TODO: this unscales all optimizers where we should only unscale the one where parameters are.
                optimizer = self._optimizers
            elif not isinstance(optimizer, (tuple, list)):
                optimizer = [optimizer]
            for opt in optimizer:
                while isinstance(opt, AcceleratedOptimizer):
                    opt = opt.optimizer
                #@2351
                self.scaler.unscale_(opt)

    #@2353
    def clip_grad_norm_(self, parameters, max_norm, norm_type=2):
        """Should be used in place of `torch.nn.utils.clip_grad_norm_`."""
        if self.distributed_type == DistributedType.DEEPSPEED:
            return None
        #@2396
        self.unscale_gradients()
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)
'''

LIB["accelerate/commands/__init__.py"] = ""
LIB["accelerate/commands/accelerate_cli.py"] = r'''
import argparse
import sys

from accelerate.commands.launch import launch_command


#@26
def main():
    parser = argparse.ArgumentParser("Accelerate CLI tool", usage="accelerate <command> [<args>]", allow_abbrev=False)
    subparsers = parser.add_subparsers(help="accelerate command helpers")
    launch = subparsers.add_parser("launch")
    launch.add_argument("--num_cpu_threads_per_process", type=int, default=None)
    launch.add_argument("--mixed_precision", default=None)
    launch.add_argument("--num_processes", type=int, default=None)
    launch.add_argument("--multi_gpu", action="store_true")
    launch.add_argument("--main_process_port", default=None)
    launch.add_argument("training_script")
    launch.add_argument("training_script_args", nargs=argparse.REMAINDER)
    launch.set_defaults(func=launch_command)

    # Let's go
    args = parser.parse_args()

    if not hasattr(args, "func"):
        parser.print_help()
        exit(1)

    # Run
    #@50
    args.func(args)


if __name__ == "__main__":
    main()
'''

LIB["accelerate/commands/launch.py"] = r'''
import logging
import os
import subprocess
import sys

import _simharness

logger = logging.getLogger(__name__)


def _validate_launch_command(args):
    defaults = []
    if args.num_processes is None:
        defaults.append("\t`--num_processes` was set to a value of `1`")
    defaults.append("\t`--num_machines` was set to a value of `1`")
    if args.mixed_precision is None:
        defaults.append("\t`--mixed_precision` was set to a value of `'no'`")
    defaults.append("\t`--dynamo_backend` was set to a value of `'no'`")
    message = "The following values were not passed to `accelerate launch` and had defaults used instead:\n"
    message += "\n".join(defaults)
    message += "\nTo avoid this warning pass in values for each of the problematic parameters or run `accelerate config`."
    logger.warning(message)


#@763
def simple_launcher(args):
    cmd = [sys.executable, args.training_script] + list(args.training_script_args)
    current_env = dict(os.environ)
    current_env["ACCELERATE_MIXED_PRECISION"] = str(args.mixed_precision or "no")
    _simharness.publish_clock()
    process = subprocess.Popen(cmd, env=current_env)
    process.wait()
    _simharness.sync_clock()
    if process.returncode != 0:
        #@785
        raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)


#@790
def multi_gpu_launcher(args):
    import torch.distributed.run as distrib_run

    args.nproc_per_node = args.num_processes or 2
    os.environ["ACCELERATE_MIXED_PRECISION"] = str(args.mixed_precision or "no")
    #@808
    distrib_run.run(args)


#@1160
def launch_command(args):
    _validate_launch_command(args)
    if args.multi_gpu:
        #@1190
        multi_gpu_launcher(args)
    else:
        #@1199
        simple_launcher(args)
'''

# ---------------------------------------------------------------- transformers
LIB["transformers/__init__.py"] = r'''
__version__ = "4.46.3"
from transformers.trainer import Trainer  # noqa: F401,E402
from transformers.training_args import TrainingArguments  # noqa: F401,E402
from transformers.models.auto.auto_factory import AutoModelForCausalLM, AutoTokenizer  # noqa: F401,E402
from transformers.modeling_utils import PreTrainedModel  # noqa: F401,E402
from transformers.trainer_utils import set_seed  # noqa: F401,E402
'''

LIB["transformers/utils/__init__.py"] = r'''
from transformers.utils import logging  # noqa: F401
'''

LIB["transformers/utils/logging.py"] = r'''
import logging
import sys

_default_handler = None


def _get_library_root_logger():
    return logging.getLogger("transformers")


def _configure_library_root_logger():
    global _default_handler
    if _default_handler is not None:
        return
    _default_handler = logging.StreamHandler()  # Set sys.stderr as stream.
    _default_handler.flush = sys.stderr.flush
    library_root_logger = _get_library_root_logger()
    library_root_logger.addHandler(_default_handler)
    library_root_logger.setLevel(logging.WARNING)
    library_root_logger.propagate = False


def get_logger(name=None):
    _configure_library_root_logger()
    return logging.getLogger(name)


def set_verbosity(verbosity):
    _configure_library_root_logger()
    _get_library_root_logger().setLevel(verbosity)


def set_verbosity_info():
    return set_verbosity(logging.INFO)


def set_verbosity_warning():
    return set_verbosity(logging.WARNING)


def enable_default_handler():
    _configure_library_root_logger()


def enable_explicit_format():
    handlers = _get_library_root_logger().handlers
    for handler in handlers:
        formatter = logging.Formatter("[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s")
        handler.setFormatter(formatter)
'''

LIB["transformers/trainer_utils.py"] = r'''
def set_seed(seed, deterministic=False):
    return None


def speed_metrics(split, start_time, num_samples=None, num_steps=None):
    return {f"{split}_runtime": 0.0}
'''

LIB["transformers/training_args.py"] = r'''
class TrainingArguments:
    def __init__(self, output_dir, per_device_train_batch_size=8, per_device_eval_batch_size=8,
                 gradient_accumulation_steps=1, num_train_epochs=3.0, max_steps=-1, logging_steps=500,
                 eval_steps=None, save_steps=500, auto_find_batch_size=False, learning_rate=5e-5, bf16=False,
                 eval_strategy="no", save_strategy="steps", disable_tqdm=False, n_gpu=1, **kw):
        self.__dict__.update({k: v for k, v in locals().items() if k not in ("self", "kw")})
        self.__dict__.update(kw)
'''

LIB["transformers/trainer_callback.py"] = r'''
from tqdm.auto import tqdm


class TrainerState:
    def __init__(self):
        self.global_step = 0
        self.max_steps = 0
        self.epoch = 0.0
        self.is_world_process_zero = True
        self.train_batch_size = None
        self.log_history = []


class ProgressCallback:
    """A [`TrainerCallback`] that displays the progress of training or evaluation."""

    def __init__(self, max_str_len: int = 100):
        self.training_bar = None
        self.prediction_bar = None
        self.max_str_len = max_str_len

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.training_bar = tqdm(total=state.max_steps, dynamic_ncols=True)
        self.current_step = 0

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.training_bar.update(state.global_step - self.current_step)
            self.current_step = state.global_step

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if state.is_world_process_zero and eval_dataloader is not None:
            if self.prediction_bar is None:
                self.prediction_bar = tqdm(
                    total=len(eval_dataloader), leave=self.training_bar is None, dynamic_ncols=True
                )
            self.prediction_bar.update(1)

    def on_evaluate(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            if self.prediction_bar is not None:
                self.prediction_bar.close()
            self.prediction_bar = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None:
            # make a shallow copy of logs so we can mutate the fields copied
            # but avoid doing any value pickling.
            shallow_logs = {}
            for k, v in logs.items():
                if isinstance(v, str) and len(v) > self.max_str_len:
                    shallow_logs[k] = f"[String too long to display, length: {len(v)} > {self.max_str_len}. " \
                                      "Consider increasing `max_str_len` if needed.]"
                else:
                    shallow_logs[k] = v
            _ = shallow_logs.pop("total_flos", None)
            # round numbers so that it looks better in console
            if "epoch" in shallow_logs:
                shallow_logs["epoch"] = round(shallow_logs["epoch"], 2)
            self.training_bar.write(str(shallow_logs))

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.training_bar.close()
            self.training_bar = None
'''

LIB["transformers/modeling_utils.py"] = r'''
import os

import torch
from accelerate.utils.modeling import set_module_tensor_to_device
from torch import nn
from tqdm.auto import tqdm

import _simharness
from transformers.utils import logging

logger = logging.get_logger(__name__)


#@880
def _load_state_dict_into_meta_model(
    model,
    state_dict,
    start_prefix,
    expected_keys,
    device_map=None,
    offload_folder=None,
    offload_index=None,
    state_dict_folder=None,
    state_dict_index=None,
    dtype=None,
    hf_quantizer=None,
    is_safetensors=False,
    keep_in_fp32_modules=None,
    unexpected_keys=None,
    pretrained_model_name_or_path=None,
):
    error_msgs = []
    for param_name, param in state_dict.items():
        param_device = device_map[""] if device_map else "cpu"
        set_module_kwargs = {}
        if hf_quantizer is None:
            # For backward compatibility with older versions of `accelerate` and for non-quantized params
            #@942
            set_module_tensor_to_device(model, param_name, param_device, **set_module_kwargs)
    return error_msgs, offload_index, state_dict_index


class PreTrainedModel(nn.Module):
    config_class = None
    base_model_prefix = "model"
    device = torch.device("cuda", 0)

    def __init__(self, config=None, *inputs, **kwargs):
        super().__init__()
        self.config = config

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        return None

    #@2640
    def save_pretrained(
        self,
        save_directory,
        is_main_process=True,
        state_dict=None,
        save_function=torch.save,
        push_to_hub=False,
        max_shard_size="5GB",
        safe_serialization=True,
        variant=None,
        token=None,
        save_peft_format=True,
        **kwargs,
    ):
        if state_dict is None:
            state_dict = dict(self.named_parameters())
        logger.info(f"Configuration saved in {save_directory}/config.json")
        logger.info(f"Configuration saved in {save_directory}/generation_config.json")
        shards = {"model-00001-of-00002.safetensors": list(state_dict)[:4],
                  "model-00002-of-00002.safetensors": list(state_dict)[4:]}
        for shard_file, tensors in shards.items():
            _simharness.at("save_shard", shard_file)
            #@2793
            shard = {tensor: state_dict[tensor].contiguous() for tensor in tensors}
        logger.info(f"Model weights saved in {save_directory}/model.safetensors.index.json")
    #@3545
    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path,
        *model_args,
        config=None,
        cache_dir=None,
        ignore_mismatched_sizes=False,
        force_download=False,
        local_files_only=False,
        token=None,
        revision="main",
        use_safetensors=None,
        weights_only=True,
        **kwargs,
    ):
        device_map = kwargs.pop("device_map", None)
        torch_dtype = kwargs.pop("torch_dtype", None)
        low_cpu_mem_usage = device_map is not None
        model = cls(config)
        shards = [f"model-0000{i + 1}-of-00004.safetensors" for i in range(4)]
        (
            model,
            missing_keys,
            unexpected_keys,
            mismatched_keys,
            offload_index,
            error_msgs,
        #@4225
        ) = cls._load_pretrained_model(
            model,
            None,
            [],
            shards,
            pretrained_model_name_or_path,
            ignore_mismatched_sizes=ignore_mismatched_sizes,
            low_cpu_mem_usage=low_cpu_mem_usage,
            device_map={"": device_map} if isinstance(device_map, str) else device_map,
            dtype=torch_dtype,
        )
        return model

    #@4620
    @classmethod
    def _load_pretrained_model(
        cls,
        model,
        state_dict,
        loaded_keys,
        resolved_archive_file,
        pretrained_model_name_or_path,
        ignore_mismatched_sizes=False,
        sharded_metadata=None,
        _fast_init=True,
        low_cpu_mem_usage=False,
        device_map=None,
        offload_folder=None,
        offload_state_dict=None,
        dtype=None,
        hf_quantizer=None,
        keep_in_fp32_modules=None,
        gguf_path=None,
    ):
        error_msgs = []
        if len(resolved_archive_file) > 1:
            resolved_archive_file = tqdm(resolved_archive_file, desc="Loading checkpoint shards")
        for shard_index, shard_file in enumerate(resolved_archive_file):
            _simharness.tick(_simharness.knob("shard_seconds", 2.6))
            _simharness.at("load_shard", shard_index)
            state_dict = {f"model.layers.{shard_index * 8 + i}.mlp.down_proj.weight": torch.Tensor((4096, 14336))
                          for i in range(2)}
            if low_cpu_mem_usage:
                #@4728
                new_error_msgs, offload_index, state_dict_index = _load_state_dict_into_meta_model(
                    model,
                    state_dict,
                    "",
                    loaded_keys,
                    device_map=device_map,
                    dtype=dtype,
                )
                error_msgs += new_error_msgs
        return model, [], [], [], None, error_msgs

'''

LIB["transformers/models/__init__.py"] = ""
LIB["transformers/models/auto/__init__.py"] = ""
LIB["transformers/models/auto/auto_factory.py"] = r'''
from transformers.models.llama.modeling_llama import LlamaForCausalLM


class _BaseAutoModelClass:
    #@485
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        config = kwargs.pop("config", None)
        model_class = LlamaForCausalLM
        #@564
        return model_class.from_pretrained(
            pretrained_model_name_or_path, *model_args, config=config, **kwargs
        )


class AutoModelForCausalLM(_BaseAutoModelClass):
    pass


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, name, **kw):
        return cls()

    pad_token = None
    eos_token = "</s>"
'''

LIB["transformers/models/llama/__init__.py"] = ""
LIB["transformers/models/llama/modeling_llama.py"] = r'''
import torch
from torch import nn

from transformers.modeling_utils import PreTrainedModel


class LlamaMLP(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.gate_proj = nn.Linear(4096, 14336, bias=False)
        self.up_proj = nn.Linear(4096, 14336, bias=False)
        self.down_proj = nn.Linear(14336, 4096, bias=False)
        self.act_fn = nn.functional.silu

    #@257
    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return down_proj


class LlamaSdpaAttention(nn.Module):
    def __init__(self, config=None, layer_idx=None):
        super().__init__()
        self.q_proj = nn.Linear(4096, 4096, bias=False)
        self.o_proj = nn.Linear(4096, 4096, bias=False)

    #@590
    def forward(
        self,
        hidden_states,
        attention_mask=None,
        position_ids=None,
        past_key_value=None,
        output_attentions=False,
        use_cache=False,
        cache_position=None,
        position_embeddings=None,
        **kwargs,
    ):
        query_states = self.q_proj(hidden_states)
        key_states = value_states = query_states
        causal_mask = attention_mask
        is_causal = True if causal_mask is None else False
        #@618
        attn_output = torch.nn.functional.scaled_dot_product_attention(
            query_states,
            key_states,
            value_states,
            attn_mask=causal_mask,
            dropout_p=0.0,
            is_causal=is_causal,
        )
        attn_output = self.o_proj(attn_output)
        return attn_output, None, past_key_value


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config=None, layer_idx=0):
        super().__init__()
        self.self_attn = LlamaSdpaAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)

    #@640
    def forward(
        self,
        hidden_states,
        attention_mask=None,
        position_ids=None,
        past_key_value=None,
        output_attentions=False,
        use_cache=False,
        cache_position=None,
        position_embeddings=None,
        **kwargs,
    ):
        residual = hidden_states
        # Self Attention
        #@673
        hidden_states, self_attn_weights, present_key_value = self.self_attn(
            hidden_states=hidden_states,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_value=past_key_value,
            output_attentions=output_attentions,
            use_cache=use_cache,
            cache_position=cache_position,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        hidden_states = residual + hidden_states

        # Fully Connected
        residual = hidden_states
        #@693
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return (hidden_states,)


class LlamaModel(PreTrainedModel):
    def __init__(self, config=None):
        super().__init__(config)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(4)])

    #@870
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        cache_position=None,
        **flash_attn_kwargs,
    ):
        hidden_states = torch.Tensor((4, 2048, 4096))
        for decoder_layer in self.layers:
            #@945
            layer_outputs = decoder_layer(
                hidden_states,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_value=past_key_values,
                output_attentions=output_attentions,
                use_cache=use_cache,
                cache_position=cache_position,
            )
            hidden_states = layer_outputs[0]
        return (hidden_states,)


class LlamaForCausalLM(PreTrainedModel):
    def __init__(self, config=None):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(4096, 128256, bias=False)

    #@1140
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        cache_position=None,
        num_logits_to_keep=0,
        **kwargs,
    ):
        # decoder outputs consists of (dec_features, layer_state, dec_hidden, dec_attn)
        #@1190
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=return_dict,
            cache_position=cache_position,
        )
        hidden_states = outputs[0]
        logits = self.lm_head(hidden_states[:, -num_logits_to_keep:, :])
        loss = None
        if labels is not None:
            #@1219
            loss = self.loss_function(logits, labels, self.config.vocab_size if self.config else 128256, **kwargs)
        return {"loss": loss, "logits": logits}

    def loss_function(self, logits, labels, vocab_size, **kwargs):
        from transformers.loss.loss_utils import ForCausalLMLoss
        return ForCausalLMLoss(logits, labels, vocab_size, **kwargs)
'''

LIB["transformers/loss/__init__.py"] = ""
LIB["transformers/loss/loss_utils.py"] = r'''
import torch.nn.functional as nn_functional


#@20
def fixed_cross_entropy(source, target, num_items_in_batch=None, ignore_index=-100, **kwargs):
    reduction = "sum" if num_items_in_batch is not None else "mean"
    #@26
    loss = nn_functional.cross_entropy(source, target, ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        loss = loss / num_items_in_batch
    return loss


#@32
def ForCausalLMLoss(
    logits, labels, vocab_size, num_items_in_batch=None, ignore_index=-100, shift_labels=None, **kwargs
):
    # Upcast to float if we need to compute the loss to avoid potential precision issues
    logits = logits.float()
    labels = labels.to(logits.device)
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    #@47
    loss = fixed_cross_entropy(shift_logits, shift_labels, num_items_in_batch, ignore_index, **kwargs)
    return loss
'''

LIB["transformers/trainer.py"] = r'''
import functools
import math
import os

import torch

import _simharness
from transformers.trainer_callback import ProgressCallback, TrainerState
from transformers.utils import logging

logger = logging.get_logger(__name__)


def find_executable_batch_size(function=None, starting_batch_size=128, auto_find_batch_size=False):
    if function is None:
        return functools.partial(find_executable_batch_size, starting_batch_size=starting_batch_size,
                                 auto_find_batch_size=auto_find_batch_size)
    if auto_find_batch_size:
        from accelerate.utils import find_executable_batch_size as accelerate_find_executable_batch_size
        return accelerate_find_executable_batch_size(function=function, starting_batch_size=starting_batch_size)
    return functools.partial(function, batch_size=starting_batch_size)


class _Control:
    should_log = should_evaluate = should_save = False


class Trainer:
    def __init__(self, model=None, args=None, data_collator=None, train_dataset=None, eval_dataset=None,
                 processing_class=None, **kwargs):
        from accelerate import Accelerator
        self.model = model
        self.args = args
        self.train_dataset = train_dataset or []
        self.eval_dataset = eval_dataset or []
        self._train_batch_size = args.per_device_train_batch_size
        self.accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
        self.progress = ProgressCallback() if not args.disable_tqdm else None
        self.state = TrainerState()
        self.control = _Control()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)

    def _cb(self, event, **kw):
        if self.progress is not None:
            getattr(self.progress, event)(self.args, self.state, self.control, **kw)

    def log(self, logs, start_time=None):
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        output = {**logs, **{"step": self.state.global_step}}
        self.state.log_history.append(output)
        self._cb("on_log", logs=logs)

    #@2045
    def train(
        self,
        resume_from_checkpoint=None,
        trial=None,
        ignore_keys_for_eval=None,
        **kwargs,
    ):
        args = self.args
        self.is_in_train = True
        inner_training_loop = find_executable_batch_size(
            self._inner_training_loop, self._train_batch_size, args.auto_find_batch_size
        )
        #@2123
        return inner_training_loop(
            args=args,
            resume_from_checkpoint=resume_from_checkpoint,
            trial=trial,
            ignore_keys_for_eval=ignore_keys_for_eval,
        )

    def _inner_training_loop(
        self, batch_size=None, args=None, resume_from_checkpoint=None, trial=None, ignore_keys_for_eval=None
    ):
        self.accelerator.free_memory() if hasattr(self.accelerator, "free_memory") else None
        self._train_batch_size = batch_size
        logger.debug(f"Currently training with a batch size of: {self._train_batch_size}")
        model = self.model
        num_examples = len(self.train_dataset)
        len_dataloader = math.ceil(num_examples / self._train_batch_size)
        num_update_steps_per_epoch = max(len_dataloader // args.gradient_accumulation_steps, 1)
        num_train_epochs = math.ceil(args.num_train_epochs)
        max_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * num_update_steps_per_epoch)
        total_train_batch_size = self._train_batch_size * args.gradient_accumulation_steps
        self.state = TrainerState()
        self.state.max_steps = max_steps
        self.state.train_batch_size = self._train_batch_size

        # Train!
        #@2314
        logger.info("***** Running training *****")
        logger.info(f"  Num examples = {num_examples:,}")
        logger.info(f"  Num Epochs = {num_train_epochs:,}")
        logger.info(f"  Instantaneous batch size per device = {self.args.per_device_train_batch_size:,}")
        if self.args.per_device_train_batch_size != self._train_batch_size:
            logger.info(f"  Training with DataParallel so batch size has been adjusted to: {self._train_batch_size:,}")
        logger.info(f"  Total train batch size (w. parallel, distributed & accumulation) = {total_train_batch_size:,}")
        logger.info(f"  Gradient Accumulation steps = {args.gradient_accumulation_steps}")
        logger.info(f"  Total optimization steps = {max_steps:,}")
        logger.info(f"  Number of trainable parameters = {_simharness.knob('trainable_params', 8030261248):,}")

        self.state.epoch = 0
        self._cb("on_train_begin")
        tr_loss = 0.0
        logged_loss = 0.0
        for epoch in range(num_train_epochs):
            for step in range(len_dataloader):
                inputs = {"input_ids": torch.Tensor((self._train_batch_size, 2048)),
                          "attention_mask": torch.Tensor((self._train_batch_size, 2048)),
                          "labels": torch.Tensor((self._train_batch_size, 2048))}
                _simharness.at("train_step", self.state.global_step, bs=self._train_batch_size)
                _simharness.tick(_simharness.knob("step_seconds", 1.9) / args.gradient_accumulation_steps)
                num_items_in_batch = None
                #@2481
                tr_loss_step = self.training_step(model, inputs, num_items_in_batch)
                tr_loss += 2.0 - 0.004 * self.state.global_step
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    _simharness.at("optimizer_step", self.state.global_step, bs=self._train_batch_size)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                    self.state.global_step += 1
                    self.state.epoch = epoch + (step + 1) / len_dataloader
                    self._cb("on_step_end")
                    #@2533
                    self._maybe_log_save_evaluate(tr_loss, 0.83, model, trial, epoch, ignore_keys_for_eval)
                    if self.state.global_step >= max_steps:
                        break
            if self.state.global_step >= max_steps:
                break

        #@2589
        logger.info("\n\nTraining completed. Do not forget to share your model on huggingface.co/models =)\n\n")
        runtime = self.state.global_step * _simharness.knob("step_seconds", 1.9)
        metrics = {"train_runtime": round(runtime, 4),
                   "train_samples_per_second": round(num_examples * num_train_epochs / runtime, 3),
                   "train_steps_per_second": round(self.state.global_step / runtime, 3),
                   "total_flos": 1.234e16, "train_loss": round(tr_loss / max(self.state.global_step, 1), 4)}
        self.log(metrics)
        self._cb("on_train_end")
        return metrics

    #@2955
    def _evaluate(self, trial, ignore_keys_for_eval, skip_scheduler=False):
        #@2962
        metrics = self.evaluate(ignore_keys=ignore_keys_for_eval)
        return metrics

    #@2980
    def _maybe_log_save_evaluate(self, tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval, start_time=None):
        args = self.args
        gs = self.state.global_step
        if args.logging_steps and gs % args.logging_steps == 0:
            logs = {}
            logs["loss"] = round(2.3456 - 0.0031 * gs, 4)
            logs["grad_norm"] = 0.8312458395957947 + gs / 1000.0
            logs["learning_rate"] = args.learning_rate * (1 - gs / self.state.max_steps)
            self.log(logs)

        metrics = None
        if args.eval_steps and gs % args.eval_steps == 0:
            #@3010
            metrics = self._evaluate(trial, ignore_keys_for_eval)

        if args.save_steps and gs % args.save_steps == 0:
            #@3014
            self._save_checkpoint(model, trial)

    #@3060
    def _save_checkpoint(self, model, trial):
        checkpoint_folder = f"checkpoint-{self.state.global_step}"
        output_dir = os.path.join(self.args.output_dir, checkpoint_folder)
        #@3085
        self.save_model(output_dir, _internal_call=True)

    #@3540
    def training_step(self, model, inputs, num_items_in_batch=None):
        model.train()
        if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
            self.optimizer.train()

        inputs = self._prepare_inputs(inputs)

        with self.compute_loss_context_manager():
            #@3579
            loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)

        del inputs
        kwargs = {}
        if self.args.n_gpu > 1:
            loss = loss.mean()  # mean() to average on multi-gpu parallel training
        else:
            #@3616
            self.accelerator.backward(loss, **kwargs)
            return loss.detach() / self.args.gradient_accumulation_steps

    def _prepare_inputs(self, inputs):
        return inputs

    def compute_loss_context_manager(self):
        return _NullCtx()

    #@3625
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if num_items_in_batch is not None:
            inputs = {**inputs, "num_items_in_batch": num_items_in_batch}
        #@3633
        outputs = model(**inputs)
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs[0]
        if loss is None:
            loss = torch.Tensor((), value=2.1)
        return (loss, outputs) if return_outputs else loss

    #@3700
    def save_model(self, output_dir=None, _internal_call=False):
        if output_dir is None:
            output_dir = self.args.output_dir
        if self.args.should_save if hasattr(self.args, "should_save") else True:
            #@3719
            self._save(output_dir)

    #@3800
    def _save(self, output_dir=None, state_dict=None):
        # If we are executing this function, we are the process zero, so we don't check for that.
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        #@3805
        logger.info(f"Saving model checkpoint to {output_dir}")
        supported_classes = (torch.nn.Module,)
        # Save a trained model and configuration using `save_pretrained()`.
        # They can then be reloaded using `from_pretrained()`
        if state_dict is None:
            state_dict = {f"model.layers.{i // 2}.mlp.{'up' if i % 2 else 'down'}_proj.weight": torch.Tensor((14336, 4096))
                          for i in range(8)}
        if not isinstance(self.model, supported_classes):
            pass
        else:
            #@3823
            self.model.save_pretrained(
                output_dir, state_dict=state_dict, safe_serialization=True
            )

    #@4010
    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        eval_dataloader = self.eval_dataset
        eval_loop = self.evaluation_loop
        #@4051
        output = eval_loop(
            eval_dataloader,
            description="Evaluation",
            # No point gathering the predictions if there are no metrics, otherwise we defer to
            # self.args.prediction_loss_only
            prediction_loss_only=True,
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        metrics = {"eval_loss": 1.9876, "eval_runtime": 31.2094, "eval_samples_per_second": 12.817,
                   "eval_steps_per_second": 1.602}
        self.log(metrics)
        self._cb("on_evaluate")
        return metrics

    #@4150
    def evaluation_loop(
        self,
        dataloader,
        description,
        prediction_loss_only=None,
        ignore_keys=None,
        metric_key_prefix="eval",
    ):
        args = self.args
        batch_size = args.per_device_eval_batch_size
        model = self.model
        #@4200
        logger.info(f"\n***** Running {description} *****")
        if len(dataloader) > 0:
            logger.info(f"  Num examples = {len(dataloader) * batch_size:,}")
        else:
            logger.info("  Num examples: Unknown")
        logger.info(f"  Batch size = {batch_size}")

        model.eval()
        for step in range(len(dataloader)):
            inputs = {"input_ids": torch.Tensor((batch_size, 2048)), "labels": torch.Tensor((batch_size, 2048))}
            _simharness.at("eval_step", step, global_step=self.state.global_step)
            _simharness.tick(0.62)
            # Prediction step
            #@4245
            losses, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
            self._cb("on_prediction_step", eval_dataloader=dataloader)
        return None

    #@4400
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        has_labels = "labels" in inputs
        with torch.no_grad():
            if has_labels:
                with self.compute_loss_context_manager():
                    #@4469
                    loss, outputs = self.compute_loss(model, inputs, return_outputs=True)
                loss = loss.mean().detach()
        return (loss, None, None)


class _NullCtx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
'''

# ---------------------------------------------------------------- diffusers
LIB["diffusers/__init__.py"] = r'''
__version__ = "0.32.2"
from diffusers.utils import outputs as _outputs  # noqa: F401,E402
from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL  # noqa: F401,E402
from diffusers.models.unets.unet_2d_condition import UNet2DConditionModel  # noqa: F401,E402
from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel  # noqa: F401,E402
from diffusers.pipelines.flux.pipeline_flux import FluxPipeline  # noqa: F401,E402
from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion import StableDiffusionPipeline  # noqa: F401,E402
from diffusers.schedulers import DDPMScheduler, FlowMatchEulerDiscreteScheduler  # noqa: F401,E402
'''

LIB["diffusers/utils/__init__.py"] = r'''
from diffusers.utils import outputs  # noqa: F401
'''

LIB["diffusers/utils/outputs.py"] = r'''
import torch
import torch.utils._pytree


class BaseOutput(dict):
    def __getattr__(self, k):
        return self[k]

    def __getitem__(self, k):
        if isinstance(k, int):
            return list(self.values())[k]
        return dict.__getitem__(self, k)


if True:
    #@63
    torch.utils._pytree._register_pytree_node(
        BaseOutput,
        None,
        None,
    )
'''

LIB["diffusers/utils/accelerate_utils.py"] = r'''
import functools


def apply_forward_hook(method):
    @functools.wraps(method)
    #@41
    def wrapper(self, *args, **kwargs):
        if hasattr(self, "_hf_hook") and hasattr(self._hf_hook, "pre_forward"):
            self._hf_hook.pre_forward(self)
        #@46
        return method(self, *args, **kwargs)

    return wrapper
'''

LIB["diffusers/schedulers/__init__.py"] = r'''
class _Sched:
    def __init__(self, *a, **k):
        self.timesteps = list(range(999, 0, -50))
        self.config = {"num_train_timesteps": 1000}

    @classmethod
    def from_pretrained(cls, *a, **k):
        return cls()

    def set_timesteps(self, n, device=None):
        self.timesteps = list(range(n))

    def step(self, *a, **k):
        return (a[2] if len(a) > 2 else None,)

    def add_noise(self, latents, noise, timesteps):
        return latents


DDPMScheduler = FlowMatchEulerDiscreteScheduler = DPMSolverMultistepScheduler = _Sched
'''

LIB["diffusers/models/__init__.py"] = ""
LIB["diffusers/models/modeling_utils.py"] = r'''
from torch import nn


class ModelMixin(nn.Module):
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, subfolder=None, torch_dtype=None, **kw):
        return cls()

    def enable_gradient_checkpointing(self):
        self.gradient_checkpointing = True

    def add_adapter(self, config):
        return None

    def set_adapters(self, *a, **k):
        return None
'''

LIB["diffusers/models/resnet.py"] = r'''
from torch import nn


class ResnetBlock2D(nn.Module):
    def __init__(self, in_channels=128, out_channels=128):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(32, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.nonlinearity = nn.functional.silu

    #@311
    def forward(self, input_tensor, temb=None, *args, **kwargs):
        hidden_states = input_tensor

        #@319
        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)

        if False:
            pass
        else:
            #@327
            hidden_states = self.conv1(hidden_states)

        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv2(hidden_states)
        return input_tensor + hidden_states
'''

LIB["diffusers/models/upsampling.py"] = r'''
import torch.nn.functional as F
from torch import nn


class Upsample2D(nn.Module):
    def __init__(self, channels=512):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    #@141
    def forward(self, hidden_states, output_size=None, *args, **kwargs):
        # if `output_size` is passed we force the interpolation output
        # size and do not make use of `scale_factor=2`
        if output_size is None:
            #@180
            hidden_states = F.interpolate(hidden_states, scale_factor=2.0, mode="nearest")
        else:
            hidden_states = F.interpolate(hidden_states, size=output_size, mode="nearest")
        hidden_states = self.conv(hidden_states)
        return hidden_states
'''

LIB["diffusers/models/unets/__init__.py"] = ""
LIB["diffusers/models/unets/unet_2d_blocks.py"] = r'''
from torch import nn

from diffusers.models.resnet import ResnetBlock2D
from diffusers.models.upsampling import Upsample2D


class DownEncoderBlock2D(nn.Module):
    def __init__(self, channels=128):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels) for _ in range(2)])

    #@1466
    def forward(self, hidden_states, *args, **kwargs):
        for resnet in self.resnets:
            #@1471
            hidden_states = resnet(hidden_states, temb=None)
        return hidden_states


class UpDecoderBlock2D(nn.Module):
    def __init__(self, channels=512):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels) for _ in range(3)])
        self.upsamplers = nn.ModuleList([Upsample2D(channels)])

    #@2740
    def forward(self, hidden_states, temb=None):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb=temb)

        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                #@2748
                hidden_states = upsampler(hidden_states)
        return hidden_states
'''

LIB["diffusers/models/unets/unet_2d_condition.py"] = r'''
import torch
from torch import nn

from diffusers.models.modeling_utils import ModelMixin
from diffusers.models.attention_processor import Attention


class Transformer2DModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn1 = Attention()

    #@380
    def forward(self, hidden_states, encoder_hidden_states=None, **kw):
        #@410
        attn_output = self.attn1(hidden_states, encoder_hidden_states=None)
        return (hidden_states + attn_output,)


class UNet2DConditionModel(ModelMixin):
    def __init__(self, *a, **k):
        super().__init__()
        self.down_blocks = nn.ModuleList([CrossAttnDownBlock2D() for _ in range(3)])

    #@1020
    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, added_cond_kwargs=None, return_dict=True, **kw):
        for downsample_block in self.down_blocks:
            #@1216
            sample, res_samples = downsample_block(
                hidden_states=sample,
                temb=None,
                encoder_hidden_states=encoder_hidden_states,
            )
        return (sample,)


class CrossAttnDownBlock2D(nn.Module):
    def __init__(self):
        super().__init__()
        self.attentions = nn.ModuleList([Transformer2DModel() for _ in range(2)])

    #@1250
    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, **kw):
        for attn in self.attentions:
            #@1288
            hidden_states = attn(
                hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                return_dict=False,
            )[0]
        return hidden_states, ()
'''

LIB["diffusers/models/attention_processor.py"] = r'''
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, processor=None):
        super().__init__()
        self.to_q = nn.Linear(3072, 3072)
        self.processor = processor or AttnProcessor2_0()

    #@540
    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        #@588
        return self.processor(
            self,
            hidden_states,
            encoder_hidden_states=encoder_hidden_states,
            attention_mask=attention_mask,
            **cross_attention_kwargs,
        )


class FluxAttnProcessor2_0:
    #@1740
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        query = attn.to_q(hidden_states)
        key = value = query
        #@1795
        hidden_states = F.scaled_dot_product_attention(query, key, value, dropout_p=0.0, is_causal=False)
        return hidden_states, hidden_states


class AttnProcessor2_0:
    #@2340
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, *args, **kw):
        query = attn.to_q(hidden_states)
        key = value = query
        # the output of sdp = (batch, num_heads, seq_len, head_dim)
        # TODO: add support for attn.scale when we move to Torch 2.1
        #@2383
        hidden_states = F.scaled_dot_product_attention(
            query, key, value, attn_mask=attention_mask, dropout_p=0.0, is_causal=False
        )
        return hidden_states
'''

LIB["diffusers/models/transformers/__init__.py"] = ""
LIB["diffusers/models/transformers/transformer_flux.py"] = r'''
import torch
from torch import nn

from diffusers.models.attention_processor import Attention, FluxAttnProcessor2_0
from diffusers.models.modeling_utils import ModelMixin


class FluxTransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention(processor=FluxAttnProcessor2_0())
        self.ff = nn.Linear(3072, 12288)

    #@170
    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        joint_attention_kwargs = joint_attention_kwargs or {}
        # Attention.
        #@188
        attention_outputs = self.attn(
            hidden_states=hidden_states,
            encoder_hidden_states=encoder_hidden_states,
            image_rotary_emb=image_rotary_emb,
            **joint_attention_kwargs,
        )
        #@211
        ff_output = self.ff(hidden_states)
        return encoder_hidden_states, hidden_states


class FluxTransformer2DModel(ModelMixin):
    gradient_checkpointing = False

    def __init__(self, *a, **k):
        super().__init__()
        self.transformer_blocks = nn.ModuleList([FluxTransformerBlock() for _ in range(3)])

    #@430
    def forward(
        self,
        hidden_states,
        encoder_hidden_states=None,
        pooled_projections=None,
        timestep=None,
        img_ids=None,
        txt_ids=None,
        guidance=None,
        joint_attention_kwargs=None,
        controlnet_block_samples=None,
        controlnet_single_block_samples=None,
        return_dict=True,
        controlnet_blocks_repeat=False,
    ):
        temb = None
        image_rotary_emb = None
        for index_block, block in enumerate(self.transformer_blocks):
            if torch.is_grad_enabled() and self.gradient_checkpointing:
                pass
            else:
                #@522
                encoder_hidden_states, hidden_states = block(
                    hidden_states=hidden_states,
                    encoder_hidden_states=encoder_hidden_states,
                    temb=temb,
                    image_rotary_emb=image_rotary_emb,
                    joint_attention_kwargs=joint_attention_kwargs,
                )
        return (hidden_states,)
'''

LIB["diffusers/models/autoencoders/__init__.py"] = ""
LIB["diffusers/models/autoencoders/vae.py"] = r'''
from torch import nn

from diffusers.models.unets.unet_2d_blocks import DownEncoderBlock2D, UpDecoderBlock2D


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(3, 128, 3, padding=1)
        self.down_blocks = nn.ModuleList([DownEncoderBlock2D(128) for _ in range(4)])

    #@140
    def forward(self, sample):
        sample = self.conv_in(sample)
        if False:
            pass
        else:
            # down
            for down_block in self.down_blocks:
                #@156
                sample = down_block(sample)
        return sample


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(16, 512, 3, padding=1)
        self.up_blocks = nn.ModuleList([UpDecoderBlock2D(512) for _ in range(4)])

    #@280
    def forward(self, sample, latent_embeds=None):
        sample = self.conv_in(sample)
        if False:
            pass
        else:
            # up
            for up_block in self.up_blocks:
                #@317
                sample = up_block(sample, latent_embeds)
        return sample
'''

LIB["diffusers/models/autoencoders/autoencoder_kl.py"] = r'''
import torch

from diffusers.models.autoencoders.vae import Decoder, Encoder
from diffusers.models.modeling_utils import ModelMixin
from diffusers.utils.accelerate_utils import apply_forward_hook
from diffusers.utils.outputs import BaseOutput


class _Dist:
    def sample(self, generator=None):
        return torch.Tensor((1, 16, 128, 128))

    mode = sample


class AutoencoderKL(ModelMixin):
    def __init__(self, *a, **k):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.use_slicing = False
        self.use_tiling = False
        self.config = BaseOutput(scaling_factor=0.3611, shift_factor=0.1159, block_out_channels=[128, 256, 512, 512])
        self.dtype = torch.bfloat16

    #@236
    def _encode(self, x):
        batch_size, num_channels, height, width = (1, 3, 1024, 1024)
        if self.use_tiling:
            return self._tiled_encode(x)
        #@240
        enc = self.encoder(x)
        return enc

    #@243
    @apply_forward_hook
    def encode(self, x, return_dict=True):
        if self.use_slicing and x.shape[0] > 1:
            encoded_slices = [self._encode(x_slice) for x_slice in x.split(1)]
            h = torch.cat(encoded_slices)
        else:
            #@266
            h = self._encode(x)
        return BaseOutput(latent_dist=_Dist())

    #@278
    def _decode(self, z, return_dict=True):
        if self.use_tiling:
            return self.tiled_decode(z, return_dict=return_dict)
        #@292
        dec = self.decoder(z)
        return BaseOutput(sample=torch.Tensor((1, 3, 1024, 1024)))

    #@300
    @apply_forward_hook
    def decode(self, z, return_dict=True, generator=None):
        if self.use_slicing and z.shape[0] > 1:
            decoded_slices = [self._decode(z_slice).sample for z_slice in z.split(1)]
            decoded = torch.cat(decoded_slices)
        else:
            #@321
            decoded = self._decode(z).sample
        if not return_dict:
            return (decoded,)
        return BaseOutput(sample=decoded)
'''

LIB["diffusers/pipelines/__init__.py"] = ""
LIB["diffusers/pipelines/pipeline_utils.py"] = r'''
from tqdm.auto import tqdm


class DiffusionPipeline:
    _progress_bar_config = None

    @classmethod
    def from_pretrained(cls, *a, **k):
        return cls(*[None] * 0, **{n: k.get(n) for n in ("transformer", "unet", "vae", "text_encoder")})

    def to(self, *a, **k):
        return self

    def set_progress_bar_config(self, **kwargs):
        self._progress_bar_config = kwargs

    def progress_bar(self, iterable=None, total=None):
        if self._progress_bar_config is None:
            self._progress_bar_config = {}
        if iterable is not None:
            return tqdm(iterable, **self._progress_bar_config)
        return tqdm(total=total, **self._progress_bar_config)

    def load_lora_weights(self, *a, **k):
        return None
'''

LIB["diffusers/pipelines/flux/__init__.py"] = ""
LIB["diffusers/pipelines/flux/pipeline_flux.py"] = r'''
import torch

import _simharness
from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL
from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel
from diffusers.pipelines.pipeline_utils import DiffusionPipeline
from diffusers.utils.outputs import BaseOutput


class FluxPipeline(DiffusionPipeline):
    def __init__(self, transformer=None, vae=None, text_encoder=None, **kw):
        self.transformer = transformer or FluxTransformer2DModel()
        self.vae = vae or AutoencoderKL()

    #@640
    @torch.no_grad()
    def __call__(
        self,
        prompt=None,
        prompt_2=None,
        height=None,
        width=None,
        num_inference_steps=28,
        timesteps=None,
        guidance_scale=3.5,
        num_images_per_prompt=1,
        generator=None,
        latents=None,
        prompt_embeds=None,
        pooled_prompt_embeds=None,
        output_type="pil",
        return_dict=True,
        joint_attention_kwargs=None,
        max_sequence_length=512,
    ):
        latents = torch.Tensor((1, 4096, 64))
        timesteps = list(range(num_inference_steps))
        # 6. Denoising loop
        with self.progress_bar(total=num_inference_steps) as progress_bar:
            for i, t in enumerate(timesteps):
                _simharness.at("pipeline_step", i)
                _simharness.tick(0.71)
                timestep = t
                #@889
                noise_pred = self.transformer(
                    hidden_states=latents,
                    timestep=timestep / 1000,
                    guidance=None,
                    pooled_projections=pooled_prompt_embeds,
                    encoder_hidden_states=prompt_embeds,
                    txt_ids=None,
                    img_ids=None,
                    joint_attention_kwargs=joint_attention_kwargs,
                    return_dict=False,
                )[0]
                progress_bar.update()

        _simharness.at("pipeline_decode", None)
        #@950
        image = self.vae.decode(latents, return_dict=False)[0]
        return BaseOutput(images=[image])
'''

LIB["diffusers/pipelines/stable_diffusion/__init__.py"] = ""
LIB["diffusers/pipelines/stable_diffusion/pipeline_stable_diffusion.py"] = r'''
import torch

import _simharness
from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL
from diffusers.models.unets.unet_2d_condition import UNet2DConditionModel
from diffusers.pipelines.pipeline_utils import DiffusionPipeline
from diffusers.utils.outputs import BaseOutput


class StableDiffusionPipeline(DiffusionPipeline):
    def __init__(self, unet=None, vae=None, text_encoder=None, **kw):
        self.unet = unet or UNet2DConditionModel()
        self.vae = vae or AutoencoderKL()

    #@780
    @torch.no_grad()
    def __call__(self, prompt=None, height=None, width=None, num_inference_steps=50, guidance_scale=7.5,
                 negative_prompt=None, num_images_per_prompt=1, generator=None, output_type="pil", **kw):
        latents = torch.Tensor((2, 4, 64, 64))
        timesteps = list(range(num_inference_steps))
        with self.progress_bar(total=num_inference_steps) as progress_bar:
            for i, t in enumerate(timesteps):
                _simharness.at("pipeline_step", i)
                _simharness.tick(0.09)
                # predict the noise residual
                #@1006
                noise_pred = self.unet(
                    latents,
                    t,
                    encoder_hidden_states=None,
                    timestep_cond=None,
                    cross_attention_kwargs=None,
                    added_cond_kwargs=None,
                    return_dict=False,
                )[0]
                progress_bar.update()
        _simharness.at("pipeline_decode", None)
        #@1045
        image = self.vae.decode(latents, return_dict=False, generator=generator)[0]
        return BaseOutput(images=[image])
'''

LIB["diffusers/optimization.py"] = r'''
import torch


def get_scheduler(name, optimizer, num_warmup_steps=None, num_training_steps=None, **kw):
    return torch.optim.lr_scheduler.LambdaLR(optimizer)
'''

LIB["diffusers/training_utils.py"] = r'''
import gc

import torch


def free_memory():
    gc.collect()
    torch.cuda.empty_cache()


def cast_training_params(model, dtype=None):
    return None


def compute_snr(noise_scheduler, timesteps):
    return timesteps
'''

# ---------------------------------------------------------------- deepspeed
LIB["deepspeed/__init__.py"] = r'''
__version__ = "0.16.4"
from deepspeed.utils.logging import logger, log_dist  # noqa: F401,E402
from deepspeed.accelerator.real_accelerator import get_accelerator  # noqa: F401,E402
from deepspeed.comm.comm import init_distributed  # noqa: F401,E402
from deepspeed.runtime.pipe.module import PipelineModule, LayerSpec  # noqa: F401,E402
from deepspeed import comm  # noqa: F401,E402

get_accelerator()


def add_config_arguments(parser):
    group = parser.add_argument_group("DeepSpeed", "DeepSpeed configurations")
    group.add_argument("--deepspeed", default=False, action="store_true")
    group.add_argument("--deepspeed_config", default=None, type=str)
    return parser


def initialize(args=None, model=None, optimizer=None, model_parameters=None, config=None, **kw):
    from deepspeed.runtime.pipe.engine import PipelineEngine
    #@205
    log_dist(f"DeepSpeed info: version={__version__}, git-hash=unknown, git-branch=unknown", ranks=[0])
    engine = PipelineEngine(model=model, config=config or {})
    return engine, engine.optimizer, None, None
'''

LIB["deepspeed/utils/__init__.py"] = r'''
from deepspeed.utils.logging import logger, log_dist  # noqa: F401
'''

LIB["deepspeed/utils/logging.py"] = r'''
import logging
import sys

log_levels = {"debug": logging.DEBUG, "info": logging.INFO}


class LoggerFactory:
    @staticmethod
    def create_logger(name=None, level=logging.INFO):
        formatter = logging.Formatter(
            "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s")
        logger_ = logging.getLogger(name)
        logger_.setLevel(level)
        logger_.propagate = False
        ch = logging.StreamHandler(stream=sys.stdout)
        ch.setLevel(level)
        ch.setFormatter(formatter)
        logger_.addHandler(ch)
        return logger_


logger = LoggerFactory.create_logger(name="DeepSpeed", level=logging.INFO)


#@110
def log_dist(message, ranks=None, level=logging.INFO):
    from deepspeed.comm.comm import get_rank
    should_log = not True
    my_rank = get_rank()
    if ranks is not None:
        should_log = should_log or (my_rank in set(ranks))
    if should_log:
        final_message = "[Rank {}] {}".format(my_rank, message)
        #@128
        logger.log(level, final_message)
'''

LIB["deepspeed/utils/nvtx.py"] = r'''
import functools


def instrument_w_nvtx(func):
    """decorator that causes an NVTX range to be recorded for the duration of the
    function call."""

    @functools.wraps(func)
    #@15
    def wrapped_fn(*args, **kwargs):
        _range = None
        #@18
        ret_val = func(*args, **kwargs)
        return ret_val

    return wrapped_fn
'''

LIB["deepspeed/accelerator/__init__.py"] = r'''
from deepspeed.accelerator.real_accelerator import get_accelerator  # noqa: F401
'''

LIB["deepspeed/accelerator/real_accelerator.py"] = r'''
from deepspeed.utils.logging import logger

ds_accelerator = None


class CUDA_Accelerator:
    _name = "cuda"

    def device_name(self, i=None):
        return "cuda" if i is None else f"cuda:{i}"

    def empty_cache(self):
        return None


def get_accelerator():
    global ds_accelerator
    if ds_accelerator is not None:
        return ds_accelerator
    ds_set_method = "auto detect"
    ds_accelerator = CUDA_Accelerator()
    #@260
    logger.info(f"Setting ds_accelerator to {ds_accelerator._name} ({ds_set_method})")
    return ds_accelerator
'''

LIB["deepspeed/comm/__init__.py"] = r'''
from deepspeed.comm.comm import get_rank, get_world_size, barrier, init_distributed  # noqa: F401
'''

LIB["deepspeed/comm/comm.py"] = r'''
import os

from deepspeed.utils.logging import logger

cdb = None


def get_rank(group=None):
    return int(os.environ.get("RANK", 0))


def get_world_size(group=None):
    return int(os.environ.get("WORLD_SIZE", 1))


def barrier(*a, **k):
    return None


#@630
def init_distributed(dist_backend=None, auto_mpi_discovery=True, distributed_port=29500, verbose=True,
                     timeout=None, init_method=None, dist_init_required=None, config=None, rank=-1,
                     world_size=-1):
    global cdb
    if verbose:
        #@652
        logger.info(f"cdb={cdb}")
    if cdb is None:
        if verbose:
            #@683
            logger.info("Initializing TorchBackend in DeepSpeed with backend {}".format(dist_backend or "nccl"))
        cdb = object()
'''

LIB["deepspeed/runtime/__init__.py"] = ""
LIB["deepspeed/runtime/engine.py"] = r'''
import torch

import _simharness
from deepspeed.utils.logging import log_dist
from deepspeed.utils.nvtx import instrument_w_nvtx


class DeepSpeedEngine(torch.nn.Module):
    def __init__(self, model=None, config=None):
        super().__init__()
        self.module = model
        self.config = config
        self.global_steps = 0
        self.optimizer = torch.optim.AdamW([], lr=2e-5)

    def train_micro_batch_size_per_gpu(self):
        return self.config.get("train_micro_batch_size_per_gpu", 1)

    def steps_per_print(self):
        return self.config.get("steps_per_print", 1)

    def train_batch_size(self):
        return self.config.get("train_batch_size", 4)

    #@1885
    @instrument_w_nvtx
    def forward(self, *inputs, **kwargs):
        r"""Execute forward propagation
        Arguments:
            *inputs: Variable length input list
            **kwargs: variable length keyword arguments
        """
        if self.autotuning_profile_model_info() if hasattr(self, "autotuning_profile_model_info") else False:
            pass
        #@1899
        loss = self.module(*inputs, **kwargs)
        return loss

    def save_checkpoint(self, save_dir, tag=None, client_state={}, save_latest=True, exclude_frozen_parameters=False):
        tag = tag or f"global_step{self.global_steps}"
        #@3108
        log_dist(f"[Torch] Checkpoint {tag} is about to be saved!", ranks=[0])
        _simharness.tick(4.2)
        log_dist(f"Saving model checkpoint: {save_dir}/{tag}/layer_00-model_states.pt", ranks=[0])
        log_dist(f"[Torch] Checkpoint {tag} is ready now!", ranks=[0])
        return True
'''

LIB["deepspeed/runtime/pipe/__init__.py"] = r'''
from deepspeed.runtime.pipe.module import PipelineModule, LayerSpec  # noqa: F401
'''

LIB["deepspeed/runtime/pipe/module.py"] = r'''
import torch
from torch import nn

from deepspeed.utils.logging import logger


class LayerSpec:
    def __init__(self, typename, *module_args, **module_kwargs):
        self.typename, self.module_args, self.module_kwargs = typename, module_args, module_kwargs

    def build(self):
        return self.typename(*self.module_args, **self.module_kwargs)


class PipelineModule(nn.Module):
    #@330
    def forward(self, forward_input):
        def exec_range_func(start, end):
            """ Helper function to be used with checkpoint()
            Adapted from torch.utils.checkpoint:checkpoint_sequential()
            """
            local_micro_offset = 0

            def exec_func(*inputs):
                # Single tensor inputs need to be unwrapped
                if len(inputs) == 1:
                    inputs = inputs[0]
                for idx, layer in enumerate(self.forward_funcs[start:end]):
                    self.curr_layer = idx + start
                    #@355
                    inputs = layer(inputs)
                return inputs

            return exec_func

        x = forward_input
        #@372
        x = exec_range_func(0, len(self.forward_funcs))(*x)
        return x

    def __init__(self, layers, num_stages=None, partition_method="parameters", activation_checkpoint_interval=0,
                 checkpointable_layers=None, **kw):
        super().__init__()
        self.forward_funcs = []
        #@396
        logger.info(f"Partitioning pipeline stages with method {partition_method}")
        lines = [f"stage=0 layers={len(layers)}"]
        for i, spec in enumerate(layers):
            layer = spec.build() if isinstance(spec, LayerSpec) else spec
            self.add_module(str(i), layer)
            self.forward_funcs.append(layer)
            lines.append(f"     {i}: {type(layer).__name__}")
        print("\n".join(lines))
'''

LIB["deepspeed/runtime/pipe/engine.py"] = r'''
import time

import torch

import _simharness
from deepspeed.runtime.engine import DeepSpeedEngine
from deepspeed.utils.logging import log_dist


class PipelineEngine(DeepSpeedEngine):
    def __init__(self, model=None, config=None):
        super().__init__(model=model, config=config)
        self.agg_train_loss = None
        self._batch_start = time.time()
        self.eval_return = None

    def set_dataloader(self, loader):
        self.data_iterator = loader

    def reset_activation_shape(self):
        return None

    #@331
    def train_batch(self, data_iter=None):
        """Progress the pipeline to train the next batch of data. The engine will ingest
        ``self.train_batch_size()`` total samples collectively across all workers."""
        self.module.train()
        self.total_loss = None
        self._compute_loss = True

        # Do the work
        sched = ["LoadMicroBatch", "ForwardPass", "BackwardPass", "ReduceGrads", "OptimizerStep"]
        #@388
        self._exec_schedule(sched)
        self.agg_train_loss = self._aggregate_total_loss()
        self.global_steps += 1

        if self.global_steps % self.steps_per_print() == 0:
            if self.global_rank == 0 if hasattr(self, "global_rank") else True:
                elapsed = time.time() - self._batch_start
                self._batch_start = time.time()
                iter_time = elapsed / self.steps_per_print()
                tput = self.train_batch_size() / iter_time
                log_str = f'steps: {self.global_steps} loss: {self.agg_train_loss:0.4f} '
                log_str += f'iter time (s): {iter_time:0.3f} samples/sec: {tput:0.3f}'
                print(log_str)
        return torch.Tensor((), value=self.agg_train_loss)

    def _aggregate_total_loss(self):
        return 0.1812 - 0.0001 * self.global_steps + (0.013 if self.global_steps % 3 == 0 else 0.0)

    #@440
    def eval_batch(self, data_iter, return_logits=False, compute_loss=True, reduce_output="avg",
                   bcast_loss=True, num_micro_batches=None):
        self.module.eval()
        sched = ["LoadMicroBatch", "ForwardPass"]
        with torch.no_grad():
            #@475
            self._exec_schedule(sched)
        return torch.Tensor((), value=0.2031)

    #@760
    def _exec_forward_pass(self, buffer_id):
        self.tput_timer = None
        inputs = (torch.Tensor((1, 16, 1, 90, 160)), torch.Tensor((1, 512, 4096)), torch.Tensor((1,)))
        #@773
        outputs = super().forward(inputs)
        self.last_outputs = outputs

    #@830
    def _exec_backward_pass(self, buffer_id):
        outputs = self.last_outputs
        grad_tensors = None
        #@858
        torch.autograd.backward(tensors=(outputs, ), grad_tensors=(grad_tensors, ))

    def _exec_optimizer_step(self, lr_kwargs=None):
        _simharness.at("optimizer_step", self.global_steps)
        self.optimizer.step()

    #@1362
    def _exec_schedule(self, pipe_schedule):
        # Reserve and reset buffers.
        self._reserve_pipe_buffers(1) if hasattr(self, "_reserve_pipe_buffers") else None
        self.fwd_outputs = []

        # For each step in the schedule
        for step_cmds in [pipe_schedule]:
            # For each instruction in the step
            for cmd in step_cmds:
                if cmd == "LoadMicroBatch":
                    _simharness.tick(_simharness.knob("step_seconds", 11.8) * (0.2 if self.module.training else 0.1))
                    continue
                if cmd in ("ReduceGrads",):
                    continue
                # Equivalent to: self._exec_forward_pass(buffer_id=0)
                self._exec_instr = {"ForwardPass": self._exec_forward_pass,
                                    "BackwardPass": self._exec_backward_pass,
                                    "OptimizerStep": lambda buffer_id=0: self._exec_optimizer_step()}[cmd]
                _simharness.tick(_simharness.knob("step_seconds", 11.8) * 0.4)
                #@1388
                self._exec_instr(buffer_id=0)
'''

# ---------------------------------------------------------------- optimum-quanto
LIB["optimum/__init__.py"] = ""
LIB["optimum/quanto/__init__.py"] = r'''
from optimum.quanto.quantize import quantize, freeze  # noqa: F401


class qint8:
    name = "qint8"
    dtype = "int8"


qfloat8 = qint4 = qint8
'''

LIB["optimum/quanto/quantize.py"] = r'''
from optimum.quanto.nn.qmodule import QLinear


def quantize(model, weights=None, activations=None, optimizer=None, include=None, exclude=None):
    for name, m in list(model.named_modules()) if hasattr(model, "named_modules") else []:
        pass
    model._quanto_layers = [QLinear(weights) for _ in range(6)]


#@120
def freeze(model):
    for name, m in enumerate(getattr(model, "_quanto_layers", [])):
        if hasattr(m, "freeze"):
            #@124
            m.freeze()
'''

LIB["optimum/quanto/nn/__init__.py"] = ""
LIB["optimum/quanto/nn/qmodule.py"] = r'''
import torch

import _simharness
from optimum.quanto.tensor.weights.quantization import quantize_weight


class QLinear(torch.nn.Module):
    _layer = 0

    def __init__(self, weight_qtype):
        super().__init__()
        self.weight_qtype = weight_qtype
        self.weight = torch.nn.Parameter(torch.Tensor((3072, 3072)))
        QLinear._layer += 1
        self.index = QLinear._layer

    #@236
    @property
    def qweight(self):
        """Return the module quantized weight"""
        if self.weight_qtype is None or self.frozen if hasattr(self, "frozen") else False:
            # Quantization is disabled or the weights are already quantized
            return self.weight
        #@243
        return quantize_weight(
            self.weight,
            qtype=self.weight_qtype,
            axis=0,
            scale=None,
            activation_qtype=None,
            optimized=True,
        )

    #@272
    def freeze(self):
        _simharness.tick(1.7)
        _simharness.at("quantize_layer", self.index)
        #@279
        qweight = self.qweight
        self.frozen = True
'''

LIB["optimum/quanto/tensor/__init__.py"] = ""
LIB["optimum/quanto/tensor/weights/__init__.py"] = ""
LIB["optimum/quanto/tensor/weights/quantization.py"] = r'''
import torch
from torch._ops import quanto_quantize_symmetric


#@33
def quantize_weight(
    t,
    qtype,
    axis,
    scale=None,
    shift=None,
    group_size=None,
    activation_qtype=None,
    optimized=True,
):
    """Quantize a weight Tensor."""
    if qtype.name in ("qint8", "qfloat8"):
        #@71
        return quanto_quantize_symmetric(t, dtype=qtype.dtype, axis=axis, scale=scale)
    return t
'''

# ---------------------------------------------------------------- lightning
LIB["lightning_fabric/__init__.py"] = ""
LIB["lightning_fabric/utilities/__init__.py"] = ""
LIB["lightning_fabric/utilities/warnings.py"] = r'''
import os
import warnings

_default_format_warning = warnings.formatwarning


def _is_path_in_lightning(path):
    return "lightning" in str(path)


def _custom_format_warning(message, category, filename, lineno, line=None):
    """Custom formatting that avoids an extra line in case warnings are emitted from the `rank_zero`-functions."""
    if _is_path_in_lightning(filename):
        # The warning originates from the Lightning package
        return f"{filename}:{lineno}: {message}\n"
    return _default_format_warning(message, category, filename, lineno, line)


warnings.formatwarning = _custom_format_warning
'''

LIB["lightning/__init__.py"] = r'''
from lightning.pytorch import Trainer, LightningModule, seed_everything  # noqa: F401
from lightning import pytorch  # noqa: F401

__version__ = "2.5.0.post0"
'''

LIB["lightning/pytorch/__init__.py"] = r'''
import logging

import lightning_fabric.utilities.warnings  # noqa: F401

_root_logger = logging.getLogger()
_logger = logging.getLogger(__name__)
_logger.setLevel(logging.INFO)

if not _root_logger.hasHandlers():
    _logger.addHandler(logging.StreamHandler())
    _logger.propagate = False

from lightning.pytorch.core.module import LightningModule  # noqa: E402,F401
from lightning.pytorch.trainer.trainer import Trainer  # noqa: E402,F401
from lightning.pytorch.utilities.seed import seed_everything  # noqa: E402,F401
'''

LIB["lightning/pytorch/utilities/__init__.py"] = ""
LIB["lightning/pytorch/utilities/seed.py"] = r'''
import logging

log = logging.getLogger(__name__)


def seed_everything(seed=None, workers=False, verbose=True):
    if verbose:
        log.info(f"Seed set to {seed}")
    return seed
'''

LIB["lightning/pytorch/utilities/rank_zero.py"] = r'''
import logging
import warnings

log = logging.getLogger(__name__)


class PossibleUserWarning(UserWarning):
    pass


def rank_zero_info(*args, stacklevel=4, **kwargs):
    log.info(*args, stacklevel=stacklevel, **kwargs)


def rank_zero_warn(message, stacklevel=4, category=UserWarning, **kwargs):
    warnings.warn(message, category=category, stacklevel=stacklevel)
'''

LIB["lightning/pytorch/utilities/memory.py"] = r'''
import gc

import torch


def is_oom_error(exception):
    return is_cuda_out_of_memory(exception) or is_cudnn_snafu(exception) or is_out_of_cpu_memory(exception)


def is_cuda_out_of_memory(exception):
    return (
        isinstance(exception, RuntimeError)
        and len(exception.args) == 1
        and "CUDA" in exception.args[0]
        and "out of memory" in exception.args[0]
    )


def is_cudnn_snafu(exception):
    return isinstance(exception, RuntimeError) and len(exception.args) == 1 and \
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in exception.args[0]


def is_out_of_cpu_memory(exception):
    return isinstance(exception, RuntimeError) and len(exception.args) == 1 and \
        "DefaultCPUAllocator: can't allocate memory" in exception.args[0]


def garbage_collection_cuda():
    gc.collect()
    torch.cuda.empty_cache()
'''

LIB["lightning/pytorch/core/__init__.py"] = ""
LIB["lightning/pytorch/core/module.py"] = r'''
import torch


class LightningModule(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.trainer = None
        self._logged = {}

    def log(self, name, value, prog_bar=False, **kw):
        if prog_bar:
            self._logged[name] = float(value)

    def log_dict(self, d, **kw):
        for k, v in d.items():
            self.log(k, v, **kw)

    #@1080
    def backward(self, loss, *args, **kwargs):
        """Called to perform backward on the loss returned in :meth:`training_step`."""
        if self._fabric if hasattr(self, "_fabric") else False:
            self._fabric.backward(loss, *args, **kwargs)
        else:
            #@1105
            loss.backward(*args, **kwargs)

    #@1285
    def optimizer_step(
        self,
        epoch,
        batch_idx,
        optimizer,
        optimizer_closure=None,
    ):
        r"""Override this method to adjust the default way the :class:`~lightning.pytorch.trainer.trainer.Trainer` calls
        the optimizer.
        """
        #@1306
        optimizer.step(closure=optimizer_closure)
'''

LIB["lightning/pytorch/core/optimizer.py"] = r'''
class LightningOptimizer:
    def __init__(self, optimizer, strategy):
        self._optimizer = optimizer
        self._strategy = strategy

    #@105
    def step(self, closure=None, **kwargs):
        r"""Performs a single optimization step (parameter update)."""
        self._on_before_step() if hasattr(self, "_on_before_step") else None

        if closure is None:
            closure = lambda: None  # noqa: E731

        #@153
        step_output = self._strategy.optimizer_step(self._optimizer, closure, **kwargs)
        return step_output
'''

LIB["lightning/pytorch/plugins/__init__.py"] = ""
LIB["lightning/pytorch/plugins/precision/__init__.py"] = ""
LIB["lightning/pytorch/plugins/precision/precision.py"] = r'''
from functools import partial


class Precision:
    #@70
    def backward(self, tensor, model, optimizer, *args, **kwargs):
        r"""Performs the actual backpropagation."""
        #@80
        model.backward(tensor, *args, **kwargs)
        return tensor

    #@99
    def _wrap_closure(self, model, optimizer, closure):
        """This double-closure allows makes sure the ``closure`` is executed before the ``on_before_optimizer_step``
        hook is called.

        The closure (generally) runs ``backward`` so this allows inspecting gradients in this hook. This structure is
        consistent with the ``Precision`` subclasses that cannot pass ``optimizer.step(closure)`` directly.

        """
        #@108
        closure_result = closure()
        return closure_result

    #@111
    def optimizer_step(
        self,
        optimizer,
        model,
        closure,
        **kwargs,
    ):
        """Hook to run the optimizer step."""
        closure = partial(self._wrap_closure, model, optimizer, closure)
        #@122
        return optimizer.step(closure=closure, **kwargs)
'''

LIB["lightning/pytorch/strategies/__init__.py"] = ""
LIB["lightning/pytorch/strategies/strategy.py"] = r'''
from lightning.pytorch.plugins.precision.precision import Precision


class Strategy:
    def __init__(self, module=None):
        self.precision_plugin = Precision()
        self._lightning_module = module

    @property
    def lightning_module(self):
        return self._lightning_module

    #@205
    def backward(self, closure_loss, optimizer, *args, **kwargs):
        """Forwards backward-calls to the precision plugin."""
        #@211
        closure_loss = self.precision_plugin.backward(closure_loss, self.lightning_module, optimizer, *args, **kwargs)
        return closure_loss

    #@223
    def optimizer_step(
        self,
        optimizer,
        closure,
        model=None,
        **kwargs,
    ):
        r"""Performs the actual optimizer step."""
        model = model or self.lightning_module
        #@239
        return self.precision_plugin.optimizer_step(optimizer, model=model, closure=closure, **kwargs)

    #@380
    def training_step(self, *args, **kwargs):
        """The actual training step."""
        args, kwargs = self.precision_plugin.convert_input(args) if hasattr(self.precision_plugin, "convert_input") \
            else args, kwargs
        #@391
        return self.lightning_module.training_step(*args, **kwargs)

    #@400
    def validation_step(self, *args, **kwargs):
        """The actual validation step."""
        #@411
        return self.lightning_module.validation_step(*args, **kwargs)
'''

LIB["lightning/pytorch/trainer/__init__.py"] = ""
LIB["lightning/pytorch/trainer/call.py"] = r'''
import logging

log = logging.getLogger(__name__)


def _interrupt(trainer, exception):
    trainer.state_status = "interrupted"


#@30
def _call_and_handle_interrupt(trainer, trainer_fn, *args, **kwargs):
    r"""Error handling, intended to be used only for main trainer function entry points (fit, validate, test, predict)
    as all errors should funnel through them."""
    try:
        #@47
        return trainer_fn(*args, **kwargs)
    except KeyboardInterrupt as exception:
        rank_zero_info = log.info
        rank_zero_info("\nDetected KeyboardInterrupt, attempting graceful shutdown ...")
        raise
    except BaseException as exception:
        _interrupt(trainer, exception)
        trainer._teardown()
        # teardown might access the stage so we reset it after
        trainer.state_stage = None
        raise


#@157
def _call_lightning_module_hook(
    trainer,
    hook_name,
    *args,
    pl_module=None,
    **kwargs,
):
    pl_module = pl_module or trainer.lightning_module
    fn = getattr(pl_module, hook_name)
    if not callable(fn):
        return None
    prev_fx_name = pl_module._current_fx_name if hasattr(pl_module, "_current_fx_name") else None
    pl_module._current_fx_name = hook_name
    #@176
    output = fn(*args, **kwargs)
    # restore current_fx when nested context
    pl_module._current_fx_name = prev_fx_name
    return output


#@309
def _call_strategy_hook(
    trainer,
    hook_name,
    *args,
    **kwargs,
):
    pl_module = trainer.lightning_module
    prev_fx_name = pl_module._current_fx_name if hasattr(pl_module, "_current_fx_name") else None
    pl_module._current_fx_name = hook_name
    fn = getattr(trainer.strategy, hook_name)
    if not callable(fn):
        return None
    #@323
    output = fn(*args, **kwargs)
    # restore current_fx when nested context
    pl_module._current_fx_name = prev_fx_name
    return output
'''

LIB["lightning/pytorch/loops/__init__.py"] = ""
LIB["lightning/pytorch/loops/utilities.py"] = r'''
import functools

import torch


def _no_grad_context(loop_run):
    @functools.wraps(loop_run)
    #@173
    def _decorator(self, *args, **kwargs):
        context_manager = torch.no_grad
        with context_manager():
            #@182
            return loop_run(self, *args, **kwargs)

    return _decorator
'''

LIB["lightning/pytorch/loops/optimization/__init__.py"] = ""
LIB["lightning/pytorch/loops/optimization/automatic.py"] = r'''
from functools import partial

import torch

import _simharness
from lightning.pytorch.trainer import call


class Closure:
    def __init__(self, step_fn, backward_fn=None, zero_grad_fn=None):
        self._step_fn = step_fn
        self._backward_fn = backward_fn
        self._zero_grad_fn = zero_grad_fn
        self._result = None

    #@120
    @torch.enable_grad()
    def closure(self, *args, **kwargs):
        step_output = self._step_fn()

        if step_output is None:
            return None

        if self._backward_fn is not None and step_output is not None:
            #@137
            self._backward_fn(step_output)

        return step_output

    #@141
    def __call__(self, *args, **kwargs):
        #@146
        self._result = self.closure(*args, **kwargs)
        return self._result


class _AutomaticOptimization:
    def __init__(self, trainer):
        self.trainer = trainer

    #@174
    def run(self, optimizer, batch_idx, kwargs):
        closure = Closure(partial(self._training_step, kwargs), backward_fn=self._make_backward_fn(optimizer))
        # ------------------------------
        # BACKWARD PASS
        # ------------------------------
        # gradient update with accumulated gradients
        #@190
        self._optimizer_step(batch_idx, closure)

    def _make_backward_fn(self, optimizer):
        def backward_fn(loss):
            _simharness.at("backward", self.trainer.global_step)
            #@232
            call._call_strategy_hook(self.trainer, "backward", loss, optimizer)

        return backward_fn

    #@243
    def _optimizer_step(self, batch_idx, train_step_and_backward_closure):
        trainer = self.trainer
        # model hook
        #@268
        call._call_lightning_module_hook(
            trainer,
            "optimizer_step",
            trainer.current_epoch,
            batch_idx,
            trainer.lightning_optimizer,
            train_step_and_backward_closure,
        )

    #@305
    def _training_step(self, kwargs):
        """Performs the actual train step with the tied hooks."""
        trainer = self.trainer
        _simharness.at("train_step", trainer.global_step, epoch=trainer.current_epoch)
        _simharness.tick(_simharness.knob("step_seconds", 0.22))
        # manually capture logged metrics
        #@319
        training_step_output = call._call_strategy_hook(trainer, "training_step", *kwargs.values())
        return training_step_output
'''

LIB["lightning/pytorch/loops/evaluation_loop.py"] = r'''
import _simharness
from lightning.pytorch.loops.utilities import _no_grad_context
from lightning.pytorch.trainer import call


class _EvaluationLoop:
    def __init__(self, trainer, num_batches=5):
        self.trainer = trainer
        self.num_batches = num_batches

    #@110
    @_no_grad_context
    def run(self):
        trainer = self.trainer
        pb = trainer.progress_bar_callback
        if pb is not None:
            pb.on_validation_start(trainer, trainer.lightning_module)
        n = trainer.num_sanity_val_steps if trainer.sanity_checking else self.num_batches
        for batch_idx in range(n):
            if pb is not None:
                pb.on_validation_batch_start(trainer, trainer.lightning_module, None, batch_idx)
            _simharness.at("val_step", batch_idx, global_step=trainer.global_step, sanity=trainer.sanity_checking)
            _simharness.tick(0.31)
            # run step hooks
            #@145
            self._evaluation_step(batch_idx, batch_idx, 0, None)
            if pb is not None:
                pb.on_validation_batch_end(trainer, trainer.lightning_module, None, None, batch_idx)
        if pb is not None:
            if trainer.sanity_checking:
                pb.on_sanity_check_end(trainer, trainer.lightning_module)
            else:
                pb.on_validation_end(trainer, trainer.lightning_module)

    #@380
    def _evaluation_step(self, batch, batch_idx, dataloader_idx, dataloader_iter):
        trainer = self.trainer
        hook_name = "validation_step"
        step_args = (batch, batch_idx)
        #@437
        output = call._call_strategy_hook(trainer, hook_name, *step_args)
        return output
'''

LIB["lightning/pytorch/loops/training_epoch_loop.py"] = r'''
import _simharness
from lightning.pytorch.loops.optimization.automatic import _AutomaticOptimization


class _TrainingEpochLoop:
    def __init__(self, trainer):
        self.trainer = trainer
        self.automatic_optimization = _AutomaticOptimization(trainer)
        self.batch_idx = 0

    #@127
    def run(self, data_fetcher):
        self.reset() if hasattr(self, "reset") else None
        self.on_run_start(data_fetcher) if hasattr(self, "on_run_start") else None
        trainer = self.trainer
        self.batch_idx = 0
        while not self.done:
            try:
                #@140
                self.advance(data_fetcher)
                #@141
                self.on_advance_end(data_fetcher)
            except StopIteration:
                break

    @property
    def done(self):
        t = self.trainer
        return self.batch_idx >= t.num_training_batches or (t.max_steps > 0 and t.global_step >= t.max_steps)

    #@186
    def advance(self, data_fetcher):
        trainer = self.trainer
        batch_idx = self.batch_idx
        kwargs = {"batch": batch_idx, "batch_idx": batch_idx}
        #@250
        batch_output = self.automatic_optimization.run(trainer.optimizers[0], batch_idx, kwargs)
        trainer.global_step += 1
        self.batch_idx += 1
        if trainer.progress_bar_callback is not None:
            trainer.progress_bar_callback.on_train_batch_end(trainer, trainer.lightning_module, None, None, batch_idx)

    #@270
    def on_advance_end(self, data_fetcher):
        trainer = self.trainer
        vci = trainer.val_check_interval
        should_check_val = (self.batch_idx % vci == 0) if isinstance(vci, int) and vci > 0 else \
            self.batch_idx >= trainer.num_training_batches
        if should_check_val and trainer.limit_val_batches:
            # this needs to be set so the correct `trainer._active_loop` is picked
            trainer.training = False
            #@296
            trainer.fit_loop.epoch_loop.val_loop.run()
            trainer.training = True
'''

LIB["lightning/pytorch/loops/fit_loop.py"] = r'''
import logging

from lightning.pytorch.loops.evaluation_loop import _EvaluationLoop
from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop

log = logging.getLogger(__name__)


class _FitLoop:
    def __init__(self, trainer, max_epochs):
        self.trainer = trainer
        self.max_epochs = max_epochs
        self.epoch_loop = _TrainingEpochLoop(trainer)
        self.epoch_loop.val_loop = _EvaluationLoop(trainer, num_batches=trainer.limit_val_batches)
        self._data_fetcher = None

    @property
    def done(self):
        t = self.trainer
        if t.max_steps > 0 and t.global_step >= t.max_steps:
            log.info(f"`Trainer.fit` stopped: `max_steps={t.max_steps}` reached.")
            return True
        if t.current_epoch >= self.max_epochs:
            log.info(f"`Trainer.fit` stopped: `max_epochs={self.max_epochs}` reached.")
            return True
        return False

    #@196
    def run(self):
        self.setup_data() if hasattr(self, "setup_data") else None
        self.on_run_start() if hasattr(self, "on_run_start") else None
        while not self.done:
            try:
                self.on_advance_start()
                #@205
                self.advance()
                self.on_advance_end()
            except StopIteration:
                break
        self.on_run_end()

    def on_run_start(self):
        pb = self.trainer.progress_bar_callback
        if pb is not None:
            pb.on_train_start(self.trainer)

    def on_advance_start(self):
        pb = self.trainer.progress_bar_callback
        if pb is not None:
            pb.on_train_epoch_start(self.trainer)

    #@356
    def advance(self):
        """Runs one whole epoch."""
        log.debug(f"{type(self).__name__}: advancing loop")
        #@363
        self.epoch_loop.run(self._data_fetcher)

    def on_advance_end(self):
        pb = self.trainer.progress_bar_callback
        if pb is not None:
            pb.on_train_epoch_end(self.trainer, self.trainer.lightning_module)
        self.trainer.current_epoch += 1

    def on_run_end(self):
        pb = self.trainer.progress_bar_callback
        if pb is not None:
            pb.on_train_end(self.trainer)
'''

LIB["lightning/pytorch/callbacks/__init__.py"] = r'''
from lightning.pytorch.callbacks.progress.tqdm_progress import TQDMProgressBar  # noqa: F401
'''
LIB["lightning/pytorch/callbacks/progress/__init__.py"] = ""
LIB["lightning/pytorch/callbacks/progress/tqdm_progress.py"] = r'''
import math
import sys

from tqdm import tqdm as _tqdm

_PAD_SIZE = 5


class Tqdm(_tqdm):
    def __init__(self, *args, **kwargs):
        """Custom tqdm progressbar where we append 0 to floating points/strings to prevent the progress bar from
        flickering."""
        super().__init__(*args, **kwargs)

    @staticmethod
    def format_num(n):
        """Add additional padding to the formatted numbers."""
        should_be_padded = isinstance(n, (float, str))
        if not isinstance(n, str):
            n = _tqdm.format_num(n)
            assert isinstance(n, str)
        if should_be_padded and "e" not in n:
            if "." not in n and len(n) < _PAD_SIZE:
                try:
                    _ = float(n)
                except ValueError:
                    return n
                n += "."
            n += "0" * (_PAD_SIZE - len(n))
        return n


def convert_inf(x):
    if x is None or math.isinf(x) or math.isnan(x):
        return None
    return x


def _update_n(bar, value):
    if not bar.disable:
        bar.n = value
        bar.refresh()


class TQDMProgressBar:
    BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"

    def __init__(self, refresh_rate=1, process_position=0, leave=False):
        self._refresh_rate = refresh_rate
        self._process_position = process_position
        self._enabled = True
        self._train_progress_bar = None
        self._val_progress_bar = None
        self._leave = leave

    @property
    def train_progress_bar(self):
        return self._train_progress_bar

    @train_progress_bar.setter
    def train_progress_bar(self, bar):
        self._train_progress_bar = bar

    @property
    def val_progress_bar(self):
        return self._val_progress_bar

    @val_progress_bar.setter
    def val_progress_bar(self, bar):
        self._val_progress_bar = bar

    @property
    def is_disabled(self):
        return not self._enabled

    def disable(self):
        self._enabled = False

    def enable(self):
        self._enabled = True

    def _should_update(self, current, total):
        return self._enabled and (current % self._refresh_rate == 0 or current == total)

    def get_metrics(self, trainer, pl_module):
        items = {"v_num": trainer.v_num}
        items.update(pl_module._logged)
        return items

    def init_sanity_tqdm(self):
        return Tqdm(desc="Sanity Checking", position=(2 * self._process_position), disable=self.is_disabled,
                    leave=False, dynamic_ncols=True, file=sys.stdout, bar_format=self.BAR_FORMAT)

    def init_train_tqdm(self):
        return Tqdm(desc="Training", position=(2 * self._process_position), disable=self.is_disabled,
                    leave=True, dynamic_ncols=True, file=sys.stdout, smoothing=0, bar_format=self.BAR_FORMAT)

    def init_validation_tqdm(self):
        has_main_bar = True
        return Tqdm(desc="Validation", position=(2 * self._process_position + has_main_bar),
                    disable=self.is_disabled, leave=not has_main_bar, dynamic_ncols=True, file=sys.stdout,
                    bar_format=self.BAR_FORMAT)

    def on_sanity_check_start(self, *_):
        self.val_progress_bar = self.init_sanity_tqdm()
        self.train_progress_bar = Tqdm(disable=True)  # dummy progress bar

    def on_sanity_check_end(self, *_):
        self.val_progress_bar.close()
        self.train_progress_bar.close()

    def on_train_start(self, *_):
        self.train_progress_bar = self.init_train_tqdm()

    def on_train_epoch_start(self, trainer, *_):
        if self._leave:
            self.train_progress_bar = self.init_train_tqdm()
        total = convert_inf(trainer.num_training_batches)
        self.train_progress_bar.reset()
        self.train_progress_bar.total = total
        self.train_progress_bar.initial = 0
        self.train_progress_bar.set_description(f"Epoch {trainer.current_epoch}")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        n = batch_idx + 1
        if self.train_progress_bar is not None and self._should_update(n, self.train_progress_bar.total):
            _update_n(self.train_progress_bar, n)
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))

    def on_train_epoch_end(self, trainer, pl_module):
        if not self.train_progress_bar.disable:
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))
        if self._leave:
            self.train_progress_bar.close()

    def on_train_end(self, *_):
        self.train_progress_bar.close()

    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.val_progress_bar = self.init_validation_tqdm()

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        if batch_idx != 0:
            return
        total = trainer.num_sanity_val_steps if trainer.sanity_checking else trainer.limit_val_batches
        self.val_progress_bar.reset()
        self.val_progress_bar.total = total
        self.val_progress_bar.initial = 0
        desc = "Sanity Checking" if trainer.sanity_checking else "Validation"
        self.val_progress_bar.set_description(f"{desc} DataLoader {dataloader_idx}")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        n = batch_idx + 1
        if self.val_progress_bar is not None and self._should_update(n, self.val_progress_bar.total):
            _update_n(self.val_progress_bar, n)

    def on_validation_end(self, trainer, pl_module):
        self.val_progress_bar.close()
        if self._train_progress_bar is not None:
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))
'''

LIB["lightning/pytorch/tuner/__init__.py"] = r'''
from lightning.pytorch.tuner.tuning import Tuner  # noqa: F401
'''
LIB["lightning/pytorch/tuner/tuning.py"] = r'''
from lightning.pytorch.tuner.batch_size_scaling import _scale_batch_size


class Tuner:
    def __init__(self, trainer):
        self._trainer = trainer

    def scale_batch_size(self, model, mode="power", steps_per_trial=3, init_val=2, max_trials=25,
                         batch_arg_name="batch_size"):
        return _scale_batch_size(self._trainer, model, mode, steps_per_trial, init_val, max_trials, batch_arg_name)
'''
LIB["lightning/pytorch/tuner/batch_size_scaling.py"] = r'''
import logging
import os

import _simharness
from lightning.pytorch.utilities.memory import garbage_collection_cuda, is_oom_error
from lightning.pytorch.utilities.rank_zero import rank_zero_info

log = logging.getLogger(__name__)


def _adjust_batch_size(trainer, model, batch_arg_name="batch_size", factor=1.0, value=None, desc=None):
    batch_size = getattr(model, batch_arg_name)
    new_size = value if value is not None else int(batch_size * factor)
    if desc:
        rank_zero_info(f"Batch size {batch_size} {desc}, trying batch size {new_size}")
    setattr(model, batch_arg_name, new_size)
    return new_size, new_size != batch_size


def _try_loop_run(trainer, model, steps_per_trial):
    bs = getattr(model, "batch_size")
    for step in range(steps_per_trial):
        _simharness.at("bs_trial", step, bs=bs)
        _simharness.tick(0.05 * bs)
        model.training_step(None, step)


def _scale_batch_size(trainer, model, mode, steps_per_trial, init_val, max_trials, batch_arg_name):
    ckpt_path = os.path.join(trainer.default_root_dir, f".scale_batch_size_{_simharness.knob('ckpt_uuid')}.ckpt")
    if trainer.progress_bar_callback:
        trainer.progress_bar_callback.disable()
    try:
        new_size, _ = _adjust_batch_size(trainer, model, batch_arg_name, value=init_val)
        any_success = False
        for i in range(max_trials):
            garbage_collection_cuda()
            try:
                _try_loop_run(trainer, model, steps_per_trial)
                new_size, changed = _adjust_batch_size(trainer, model, batch_arg_name, factor=2.0, desc="succeeded")
                any_success = True
            except RuntimeError as exception:
                if is_oom_error(exception):
                    # If we fail in power mode, half the size and return
                    garbage_collection_cuda()
                    new_size, _ = _adjust_batch_size(trainer, model, batch_arg_name, factor=0.5, desc="failed")
                    if any_success:
                        break
                else:
                    raise  # some other error not memory related
        garbage_collection_cuda()
        log.info(f"Finished batch size finder, will continue with full run using batch size {new_size}")
    finally:
        if trainer.progress_bar_callback:
            trainer.progress_bar_callback.enable()
        log.info(f"Restoring states from the checkpoint path at {ckpt_path}")
        log.info(f"Restored all states from the checkpoint at {ckpt_path}")
    return new_size
'''

LIB["lightning/pytorch/trainer/trainer.py"] = r'''
import logging
import os

import torch

import _simharness
from lightning.pytorch.callbacks.progress.tqdm_progress import TQDMProgressBar
from lightning.pytorch.core.optimizer import LightningOptimizer
from lightning.pytorch.loops.fit_loop import _FitLoop
from lightning.pytorch.strategies.strategy import Strategy
from lightning.pytorch.trainer import call
from lightning.pytorch.utilities.rank_zero import PossibleUserWarning, rank_zero_info, rank_zero_warn

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, accelerator="auto", devices="auto", precision=None, max_epochs=None, max_steps=-1,
                 val_check_interval=None, limit_val_batches=5, num_sanity_val_steps=2, default_root_dir=None,
                 enable_progress_bar=True, **kw):
        self.max_epochs = max_epochs if max_epochs is not None else 1000
        self.max_steps = max_steps
        self.val_check_interval = val_check_interval
        self.limit_val_batches = limit_val_batches
        self.num_sanity_val_steps = num_sanity_val_steps
        self.default_root_dir = default_root_dir or os.getcwd()
        self.progress_bar_callback = TQDMProgressBar() if enable_progress_bar else None
        self.global_step = 0
        self.current_epoch = 0
        self.sanity_checking = False
        self.training = True
        self.v_num = 0
        if precision in ("bf16-mixed",):
            rank_zero_info("Using bf16 Automatic Mixed Precision (AMP)")
        rank_zero_info("GPU available: True (cuda), used: True")
        rank_zero_info("TPU available: False, using: 0 TPU cores")
        rank_zero_info("HPU available: False, using: 0 HPUs")

    def _teardown(self):
        return None

    @property
    def lightning_module(self):
        return self.strategy.lightning_module

    #@500
    def fit(self, model, train_dataloaders=None, val_dataloaders=None, datamodule=None, ckpt_path=None):
        r"""Runs the full optimization routine."""
        self.strategy = Strategy(model)
        model.trainer = self
        self.num_training_batches = _simharness.knob("batches_per_epoch", 100)
        #@538
        call._call_and_handle_interrupt(
            self, self._fit_impl, model, train_dataloaders, val_dataloaders, datamodule, ckpt_path
        )

    #@545
    def _fit_impl(self, model, train_dataloaders=None, val_dataloaders=None, datamodule=None, ckpt_path=None):
        log.debug(f"{self.__class__.__name__}: trainer fit stage")
        #@574
        self._run(model, ckpt_path=ckpt_path)

    #@920
    def _run(self, model, ckpt_path=None):
        rank_zero_info("You are using a CUDA device ('NVIDIA GeForce RTX 4090') that has Tensor Cores. To properly "
                       "utilize them, you should set `torch.set_float32_matmul_precision('medium' | 'high')` which "
                       "will trade-off precision for performance. For more details, read https://pytorch.org/docs/"
                       "stable/generated/torch.set_float32_matmul_precision.html#torch.set_float32_matmul_precision")
        rank_zero_info("LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]")
        self.optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-4)]
        self.lightning_optimizer = LightningOptimizer(self.optimizers[0], self.strategy)
        self.fit_loop = _FitLoop(self, self.max_epochs)
        self._log_summary(model)
        #@981
        results = self._run_stage()
        return results

    def _log_summary(self, model):
        for line in _simharness.knob("model_summary", []):
            log.info(line)

    #@1010
    def _run_stage(self):
        if self.num_sanity_val_steps > 0:
            #@1023
            self._run_sanity_check()
        #@1025
        self.fit_loop.run()

    #@1080
    def _run_sanity_check(self):
        self.sanity_checking = True
        pb = self.progress_bar_callback
        if pb is not None:
            pb.on_sanity_check_start(self, self.lightning_module)
        self._warn_workers("val_dataloader")
        #@1108
        self.fit_loop.epoch_loop.val_loop.run()
        self.sanity_checking = False
        self._warn_workers("train_dataloader")

    def _warn_workers(self, name):
        import lightning.pytorch.trainer.connectors.data_connector as dc
        dc._check_dataloader_iterable(name)
'''

LIB["lightning/pytorch/trainer/connectors/__init__.py"] = ""
LIB["lightning/pytorch/trainer/connectors/data_connector.py"] = r'''
from lightning.pytorch.utilities.rank_zero import PossibleUserWarning, rank_zero_warn


def _worker_check(name):
    #@425
    rank_zero_warn(
        f"The '{name}' does not have many workers which may be a bottleneck. Consider increasing the value of the "
        f"`num_workers` argument` to `num_workers=15` in the `DataLoader` to improve performance.",
        category=PossibleUserWarning,
        stacklevel=2,
    )


def _check_dataloader_iterable(name):
    _worker_check(name)
'''

LIB["transformers/models/t5/__init__.py"] = ""
LIB["transformers/models/t5/modeling_t5.py"] = r'''
import torch
from torch import nn

from transformers.modeling_utils import PreTrainedModel


class T5DenseGatedActDense(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.wi_0 = nn.Linear(4096, 10240, bias=False)
        self.wi_1 = nn.Linear(4096, 10240, bias=False)
        self.wo = nn.Linear(10240, 4096, bias=False)
        self.act = nn.functional.gelu

    #@310
    def forward(self, hidden_states):
        #@311
        hidden_gelu = self.act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5LayerFF(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.DenseReluDense = T5DenseGatedActDense(config)

    #@340
    def forward(self, hidden_states):
        forwarded_states = hidden_states
        #@342
        forwarded_states = self.DenseReluDense(forwarded_states)
        hidden_states = hidden_states + forwarded_states
        return hidden_states


class T5Block(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.layer = nn.ModuleList([T5LayerFF(config)])

    #@680
    def forward(self, hidden_states, attention_mask=None, position_bias=None, **kwargs):
        # Apply Feed Forward layer
        #@773
        hidden_states = self.layer[-1](hidden_states)
        return (hidden_states, position_bias)


class T5Stack(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.block = nn.ModuleList([T5Block(config) for _ in range(4)])

    #@975
    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, **kwargs):
        hidden_states = torch.Tensor((1, 512, 4096))
        position_bias = None
        for i, layer_module in enumerate(self.block):
            #@1106
            layer_outputs = layer_module(
                hidden_states,
                attention_mask=attention_mask,
                position_bias=position_bias,
            )
            hidden_states = layer_outputs[0]
        return (hidden_states,)


class T5EncoderModel(PreTrainedModel):
    def __init__(self, config=None):
        super().__init__(config)
        self.encoder = T5Stack(config)

    #@1950
    def forward(self, input_ids=None, attention_mask=None, head_mask=None, inputs_embeds=None,
                output_attentions=None, output_hidden_states=None, return_dict=None):
        #@1983
        encoder_outputs = self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
        )
        return encoder_outputs
'''

# ---------------------------------------------------------------- mgds (OneTrainer's data pipeline)
LIB["mgds/__init__.py"] = ""
LIB["mgds/PipelineModule.py"] = r'''
class PipelineModule:
    def __init__(self):
        self._previous = None

    #@90
    def _get_previous_item(self, variation, name, index):
        #@95
        return self._previous.get_item(variation, index, name)
'''

LIB["mgds/pipelineModules/__init__.py"] = ""
LIB["mgds/pipelineModules/EncodeVAE.py"] = r'''
import torch

import _simharness
from mgds.PipelineModule import PipelineModule


class _ImageSource:
    def get_item(self, variation, index, name):
        return torch.Tensor((3, 1024, 1024))


class EncodeVAE(PipelineModule):
    def __init__(self, vae):
        super().__init__()
        self.vae = vae
        self._previous = _ImageSource()

    #@40
    def get_item(self, variation, index, requested_name=None):
        image = self._get_previous_item(variation, "image", index)
        _simharness.at("encode_vae", index)
        _simharness.tick(0.38)
        with torch.no_grad():
            #@51
            latent_distribution = self.vae.encode(image.unsqueeze(0)).latent_dist
        return {"latent_image_distribution": latent_distribution}
'''

LIB["mgds/pipelineModules/DiskCache.py"] = r'''
from tqdm import tqdm

from mgds.PipelineModule import PipelineModule


class DiskCache(PipelineModule):
    def __init__(self, source, length):
        super().__init__()
        self._previous = source
        self.length = length

    #@120
    def __refresh_cache(self, variation):
        for index in tqdm(range(self.length), desc="caching"):
            #@141
            self.__cache_item(variation, index)

    #@150
    def __cache_item(self, variation, index):
        #@156
        item = self._get_previous_item(variation, "latent_image_distribution", index)

    #@200
    def start(self, variation):
        #@203
        self.__refresh_cache(variation)
'''

LIB["mgds/MGDS.py"] = r'''
class MGDS:
    def __init__(self, modules):
        self.modules = modules

    #@60
    def start_next_epoch(self):
        for module in self.modules:
            #@66
            module.start(0)

    def approximate_length(self):
        return 0
'''


# --------------------------------------------------------------------------------------------------
# Simulated trainers, at the real projects' paths (relative to the temp root; see PATH_MAP)
# --------------------------------------------------------------------------------------------------
TREE = {}

# ---------------------------------------------------------------- kohya-ss/sd-scripts
KOHYA = "home/sd-scripts/"

TREE[KOHYA + "library/__init__.py"] = ""
TREE[KOHYA + "library/utils.py"] = r'''
import logging
import sys


#@80
def setup_logging(args=None, log_level=None, reset=False):
    if logging.root.handlers:
        if reset:
            # remove all handlers
            for handler in logging.root.handlers[:]:
                logging.root.removeHandler(handler)
        else:
            return

    # log_level can be set by the caller or by the args, the caller has priority. If not set, use INFO
    if log_level is None and args is not None:
        log_level = args.console_log_level
    if log_level is None:
        log_level = "INFO"
    log_level = getattr(logging, log_level)

    msg_init = None
    if args is not None and args.console_log_file:
        handler = logging.FileHandler(args.console_log_file, mode="w")
    else:
        handler = None
        if not args or not args.console_log_simple:
            try:
                from rich.logging import RichHandler
                from rich.console import Console
                from rich.logging import RichHandler

                handler = RichHandler(console=Console(stderr=True))
            except ImportError:
                # print("rich is not installed, using basic logging")
                msg_init = "rich is not installed, using basic logging"

        if handler is None:
            handler = logging.StreamHandler(sys.stdout)  # same as print
            handler.propagate = False

    formatter = logging.Formatter(
        fmt="%(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
    )
    handler.setFormatter(formatter)
    logging.root.setLevel(log_level)
    logging.root.addHandler(handler)

    if msg_init is not None:
        logger = logging.getLogger(__name__)
        logger.info(msg_init)
'''

TREE[KOHYA + "library/train_util.py"] = r'''
import logging
import math
import os

import torch
from tqdm import tqdm

import _simharness
from library.utils import setup_logging

setup_logging()
logger = logging.getLogger(__name__)


class DatasetGroup:
    def __init__(self, n_images, batch_size=1):
        self.n_images = n_images
        self.batch_size = batch_size

    #@2290
    def new_cache_latents(self, model, accelerator):
        logger.info("caching latents.")
        logger.info("checking cache validity...")
        for _ in tqdm(range(self.n_images)):
            _simharness.tick(0.004)
        batches = [list(range(i, min(i + self.batch_size, self.n_images)))
                   for i in range(0, self.n_images, self.batch_size)]
        logger.info("caching latents...")
        from library import strategy_sd
        caching_strategy = strategy_sd.SdSdxlLatentsCachingStrategy()
        for condition, batch in tqdm([(None, b) for b in batches], smoothing=1, total=len(batches)):
            _simharness.at("cache_latents", batch[0])
            _simharness.tick(0.41)
            #@2349
            caching_strategy.cache_batch_latents(model, batch, False, False, False)

    #@2380
    def new_cache_text_encoder_outputs(self, models, accelerator):
        logger.info("caching Text Encoder outputs with caching strategy.")
        logger.info("checking cache validity...")
        for _ in tqdm(range(self.n_images)):
            _simharness.tick(0.004)
        batches = [list(range(i, min(i + self.batch_size, self.n_images)))
                   for i in range(0, self.n_images, self.batch_size)]
        logger.info("caching Text Encoder outputs...")
        from library import strategy_flux
        caching_strategy = strategy_flux.FluxTextEncoderOutputsCachingStrategy()
        for batch in tqdm(batches):
            _simharness.at("cache_te", batch[0])
            _simharness.tick(0.57)
            #@2417
            caching_strategy.cache_batch_outputs(None, models, None, batch)


def prepare_dataset_logs(n_images, repeats, reso):
    logger.info(f"Loading settings from {_simharness.knob('config_file', 'config.toml')}...")
    logger.info("prepare tokenizers")
    logger.info("Using DreamBooth method.")
    logger.info("prepare images.")
    logger.info(f"found directory /data/train/{repeats}_sks woman contains {n_images} image files")
    logger.info(f"{n_images * repeats} train images with repeating.")
    logger.info("0 reg images.")
    logger.warning("no regularization images / 正則化画像が見つかりませんでした")
    logger.info(f"""[Dataset 0]
  batch_size: 1
  resolution: {reso}
  enable_bucket: True
  network_multiplier: 1.0
  min_bucket_reso: 256
  max_bucket_reso: 2048
  bucket_reso_steps: 64
  bucket_no_upscale: True

  [Subset 0 of Dataset 0]
    image_dir: "/data/train/{repeats}_sks woman"
    image_count: {n_images}
    num_repeats: {repeats}
    shuffle_caption: False
    keep_tokens: 0
    caption_extension: .txt
""")
    logger.info("[Dataset 0]")
    logger.info("loading image sizes.")
    for _ in tqdm(range(n_images)):
        _simharness.tick(0.002)
    logger.info("make buckets")
    logger.info("number of images (including repeats) / 各bucketの画像枚数（繰り返し回数を含む）")
    logger.info(f"bucket 0: resolution {reso}, count: {n_images * repeats}")
    logger.info("mean ar error (without repeats): 0.0")


#@6330
def sample_images_common(pipe_class, accelerator, args, epoch, steps, device, vae, tokenizer, text_encoder, unet,
                         prompt_replacement=None, controlnet=None):
    if steps == 0:
        if not args.sample_at_first:
            return
    else:
        if args.sample_every_n_steps is None and args.sample_every_n_epochs is None:
            return
        if args.sample_every_n_epochs is not None:
            # sample_every_n_steps は無視する
            if epoch is None or epoch % args.sample_every_n_epochs != 0:
                return
        else:
            if steps % args.sample_every_n_steps != 0 or epoch is not None:  # steps is not divisible or end of epoch
                return

    #@6393
    logger.info("")
    logger.info(f"generating sample images at step / サンプル画像生成 ステップ: {steps}")
'''

TREE[KOHYA + "library/strategy_base.py"] = r'''
import torch


class LatentsCachingStrategy:
    #@420
    def _default_cache_batch_latents(self, encode_by_vae, vae_device, vae_dtype, image_infos, flip_aug, alpha_mask,
                                     random_crop, multi_resolution=False):
        img_tensor = torch.Tensor((len(image_infos), 3, 1024, 1024))
        with torch.no_grad():
            #@458
            latents_tensors = encode_by_vae(img_tensor).to("cpu")
        return latents_tensors
'''

TREE[KOHYA + "library/strategy_sd.py"] = r'''
from library.strategy_base import LatentsCachingStrategy


class SdSdxlLatentsCachingStrategy(LatentsCachingStrategy):
    #@150
    def cache_batch_latents(self, vae, image_infos, flip_aug, alpha_mask, random_crop):
        encode_by_vae = lambda img_tensor: vae.encode(img_tensor).latent_dist.sample()
        vae_device = vae.device if hasattr(vae, "device") else "cuda"
        vae_dtype = vae.dtype
        #@155
        self._default_cache_batch_latents(encode_by_vae, vae_device, vae_dtype, image_infos, flip_aug, alpha_mask,
                                          random_crop)
'''

TREE[KOHYA + "library/strategy_flux.py"] = r'''
import torch


class FluxTextEncodingStrategy:
    #@60
    def encode_tokens(self, tokenize_strategy, models, tokens, apply_t5_attn_mask=False):
        clip_l, t5xxl = models
        l_tokens, t5_tokens = torch.Tensor((1, 77)), torch.Tensor((1, 512))
        l_pooled = torch.Tensor((1, 768))
        if t5xxl is not None and t5_tokens is not None:
            #@81
            t5_out = t5xxl(t5_tokens.to(t5xxl.device), return_dict=False, output_hidden_states=True)[0]
        return [l_pooled, t5_out, None, None]


class FluxTextEncoderOutputsCachingStrategy:
    #@150
    def cache_batch_outputs(self, tokenize_strategy, models, text_encoding_strategy, infos):
        flux_text_encoding_strategy = FluxTextEncodingStrategy()
        captions = [f"photo of sks woman {i}" for i in infos]
        tokens_and_masks = None
        with torch.no_grad():
            # attn_mask is applied in text_encoding_strategy.encode_tokens if apply_t5_attn_mask is True
            #@172
            l_pooled, t5_out, txt_ids, _ = flux_text_encoding_strategy.encode_tokens(tokenize_strategy, models,
                                                                                      tokens_and_masks)
'''

TREE[KOHYA + "library/sdxl_original_unet.py"] = r'''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class CrossAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.to_q = nn.Linear(1280, 1280, bias=False)

    #@441
    def forward(self, hidden_states, context=None, mask=None):
        #@452
        return self.forward_sdpa(hidden_states, context, mask)

    #@505
    def forward_sdpa(self, x, context=None, mask=None):
        q_in = self.to_q(x)
        q = k = v = q_in
        #@519
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
        return out


class BasicTransformerBlock(nn.Module):
    gradient_checkpointing = True

    def __init__(self):
        super().__init__()
        self.attn1 = CrossAttention()

    #@598
    def forward_body(self, hidden_states, context=None, timestep=None):
        # 1. Self-Attention
        norm_hidden_states = hidden_states
        #@602
        hidden_states = self.attn1(norm_hidden_states) + hidden_states
        return hidden_states

    #@620
    def forward(self, hidden_states, context=None, timestep=None):
        if self.training and self.gradient_checkpointing:
            # print("BasicTransformerBlock: checkpointing")
            #@627
            output = torch.utils.checkpoint.checkpoint(self.forward_body, hidden_states, context, timestep, use_reentrant=False)
        else:
            output = self.forward_body(hidden_states, context, timestep)
        return output


class Transformer2DModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock() for _ in range(2)])

    #@690
    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None):
        for block in self.transformer_blocks:
            #@714
            hidden_states = block(hidden_states, context=encoder_hidden_states, timestep=timestep)
        return hidden_states


class SdxlUNet2DConditionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_blocks = nn.ModuleList([nn.ModuleList([Transformer2DModel()]) for _ in range(3)])
        self.dtype = torch.bfloat16
        self.device = torch.device("cuda", 0)

    #@1080
    def forward(self, x, timesteps=None, context=None, y=None, **kwargs):
        emb = None

        def call_module(module, h, emb, context):
            x = h
            for layer in module:
                if isinstance(layer, Transformer2DModel):
                    #@1099
                    x = layer(x, context)
                else:
                    x = layer(x)
            return x

        h = x
        for module in self.input_blocks:
            #@1115
            h = call_module(module, h, emb, context)
        return h
'''

TREE[KOHYA + "library/flux_models.py"] = r'''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Upsample(nn.Module):
    def __init__(self, in_channels=512):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, in_channels, 3, padding=1)

    #@246
    def forward(self, x):
        #@247
        x = nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")
        x = self.conv(x)
        return x


class _UpLevel(nn.Module):
    def __init__(self):
        super().__init__()
        self.upsample = Upsample()


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ModuleList([_UpLevel() for _ in range(4)])

    #@382
    def forward(self, z):
        h = z
        for i_level in reversed(range(4)):
            if i_level != 0:
                #@402
                h = self.up[i_level].upsample(h)
        return h


#@445
def attention(q, k, v, pe, attn_mask=None):
    q, k = q, k
    #@448
    x = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    return x


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = Decoder()
        self.dtype = torch.bfloat16

    #@470
    def decode(self, z):
        z = z / 0.3611 + 0.1159
        #@472
        return self.decoder(z)


class DoubleStreamBlock(nn.Module):
    gradient_checkpointing = True

    def __init__(self):
        super().__init__()
        self.img_attn_qkv = nn.Linear(3072, 9216)

    #@730
    def _forward(self, img, txt, vec, pe, txt_attention_mask=None):
        img_qkv = self.img_attn_qkv(img)
        q = k = v = img_qkv
        attn_mask = txt_attention_mask
        #@773
        attn = attention(q, k, v, pe=pe, attn_mask=attn_mask)
        return img, txt

    #@800
    def forward(self, img, txt, vec, pe, txt_attention_mask=None):
        if self.training and self.gradient_checkpointing:
            #@805
            return checkpoint(self._forward, img, txt, vec, pe, txt_attention_mask, use_reentrant=False)
        else:
            return self._forward(img, txt, vec, pe, txt_attention_mask)


class Flux(nn.Module):
    def __init__(self):
        super().__init__()
        self.double_blocks = nn.ModuleList([DoubleStreamBlock() for _ in range(4)])
        self.dtype = torch.bfloat16
        self.device = torch.device("cuda", 0)

    #@1000
    def forward(self, img, img_ids, txt, txt_ids, timesteps, y, guidance=None, txt_attention_mask=None):
        vec = pe = None
        for block_idx, block in enumerate(self.double_blocks):
            #@1047
            img, txt = block(img=img, txt=txt, vec=vec, pe=pe, txt_attention_mask=txt_attention_mask)
        return img
'''

TREE[KOHYA + "library/flux_train_utils.py"] = r'''
import logging

import torch
from tqdm import tqdm

import _simharness

logger = logging.getLogger(__name__)


#@40
def sample_images(accelerator, args, epoch, steps, flux, ae, text_encoders, sample_prompts_te_outputs,
                  prompt_replacement=None, controlnet=None):
    if steps == 0:
        if not args.sample_at_first:
            return
    else:
        if args.sample_every_n_steps is None and args.sample_every_n_epochs is None:
            return
        if args.sample_every_n_epochs is not None:
            # sample_every_n_steps は無視する
            if epoch is None or epoch % args.sample_every_n_epochs != 0:
                return
        else:
            if steps % args.sample_every_n_steps != 0 or epoch is not None:  # steps is not divisible or end of epoch
                return

    #@58
    logger.info("")
    logger.info(f"generating sample images at step / サンプル画像生成 ステップ: {steps}")
    prompts = _simharness.knob("sample_prompts", [])
    for prompt_dict in prompts:
        #@115
        sample_image_inference(
            accelerator, args, flux, text_encoders, ae, args.output_dir, prompt_dict, epoch, steps,
            sample_prompts_te_outputs, prompt_replacement, controlnet
        )


#@150
def sample_image_inference(accelerator, args, flux, text_encoders, ae, save_dir, prompt_dict, epoch, steps,
                           sample_prompts_te_outputs, prompt_replacement, controlnet):
    sample_steps = prompt_dict.get("sample_steps", 20)
    width = prompt_dict.get("width", 512)
    height = prompt_dict.get("height", 512)
    scale = prompt_dict.get("scale", 3.5)
    seed = prompt_dict.get("seed")
    prompt = prompt_dict.get("prompt", "")
    logger.info(f"prompt: {prompt}")
    logger.info(f"height: {height}")
    logger.info(f"width: {width}")
    logger.info(f"sample_steps: {sample_steps}")
    logger.info(f"embedded guidance scale: {scale}")
    if seed is not None:
        logger.info(f"seed: {seed}")
    noise = torch.Tensor((1, 4096, 64))
    timesteps = [1.0 - i / sample_steps for i in range(sample_steps + 1)]
    with accelerator.autocast(), torch.no_grad():
        #@237
        x = denoise(flux, noise, None, None, None, None, timesteps=timesteps, guidance=scale, t5_attn_mask=None)
    _simharness.at("sample_decode", steps)
    with accelerator.autocast():
        #@251
        x = ae.decode(x)


#@280
def denoise(model, img, img_ids, txt, txt_ids, vec, timesteps, guidance=4.0, t5_attn_mask=None):
    for t_curr, t_prev in zip(tqdm(timesteps[:-1]), timesteps[1:]):
        _simharness.tick(0.74)
        _simharness.at("sample_step", None)
        t_vec = torch.Tensor((1,), value=t_curr)
        model.prepare_block_swap_before_forward() if hasattr(model, "prepare_block_swap_before_forward") else None
        #@301
        pred = model(img=img, img_ids=img_ids, txt=txt, txt_ids=txt_ids, y=vec, timesteps=t_vec, guidance=None,
                     txt_attention_mask=t5_attn_mask)
        img = img + (t_prev - t_curr) * pred
    return img
'''

TREE[KOHYA + "train_network.py"] = r'''
import argparse
import logging
import math
import os
import time

import torch
from accelerate import Accelerator
from tqdm import tqdm

import _simharness
from library import train_util
from library.utils import setup_logging

setup_logging()
logger = logging.getLogger(__name__)


class LossRecorder:
    def __init__(self):
        self.loss_list = []
        self.loss_total = 0.0

    def add(self, *, epoch, step, loss):
        self.loss_list.append(loss)
        self.loss_total += loss
        if len(self.loss_list) > 20:
            self.loss_total -= self.loss_list.pop(0)

    @property
    def moving_average(self):
        return self.loss_total / len(self.loss_list)


class NetworkTrainer:
    def __init__(self):
        self.vae_scale_factor = 0.18215
        self.is_sdxl = False

    def load_target_model(self, args, weight_dtype, accelerator):
        raise NotImplementedError

    def cache_text_encoder_outputs_if_needed(self, args, accelerator, unet, vae, text_encoders, dataset, weight_dtype):
        return None

    def sample_images(self, accelerator, args, epoch, global_step, device, vae, tokenizers, text_encoder, unet):
        train_util.sample_images_common(None, accelerator, args, epoch, global_step, device, vae, tokenizers,
                                        text_encoder, unet)

    #@380
    def get_noise_pred_and_target(self, args, accelerator, noise_scheduler, latents, batch, text_encoder_conds, unet,
                                  network, weight_dtype, train_unet, is_train=True):
        noisy_latents = latents
        timesteps = torch.Tensor((1,))
        # Predict the noise residual
        with torch.set_grad_enabled(is_train), accelerator.autocast():
            #@402
            noise_pred = self.call_unet(
                args,
                accelerator,
                unet,
                noisy_latents.requires_grad_(train_unet),
                timesteps,
                text_encoder_conds,
                batch,
                weight_dtype,
            )
        target = latents
        return noise_pred, target, timesteps, None

    #@440
    def process_batch(self, batch, text_encoders, unet, network, vae, noise_scheduler, vae_dtype, weight_dtype,
                      accelerator, args, text_encoding_strategy=None, tokenize_strategy=None, is_train=True,
                      train_text_encoder=True, train_unet=True):
        with torch.no_grad():
            latents = batch["latents"].to(accelerator.device)
        text_encoder_conds = batch.get("text_encoder_outputs_list")
        # sample noise, call unet, get target
        #@474
        noise_pred, target, timesteps, weighting = self.get_noise_pred_and_target(
            args,
            accelerator,
            noise_scheduler,
            latents,
            batch,
            text_encoder_conds,
            unet,
            network,
            weight_dtype,
            train_unet,
            is_train=is_train,
        )
        loss = torch.nn.functional.mse_loss(noise_pred.float(), target.float(), reduction="none")
        loss = loss.mean()  # 平均なのでbatch_sizeで割る必要なし
        return loss

    #@520
    def train(self, args):
        session_id = 1001
        training_started_at = time.time()
        setup_logging(args, reset=True)
        cache_latents = args.cache_latents
        n_images = _simharness.knob("images", 20)
        repeats = _simharness.knob("repeats", 10)
        train_util.prepare_dataset_logs(n_images, repeats, _simharness.knob("resolution", "(1024, 1024)"))
        train_dataset_group = train_util.DatasetGroup(n_images)
        # acceleratorを準備する
        logger.info("preparing accelerator")
        accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
        weight_dtype, save_dtype = torch.bfloat16, torch.bfloat16
        vae_dtype = torch.float32
        model_version, text_encoder, vae, unet = self.load_target_model(args, weight_dtype, accelerator)
        text_encoders = text_encoder if isinstance(text_encoder, list) else [text_encoder]

        # 学習を準備する
        if cache_latents:
            vae.to(accelerator.device, dtype=vae_dtype)
            vae.requires_grad_(False)
            vae.eval()
            #@664
            train_dataset_group.new_cache_latents(vae, accelerator)
            vae.to("cpu")
            accelerator.wait_for_everyone()

        # 必要ならテキストエンコーダーの出力をキャッシュする: Text Encoderはcpuまたはgpuへ移される
        # cache text encoder outputs if needed: Text Encoder is moved to cpu or gpu
        #@672
        self.cache_text_encoder_outputs_if_needed(args, accelerator, unet, vae, text_encoders, train_dataset_group,
                                                  weight_dtype)

        # prepare network
        accelerator.print("import network module:", args.network_module)
        dim = args.network_dim
        logger.info(f"create LoRA network. base dim (rank): {dim}, alpha: {args.network_alpha}")
        logger.info("neuron dropout: p=None, rank dropout: p=None, module dropout: p=None")
        for line in _simharness.knob("lora_modules", []):
            logger.info(line)

        # 学習に必要なクラスを準備する
        accelerator.print("prepare optimizer, data loader etc.")
        params = [torch.nn.Parameter(torch.Tensor((dim, 1280))) for _ in range(4)]
        optimizer = torch.optim.AdamW(params, lr=args.learning_rate)
        logger.info(f"use AdamW optimizer | {{}}")
        optimizer = accelerator.prepare(optimizer)
        optimizer_train_fn = optimizer_eval_fn = lambda: None

        num_update_steps_per_epoch = math.ceil(n_images * repeats / args.gradient_accumulation_steps)
        num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
        if args.gradient_checkpointing:
            unet.train()
        # 学習する
        # TODO: find a way to handle total batch size when there are multiple datasets
        total_batch_size = args.train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps

        accelerator.print("running training / 学習開始")
        accelerator.print(f"  num train images * repeats / 学習画像の数×繰り返し回数: {n_images * repeats}")
        accelerator.print(f"  num validation images * repeats / 学習画像の数×繰り返し回数: 0")
        accelerator.print(f"  num reg images / 正則化画像の数: 0")
        accelerator.print(f"  num batches per epoch / 1epochのバッチ数: {n_images * repeats}")
        accelerator.print(f"  num epochs / epoch数: {num_train_epochs}")
        accelerator.print(
            f"  batch size per device / バッチサイズ: {', '.join([str(args.train_batch_size)])}"
        )
        accelerator.print(f"  gradient accumulation steps / 勾配を合計するステップ数 = {args.gradient_accumulation_steps}")
        accelerator.print(f"  total optimization steps / 学習ステップ数: {args.max_train_steps}")

        initial_step = 0
        progress_bar = tqdm(
            range(args.max_train_steps - initial_step), smoothing=0, disable=not accelerator.is_local_main_process,
            desc="steps"
        )

        epoch_to_start = 0
        global_step = 0
        loss_recorder = LossRecorder()

        # For --sample_at_first
        optimizer_eval_fn()
        self.sample_images(accelerator, args, 0, global_step, accelerator.device, vae, None, text_encoder, unet)
        optimizer_train_fn()

        # training loop
        for epoch in range(epoch_to_start, num_train_epochs):
            accelerator.print(f"\nepoch {epoch+1}/{num_train_epochs}\n")
            for step in range(n_images * repeats):
                batch = {"latents": torch.Tensor((1, 4, 128, 128)), "text_encoder_outputs_list": None}
                with accelerator.accumulate(unet):
                    _simharness.at("train_step", global_step)
                    _simharness.tick(args.step_seconds / args.gradient_accumulation_steps)
                    #@1406
                    loss = self.process_batch(
                        batch,
                        text_encoders,
                        unet,
                        None,
                        vae,
                        None,
                        vae_dtype,
                        weight_dtype,
                        accelerator,
                        args,
                        is_train=True,
                    )
                    #@1420
                    accelerator.backward(loss)
                    if accelerator.sync_gradients:
                        if args.max_grad_norm != 0.0:
                            accelerator.clip_grad_norm_(params, args.max_grad_norm)

                    _simharness.at("optimizer_step", global_step)
                    #@1431
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

                # Checks if the accelerator has performed an optimization step behind the scenes
                if accelerator.sync_gradients:
                    progress_bar.update(1)
                    global_step += 1

                    optimizer_eval_fn()
                    #@1451
                    self.sample_images(accelerator, args, None, global_step, accelerator.device, vae, None,
                                       text_encoder, unet)
                    optimizer_train_fn()

                _simharness.at("loss_item", global_step)
                #@1477
                current_loss = loss.detach().item()
                loss_recorder.add(epoch=epoch, step=step, loss=current_loss)
                avr_loss: float = loss_recorder.moving_average
                logs = {"avr_loss": avr_loss}  # , "lr": lr_scheduler.get_last_lr()[0]}
                progress_bar.set_postfix(**logs)

                if global_step >= args.max_train_steps:
                    break

        logger.info("model saved.")


def setup_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config_file", default=None)
    parser.add_argument("--pretrained_model_name_or_path", default="")
    parser.add_argument("--network_module", default="networks.lora")
    parser.add_argument("--network_dim", type=int, default=16)
    parser.add_argument("--network_alpha", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--max_train_steps", type=int, default=1600)
    parser.add_argument("--train_batch_size", type=int, default=1)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--gradient_checkpointing", action="store_true")
    parser.add_argument("--cache_latents", action="store_true")
    parser.add_argument("--cache_text_encoder_outputs", action="store_true")
    parser.add_argument("--sample_every_n_steps", type=int, default=None)
    parser.add_argument("--sample_every_n_epochs", type=int, default=None)
    parser.add_argument("--sample_at_first", action="store_true")
    parser.add_argument("--sample_prompts", default=None)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--output_dir", default="output")
    parser.add_argument("--step_seconds", type=float, default=1.43)
    parser.add_argument("--console_log_level", default=None)
    parser.add_argument("--console_log_file", default=None)
    parser.add_argument("--console_log_simple", action="store_true")
    return parser


if __name__ == "__main__":
    parser = setup_parser()
    args = parser.parse_args()
    trainer = NetworkTrainer()
    trainer.train(args)
'''

TREE[KOHYA + "sdxl_train_network.py"] = r'''
import argparse
import logging

import torch
from diffusers import AutoencoderKL

import _simharness
import train_network
from library import sdxl_original_unet, strategy_sd, train_util
from library.utils import setup_logging

setup_logging()
logger = logging.getLogger(__name__)


class SdxlNetworkTrainer(train_network.NetworkTrainer):
    def __init__(self):
        super().__init__()
        self.vae_scale_factor = 0.13025
        self.is_sdxl = True

    def load_target_model(self, args, weight_dtype, accelerator):
        logger.info(f"loading model for process {accelerator.state.local_process_index}/{accelerator.state.num_processes}")
        logger.info(f"load StableDiffusion checkpoint: {args.pretrained_model_name_or_path}")
        logger.info("building U-Net")
        logger.info("loading U-Net from checkpoint")
        logger.info("U-Net: <All keys matched successfully>")
        logger.info("building text encoders")
        logger.info("loading text encoders from checkpoint")
        logger.info("text encoder 1: <All keys matched successfully>")
        logger.info("text encoder 2: <All keys matched successfully>")
        logger.info("building VAE")
        logger.info("loading VAE from checkpoint")
        logger.info("VAE: <All keys matched successfully>")
        logger.info("Enable SDPA for U-Net")
        _simharness.tick(14.2)
        unet = sdxl_original_unet.SdxlUNet2DConditionModel()
        return "sdxl_base_v1-0", [None, None], AutoencoderKL(), unet

    #@120
    def call_unet(self, args, accelerator, unet, noisy_latents, timesteps, text_conds, batch, weight_dtype,
                  indices=None):
        noisy_latents = noisy_latents.to(weight_dtype)  # TODO check why noisy_latents is not weight_dtype
        # get size embeddings
        text_embedding = vector_embedding = None
        # Predict the noise residual
        #@154
        noise_pred = unet(noisy_latents, timesteps, text_embedding, vector_embedding)
        return noise_pred


def setup_parser():
    parser = train_network.setup_parser()
    return parser


if __name__ == "__main__":
    parser = setup_parser()
    args = parser.parse_args()
    trainer = SdxlNetworkTrainer()
    trainer.train(args)
'''

TREE[KOHYA + "flux_train_network.py"] = r'''
import argparse
import logging

import torch
from transformers.models.t5.modeling_t5 import T5EncoderModel

import _simharness
import train_network
from library import flux_models, flux_train_utils, strategy_flux, train_util
from library.utils import setup_logging

setup_logging()
logger = logging.getLogger(__name__)


class FluxNetworkTrainer(train_network.NetworkTrainer):
    def __init__(self):
        super().__init__()
        self.sample_prompts_te_outputs = None
        self.is_schnell = False

    def load_target_model(self, args, weight_dtype, accelerator):
        logger.info(f"Checking the state dict: Diffusers or BFL, dev or schnell")
        logger.info(f"Building Flux model dev from BFL checkpoint")
        logger.info(f"Loading state dict from {args.pretrained_model_name_or_path}")
        logger.info(f"Loaded Flux: <All keys matched successfully>")
        logger.info(f"Loaded fp8 Flux model")
        logger.info(f"Building CLIP-L")
        logger.info(f"Loading state dict from /models/clip_l.safetensors")
        logger.info(f"Loaded CLIP-L: <All keys matched successfully>")
        logger.info(f"Loading state dict from /models/t5xxl_fp16.safetensors")
        logger.info(f"Loaded T5xxl: <All keys matched successfully>")
        logger.info(f"Building AutoEncoder")
        logger.info(f"Loading state dict from /models/ae.safetensors")
        logger.info(f"Loaded AE: <All keys matched successfully>")
        _simharness.tick(21.7)
        return "flux1-dev", [None, T5EncoderModel()], flux_models.AutoEncoder(), flux_models.Flux()

    #@200
    def cache_text_encoder_outputs_if_needed(self, args, accelerator, unet, vae, text_encoders, dataset, weight_dtype):
        if args.cache_text_encoder_outputs:
            # メモリ消費を減らす
            logger.info("move vae and unet to cpu to save memory")
            org_vae_device = "cuda"
            org_unet_device = "cuda"
            logger.info("move text encoders to gpu")
            with accelerator.autocast():
                #@232
                dataset.new_cache_text_encoder_outputs(text_encoders, accelerator)
            logger.info("move vae and unet back to original device")

    #@300
    def sample_images(self, accelerator, args, epoch, global_step, device, ae, tokenizer, text_encoder, flux):
        text_encoders = text_encoder
        #@309
        flux_train_utils.sample_images(
            accelerator, args, epoch, global_step, flux, ae, text_encoders, self.sample_prompts_te_outputs
        )

    #@330
    def get_noise_pred_and_target(self, args, accelerator, noise_scheduler, latents, batch, text_encoder_conds, unet,
                                  network, weight_dtype, train_unet, is_train=True):
        noisy_model_input = latents
        img_ids = t5_out = txt_ids = l_pooled = t5_attn_mask = guidance_vec = None
        timesteps = torch.Tensor((1,))

        # call model
        def call_dit(img, img_ids, t5_out, txt_ids, l_pooled, timesteps, guidance_vec, t5_attn_mask):
            # grad is enabled even if unet is not in train mode, because Text Encoder is in train mode
            with torch.set_grad_enabled(is_train), accelerator.autocast():
                # YiYi notes: divide it by 1000 for now because we scale it by 1000 in the transformer model
                #@412
                model_pred = unet(
                    img=img,
                    img_ids=img_ids,
                    txt=t5_out,
                    txt_ids=txt_ids,
                    y=l_pooled,
                    timesteps=timesteps / 1000,
                    guidance=guidance_vec,
                    txt_attention_mask=t5_attn_mask,
                )
            return model_pred

        #@424
        model_pred = call_dit(
            img=noisy_model_input,
            img_ids=img_ids,
            t5_out=t5_out,
            txt_ids=txt_ids,
            l_pooled=l_pooled,
            timesteps=timesteps,
            guidance_vec=guidance_vec,
            t5_attn_mask=t5_attn_mask,
        )
        return model_pred, latents, timesteps, None


def setup_parser():
    parser = train_network.setup_parser()
    parser.add_argument("--t5xxl", default=None)
    return parser


if __name__ == "__main__":
    parser = setup_parser()
    args = parser.parse_args()
    trainer = FluxNetworkTrainer()
    trainer.train(args)
'''

# ---------------------------------------------------------------- kohya-ss/musubi-tuner
MUSUBI = "home/musubi-tuner/src/musubi_tuner/"

TREE[MUSUBI + "__init__.py"] = ""
TREE[MUSUBI + "training/__init__.py"] = ""
TREE[MUSUBI + "wan/__init__.py"] = ""
TREE[MUSUBI + "wan/modules/__init__.py"] = ""
TREE[MUSUBI + "dataset/__init__.py"] = ""

TREE[MUSUBI + "dataset/config_utils.py"] = r'''
import logging

import _simharness

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


def load_and_log_dataset_config(path):
    logger.info(f"Load dataset config from {path}")
    n = _simharness.knob("images", 40)
    logging.getLogger("musubi_tuner.dataset.image_video_dataset").info("glob images in /data/wan/images")
    logging.getLogger("musubi_tuner.dataset.image_video_dataset").info(f"found {n} images")
    logger.info(f"""[Dataset 0]
  is_image_dataset: True
  resolution: (960, 544)
  batch_size: 1
  num_repeats: 1
  caption_extension: ".txt"
  enable_bucket: True
  bucket_no_upscale: False
  cache_directory: "/data/wan/cache"
  debug_dataset: False
    image_directory: "/data/wan/images"
    image_jsonl_file: "None"
    fp_latent_window_size: 9
    fp_1f_clean_indices: None
    fp_1f_target_index: None
    fp_1f_no_post: False
    flux_kontext_no_resize_control: False
""")
    return n
'''

TREE[MUSUBI + "wan/modules/attention.py"] = r'''
import torch


#@120
def flash_attention(
    qkv,
    q_lens=None,
    k_lens=None,
    dropout_p=0.0,
    softmax_scale=None,
    q_scale=None,
    causal=False,
    window_size=(-1, -1),
    deterministic=False,
    dtype=torch.bfloat16,
    version=None,
    attn_mode="torch",
    split_attn=False,
):
    q, k, v = qkv
    if attn_mode == "torch" or attn_mode == "sdpa":
        #@197
        x = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=causal, dropout_p=dropout_p)
        return x
'''

TREE[MUSUBI + "wan/modules/model.py"] = r'''
import logging

import torch
import torch.nn as nn

from musubi_tuner.wan.modules.attention import flash_attention

logger = logging.getLogger(__name__)


class WanSelfAttention(nn.Module):
    def __init__(self, dim=5120):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.attn_mode = "torch"
        self.split_attn = False
        self.window_size = (-1, -1)

    #@180
    def forward(self, x, seq_lens, grid_sizes, freqs):
        q = self.q(x)
        k = v = q
        qkv = [q, k, v]
        #@213
        x = flash_attention(qkv, k_lens=seq_lens, window_size=self.window_size, attn_mode=self.attn_mode, split_attn=self.split_attn)
        return x


class WanAttentionBlock(nn.Module):
    gradient_checkpointing = False

    def __init__(self):
        super().__init__()
        self.self_attn = WanSelfAttention()
        self.norm1 = nn.LayerNorm(5120)

    #@410
    def _forward(self, x, e, seq_lens, grid_sizes, freqs, context, context_lens):
        e = [e] * 6
        # self-attention
        #@425
        y = self.self_attn(self.norm1(x).float() * (1 + e[1]) + e[0], seq_lens, grid_sizes, freqs)
        x = x + y * e[2]
        return x

    #@460
    def forward(self, x, e, seq_lens, grid_sizes, freqs, context, context_lens):
        if self.training and self.gradient_checkpointing:
            return torch.utils.checkpoint.checkpoint(self._forward, x, e, seq_lens, grid_sizes, freqs, context, context_lens, use_reentrant=False)
        #@464
        return self._forward(x, e, seq_lens, grid_sizes, freqs, context, context_lens)


class WanModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([WanAttentionBlock() for _ in range(4)])
        self.blocks_to_swap = None

    #@790
    def forward(self, x, t, context, seq_len, clip_fea=None, y=None, skip_block_indices=None):
        # embeddings
        if isinstance(x, list):
            x = torch.cat([u.unsqueeze(0) for u in x])
        e = torch.Tensor((1, 6, 5120))
        seq_lens = grid_sizes = freqs = context_lens = None
        kwargs = dict(e=e, seq_lens=seq_lens, grid_sizes=grid_sizes, freqs=freqs, context=context, context_lens=context_lens)
        for block_idx, block in enumerate(self.blocks):
            if self.blocks_to_swap:
                self.offloader.wait_for_block(block_idx)
            #@871
            x = block(x, **kwargs)
        return x
'''

TREE[MUSUBI + "wan/modules/t5.py"] = r'''
import logging

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


class T5FeedForward(nn.Module):
    def __init__(self, dim=4096, dim_ffn=10240):
        super().__init__()
        self.gate = nn.Linear(dim, dim_ffn, bias=False)
        self.fc1 = nn.Linear(dim, dim_ffn, bias=False)
        self.fc2 = nn.Linear(dim_ffn, dim, bias=False)

    #@118
    def forward(self, x):
        #@119
        x = self.fc1(x) * self.gate(x)
        x = self.fc2(x)
        return x


class T5SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.ffn = T5FeedForward()
        self.norm2 = nn.LayerNorm(4096)

    #@150
    def forward(self, x, mask=None, pos_bias=None):
        #@158
        x = fp16_clamp(x + self.ffn(self.norm2(x)))
        return x


def fp16_clamp(x):
    return x


class T5Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([T5SelfAttention() for _ in range(4)])

    #@245
    def forward(self, ids, mask=None):
        x = torch.Tensor((1, 512, 4096))
        e = None
        for block in self.blocks:
            #@254
            x = block(x, mask, pos_bias=e)
        return x


class T5EncoderModel:
    def __init__(self, text_len, dtype=torch.bfloat16, device="cuda", checkpoint_path=None, tokenizer_path=None):
        logger.info(f"loading {checkpoint_path}")
        self.model = T5Encoder()

    #@500
    def __call__(self, texts, device):
        ids, mask = torch.Tensor((len(texts), 512)), torch.Tensor((len(texts), 512))
        #@505
        context = self.model(ids, mask)
        return context
'''

TREE[MUSUBI + "wan/modules/vae.py"] = r'''
import logging

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


class CausalConv3d(nn.Conv3d):
    #@30
    def forward(self, x, cache_x=None):
        #@42
        return super().forward(x)


class Encoder3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.downsamples = nn.ModuleList([CausalConv3d(96, 96, 3) for _ in range(4)])

    #@400
    def forward(self, x, feat_cache=None, feat_idx=[0]):
        ## downsamples
        for layer in self.downsamples:
            if feat_cache is not None:
                #@431
                x = layer(x, feat_cache[0])
            else:
                x = layer(x)
        return x


class WanVAE_(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder3d()

    #@560
    def encode(self, x, scale):
        self.clear_cache() if hasattr(self, "clear_cache") else None
        ## cache
        t = 1
        iter_ = 1 + (t - 1) // 4
        for i in range(iter_):
            if i == 0:
                #@570
                out = self.encoder(x[:, :, :1, :, :], feat_cache=[None], feat_idx=[0])
        return out


class WanVAE:
    def __init__(self, z_dim=16, vae_path=None, dtype=torch.float, device="cuda", cache_device=None):
        logger.info(f"loading {vae_path}")
        self.model = WanVAE_()
        self.dtype = dtype

    #@700
    def encode(self, videos):
        """
        videos: A list of videos each with shape [C, T, H, W].
        """
        with torch.amp.autocast(device_type="cuda", dtype=self.dtype):
            #@708
            return [self.model.encode(u.unsqueeze(0), None).float().squeeze(0) for u in videos]
'''

TREE[MUSUBI + "training/trainer_base.py"] = r'''
import argparse
import logging
import math
import os

import torch
from accelerate import Accelerator
from tqdm import tqdm

import _simharness
from musubi_tuner.dataset import config_utils

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


class LossRecorder:
    def __init__(self):
        self.loss_list = []
        self.loss_total = 0.0

    def add(self, *, epoch, step, loss):
        self.loss_list.append(loss)
        self.loss_total += loss
        if len(self.loss_list) > 20:
            self.loss_total -= self.loss_list.pop(0)

    @property
    def moving_average(self):
        return self.loss_total / len(self.loss_list)


def should_sample_images(args, steps, epoch=None):
    if steps == 0:
        return bool(args.sample_at_first)
    if args.sample_every_n_steps is None:
        return False
    return steps % args.sample_every_n_steps == 0 and epoch is None


class NetworkTrainer:
    #@816
    def sample_images(self, accelerator, args, epoch, steps, vae, transformer, sample_parameters, dit_dtype):
        """architecture independent sample images"""
        if not should_sample_images(args, steps, epoch):
            return

        logger.info("")
        logger.info(f"generating sample images at step / サンプル画像生成 ステップ: {steps}")
        if sample_parameters is None:
            logger.error(f"No prompt file / プロンプトファイルがありません: {args.sample_prompts}")
            return
        for sample_parameter in sample_parameters:
            #@860
            self.sample_image_inference(accelerator, args, transformer, dit_dtype, vae, args.output_dir,
                                        sample_parameter, epoch, steps)

    #@900
    def sample_image_inference(self, accelerator, args, transformer, dit_dtype, vae, save_dir, sample_parameter,
                               epoch, steps):
        prompt = sample_parameter.get("prompt", "")
        logger.info(f"prompt: {prompt}")
        logger.info(f"height: {sample_parameter.get('height', 256)}")
        logger.info(f"width: {sample_parameter.get('width', 256)}")
        logger.info(f"frame count: {sample_parameter.get('frame_count', 1)}")
        logger.info(f"sample steps: {sample_parameter.get('sample_steps', 20)}")
        logger.info(f"guidance scale: {sample_parameter.get('guidance_scale', 5.0)}")
        logger.info(f"discrete flow shift: {sample_parameter.get('discrete_flow_shift', 3.0)}")
        if "seed" in sample_parameter:
            logger.info(f"seed: {sample_parameter['seed']}")
        #@951
        video = self.do_inference(accelerator, args, sample_parameter, vae, dit_dtype, transformer,
                                  sample_parameter.get("discrete_flow_shift", 3.0), sample_parameter.get("sample_steps", 20),
                                  sample_parameter.get("width", 256), sample_parameter.get("height", 256),
                                  sample_parameter.get("frame_count", 1), None, 0, None, None)

    #@1480
    def load_transformer(self, accelerator, args, dit_path, attn_mode, split_attn, loading_device, dit_weight_dtype):
        raise NotImplementedError

    #@1680
    def train(self, args):
        n_images = config_utils.load_and_log_dataset_config(args.dataset_config)
        logger.info("preparing accelerator")
        accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
        print(f"accelerator device: {accelerator.device}")
        dit_dtype = torch.bfloat16
        logger.info(f"DiT precision: {dit_dtype}, weight precision: {dit_dtype}")
        #@1700
        logger.info(f"Loading DiT model from {args.dit}")
        transformer = self.load_transformer(accelerator, args, args.dit, "torch", False, "cpu", dit_dtype)
        if args.blocks_to_swap:
            logger.info(f"enable swap {args.blocks_to_swap} blocks to CPU from device: {accelerator.device}")
            print(f"WanModel: Block swap enabled. Swapping {args.blocks_to_swap} blocks out of 40 blocks. Supports backward: True")
        accelerator.print(f"import network module: {args.network_module}")
        lora_logger = logging.getLogger("musubi_tuner.networks.lora")
        lora_logger.info(f"create LoRA network. base dim (rank): {args.network_dim}, alpha: {args.network_alpha}")
        lora_logger.info("neuron dropout: p=None, rank dropout: p=None, module dropout: p=None")
        lora_logger.info("create LoRA for U-Net/DiT: 400 modules.")
        lora_logger.info("enable LoRA for U-Net: 400 modules")
        accelerator.print("prepare optimizer, data loader etc.")
        logger.info("use 8-bit AdamW optimizer | {'weight_decay': 0.01}")
        optimizer = accelerator.prepare(torch.optim.AdamW([torch.nn.Parameter(torch.Tensor((32, 5120)))], lr=2e-4))
        num_update_steps_per_epoch = math.ceil(n_images / args.gradient_accumulation_steps)
        num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)

        accelerator.print("running training / 学習開始")
        accelerator.print(f"  num train items / 学習画像、動画数: {n_images}")
        accelerator.print(f"  num batches per epoch / 1epochのバッチ数: {n_images}")
        accelerator.print(f"  num epochs / epoch数: {num_train_epochs}")
        accelerator.print(f"  batch size per device / バッチサイズ: 1")
        accelerator.print(f"  gradient accumulation steps / 勾配を合計するステップ数 = {args.gradient_accumulation_steps}")
        accelerator.print(f"  total optimization steps / 学習ステップ数: {args.max_train_steps}")

        # TODO skip until initial step
        progress_bar = tqdm(range(args.max_train_steps), smoothing=0, disable=not accelerator.is_local_main_process, desc="steps")

        epoch_to_start = 0
        global_step = 0
        loss_recorder = LossRecorder()
        sample_parameters = _simharness.knob("sample_prompts")

        for epoch in range(epoch_to_start, num_train_epochs):
            accelerator.print(f"\nepoch {epoch + 1}/{num_train_epochs}")
            for step in range(n_images):
                latents = torch.Tensor((1, 16, 1, 68, 120))
                with accelerator.accumulate(transformer):
                    _simharness.at("train_step", global_step)
                    _simharness.tick(args.step_seconds / args.gradient_accumulation_steps)
                    #@2040
                    model_pred, target = self.call_dit(
                        args, accelerator, transformer, latents, None, latents, latents, None, dit_dtype
                    )
                    loss = torch.nn.functional.mse_loss(model_pred.to(torch.float32), target, reduction="none")
                    loss = loss.mean()
                    #@2058
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

                # Checks if the accelerator has performed an optimization step behind the scenes
                if accelerator.sync_gradients:
                    if global_step == 0:
                        progress_bar.reset()  # exclude first step from progress bar, because it may take long due to initializations
                    progress_bar.update(1)
                    global_step += 1

                    # to avoid calling optimizer_eval_fn() too frequently, we call it only when we need to sample images or save the model
                    should_sampling = should_sample_images(args, global_step, epoch=None)
                    if should_sampling:
                        #@2093
                        self.sample_images(accelerator, args, None, global_step, None, transformer, sample_parameters, dit_dtype)

                current_loss = loss.detach().item()
                loss_recorder.add(epoch=epoch, step=step, loss=current_loss)
                avr_loss: float = loss_recorder.moving_average
                logs = {"avr_loss": avr_loss}  # , "lr": lr_scheduler.get_last_lr()[0]}
                progress_bar.set_postfix(**logs)

                if global_step >= args.max_train_steps:
                    break


def setup_parser_common():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset_config", default="/data/wan/dataset.toml")
    parser.add_argument("--dit", default="/models/wan2.1_t2v_14B_bf16.safetensors")
    parser.add_argument("--task", default="t2v-14B")
    parser.add_argument("--network_module", default="networks.lora_wan")
    parser.add_argument("--network_dim", type=int, default=32)
    parser.add_argument("--network_alpha", type=int, default=1)
    parser.add_argument("--max_train_steps", type=int, default=1600)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--blocks_to_swap", type=int, default=0)
    parser.add_argument("--sample_every_n_steps", type=int, default=None)
    parser.add_argument("--sample_at_first", action="store_true")
    parser.add_argument("--sample_prompts", default=None)
    parser.add_argument("--output_dir", default="/data/wan/output")
    parser.add_argument("--step_seconds", type=float, default=6.4)
    parser.add_argument("--mixed_precision", default="bf16")
    parser.add_argument("--fp8_base", action="store_true")
    return parser
'''

TREE[MUSUBI + "wan_train_network.py"] = r'''
import logging

import torch
from tqdm import tqdm

import _simharness
from musubi_tuner.training.trainer_base import NetworkTrainer, setup_parser_common
from musubi_tuner.wan.modules.model import WanModel

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


class WanNetworkTrainer(NetworkTrainer):
    def load_transformer(self, accelerator, args, dit_path, attn_mode, split_attn, loading_device, dit_weight_dtype):
        model_logger = logging.getLogger("musubi_tuner.wan.modules.model")
        model_logger.info("Creating WanModel")
        model_logger.info(f"Loading DiT model from {dit_path}, device={loading_device}")
        _simharness.tick(38.5)
        model_logger.info(f"Loaded DiT model from {dit_path}, info=<All keys matched successfully>")
        return WanModel()

    #@360
    def do_inference(self, accelerator, args, sample_parameter, vae, dit_dtype, transformer, discrete_flow_shift,
                     sample_steps, width, height, frame_count, generator, do_classifier_free_guidance, guidance_scale,
                     cfg_scale, image_path=None, control_video_path=None):
        model = transformer
        prompt_idx = sample_parameter.get("enum", 0)
        latent = torch.Tensor((16, 9, height // 8, width // 8))
        timesteps = list(range(sample_steps))
        arg_c = {"context": None, "seq_len": 1560}
        for i, t in enumerate(tqdm(timesteps, desc=f"Sampling timesteps for prompt {prompt_idx + 1}")):
            _simharness.at("sample_step", i)
            _simharness.tick(0.93)
            latent_model_input = [latent]
            timestep = torch.Tensor((1,), value=t)
            with accelerator.autocast():
                #@417
                noise_pred_cond = model(latent_model_input, t=timestep, **arg_c)[0]
        return latent

    #@470
    def call_dit(self, args, accelerator, transformer, latents, batch, noise, noisy_model_input, timesteps,
                 network_dtype):
        model = transformer
        context = [torch.Tensor((512, 4096))]
        seq_len = 8160
        with accelerator.autocast():
            #@506
            model_pred = model(noisy_model_input, t=timesteps, context=context, clip_fea=None, seq_len=seq_len, y=None)
        target = noise
        return model_pred, target


def wan_setup_parser(parser):
    parser.add_argument("--t5", default=None)
    return parser


def main():
    parser = setup_parser_common()
    parser = wan_setup_parser(parser)
    args = parser.parse_args()
    trainer = WanNetworkTrainer()
    trainer.train(args)


if __name__ == "__main__":
    main()
'''

TREE[MUSUBI + "cache_latents.py"] = r'''
import logging

import torch
from tqdm import tqdm

import _simharness

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


def retrieve_latent_cache_batches(n):
    for i in range(n):
        yield ("960x544", [f"/data/wan/images/img_{i:04d}.png"])


#@280
def encode_datasets(datasets, encode, args):
    num_workers = args.num_workers if args.num_workers is not None else 4
    for i, dataset in enumerate(datasets):
        logger.info(f"Encoding dataset [{i}]")
        for _, batch in tqdm(retrieve_latent_cache_batches(dataset)):
            _simharness.at("cache_latents", None)
            _simharness.tick(2.84)
            #@302
            encode(batch)


def setup_parser_common():
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset_config", default="/data/wan/dataset.toml")
    parser.add_argument("--vae", default="/models/wan_2.1_vae.safetensors")
    parser.add_argument("--vae_dtype", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--batch_size", type=int, default=None)
    parser.add_argument("--num_workers", type=int, default=None)
    parser.add_argument("--vae_cache_cpu", action="store_true")
    return parser
'''

TREE[MUSUBI + "wan_cache_latents.py"] = r'''
import logging

import torch

import _simharness
from musubi_tuner import cache_latents
from musubi_tuner.dataset import config_utils
from musubi_tuner.wan.modules.vae import WanVAE

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


#@60
def encode_and_save_batch(vae, clip, batch):
    contents = [torch.Tensor((3, 1, 544, 960))]
    with torch.no_grad():
        #@81
        latent = vae.encode(contents)  # list of Tensor[C, F, H, W]
    latent = torch.stack(latent, dim=0)


def main():
    parser = cache_latents.setup_parser_common()
    args = parser.parse_args()
    n = config_utils.load_and_log_dataset_config(args.dataset_config)
    vae_dtype = torch.bfloat16
    logger.info(f"Loading VAE model from {args.vae}")
    vae = WanVAE(vae_path=args.vae, device="cuda", dtype=vae_dtype, cache_device=None)

    # encoding closure
    def encode(one_batch):
        #@150
        encode_and_save_batch(vae, None, one_batch)

    # reuse core loop from cache_latents with no change
    #@154
    cache_latents.encode_datasets([n], encode, args)


if __name__ == "__main__":
    main()
'''

TREE[MUSUBI + "cache_text_encoder_outputs.py"] = r'''
import logging

from tqdm import tqdm

import _simharness

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


def retrieve_text_encoder_output_cache_batches(n, batch_size=16):
    for i in range(0, n, batch_size):
        yield [f"/data/wan/images/img_{j:04d}.txt" for j in range(i, min(n, i + batch_size))]


#@80
def process_text_encoder_batches(num_workers, skip_existing, batch_size, datasets, all_cache_files_for_dataset,
                                 all_cache_paths_for_dataset, encode):
    for i, dataset in enumerate(datasets):
        logger.info(f"Encoding dataset [{i}]")
        for batch in tqdm(retrieve_text_encoder_output_cache_batches(dataset, batch_size)):
            _simharness.at("cache_te", None)
            _simharness.tick(0.52)
            #@121
            encode(batch)
'''

TREE[MUSUBI + "wan_cache_text_encoder_outputs.py"] = r'''
import argparse
import logging

import torch

import _simharness
from musubi_tuner import cache_text_encoder_outputs
from musubi_tuner.dataset import config_utils
from musubi_tuner.wan.modules.t5 import T5EncoderModel

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


#@30
def encode_and_save_batch(text_encoder, batch, device, accelerator):
    prompts = [item for item in batch]
    with torch.no_grad():
        if accelerator is not None:
            with accelerator.autocast():
                context = text_encoder(prompts, device)
        else:
            #@44
            context = text_encoder(prompts, device)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset_config", default="/data/wan/dataset.toml")
    parser.add_argument("--t5", default="/models/models_t5_umt5-xxl-enc-bf16.pth")
    parser.add_argument("--batch_size", type=int, default=16)
    args = parser.parse_args()
    n = config_utils.load_and_log_dataset_config(args.dataset_config)
    device = torch.device("cuda")
    logger.info(f"Loading T5: {args.t5}")
    text_encoder = T5EncoderModel(text_len=512, dtype=torch.bfloat16, device=device, checkpoint_path=args.t5)
    _simharness.tick(9.1)

    # Encode with T5
    logger.info("Encoding with T5")

    def encode_for_text_encoder(batch):
        #@80
        encode_and_save_batch(text_encoder, batch, device, None)

    #@83
    cache_text_encoder_outputs.process_text_encoder_batches(
        None, False, args.batch_size, [n], None, None, encode_for_text_encoder
    )


if __name__ == "__main__":
    main()
'''

LIB["diffusers/utils/logging.py"] = r'''
import logging

_default_handler = None


def _configure_library_root_logger():
    global _default_handler
    if _default_handler is not None:
        return
    _default_handler = logging.StreamHandler()
    root = logging.getLogger("diffusers")
    root.addHandler(_default_handler)
    root.setLevel(logging.WARNING)
    root.propagate = False


def get_logger(name=None):
    _configure_library_root_logger()
    return logging.getLogger(name)


def set_verbosity_info():
    _configure_library_root_logger()
    logging.getLogger("diffusers").setLevel(logging.INFO)


def set_verbosity_warning():
    _configure_library_root_logger()
    logging.getLogger("diffusers").setLevel(logging.WARNING)


def set_verbosity_error():
    _configure_library_root_logger()
    logging.getLogger("diffusers").setLevel(logging.ERROR)
'''

LIB["transformers/utils/__init__.py"] = r'''
from transformers.utils import logging  # noqa: F401
'''

# torchrun / accelerate --multi_gpu: elastic launcher (parent process)
LIB["torch/distributed/run.py"] = r'''
import os
import sys
import time

import _simharness


def _glog(level, path, line, msg):
    t = time.time()
    lt = time.gmtime(t)
    pid = _simharness.knob("launcher_pid", 4242)
    stamp = time.strftime("%m%d %H:%M:%S", lt) + f".{int((t % 1) * 1e6):06d}"
    for part in msg.split("\n"):
        sys.stderr.write(f"{level}{stamp} {pid} {path}:{line}] {part}\n")
    sys.stderr.flush()


def config_from_args(args):
    nproc = int(getattr(args, "nproc_per_node", 1) or 1)
    if nproc > 1 or _simharness.knob("omp_warning", True):
        _glog("W", "torch/distributed/run.py", 793, "\n*****************************************\n"
              "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
              "system being overloaded, please further tune the variable for optimal performance in your "
              "application as needed. \n*****************************************")


#@880
def run(args):
    config_from_args(args)
    from torch.distributed.launcher.api import elastic_launch
    cmd = args.training_script
    #@910
    elastic_launch(
        config=args,
        entrypoint=cmd,
    )(*args.training_script_args)


def main(args=None):
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc_per_node", "--nproc-per-node", default="1")
    parser.add_argument("--master_port", default="29500")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(args)
    #@930
    run(args)
'''

LIB["torch/distributed/launcher/__init__.py"] = ""
LIB["torch/distributed/launcher/api.py"] = r'''
import os
import subprocess
import sys
import time

import _simharness
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import _glog


class elastic_launch:
    def __init__(self, config, entrypoint):
        self._config = config
        self._entrypoint = entrypoint

    #@135
    def __call__(self, *args):
        #@138
        return launch_agent(self._config, self._entrypoint, list(args))


#@200
def launch_agent(config, entrypoint, args):
    env = dict(os.environ)
    world = str(getattr(config, "nproc_per_node", 1) or 1)
    env.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": world, "LOCAL_WORLD_SIZE": world,
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"})
    cmd = [sys.executable, "-u", entrypoint] + args
    _simharness.publish_clock()
    proc = subprocess.Popen(cmd, env=env)
    proc.wait()
    _simharness.sync_clock()
    if proc.returncode != 0:
        child_pid = _simharness.knob("child_pid", 4243)
        _glog("E", "torch/distributed/elastic/multiprocessing/api.py", 869,
              f"failed (exitcode: {proc.returncode}) local_rank: 0 (pid: {child_pid}) of binary: {sys.executable}")
        failure_time = time.strftime("%Y-%m-%d_%H:%M:%S", time.gmtime(time.time()))
        #@269
        raise ChildFailedError(
            name=entrypoint,
            failures={0: (failure_time, _simharness.knob("hostname", "gpu-node-01"), proc.returncode, child_pid)},
        )
    return None
'''

LIB["torch/distributed/elastic/__init__.py"] = ""
LIB["torch/distributed/elastic/multiprocessing/__init__.py"] = ""
LIB["torch/distributed/elastic/multiprocessing/errors/__init__.py"] = r'''
_EMPTY_ERROR_DATA = {"message": "<NONE>"}
_NOT_AVAILABLE = "<N/A>"


class ChildFailedError(Exception):
    def __init__(self, name, failures):
        self.name = name
        self.failures = failures
        super().__init__(self.format_msg())

    def format_msg(self, boarder_delim="=", section_delim="-"):
        title = f"{self.name} FAILED"
        rank, (time_, host, exitcode, pid) = next(iter(self.failures.items()))
        root = (f"[{rank}]:\n  time      : {time_}\n  host      : {host}\n  rank      : {rank} (local_rank: {rank})\n"
                f"  exitcode  : {exitcode} (pid: {pid})\n  error_file: {_NOT_AVAILABLE}\n"
                f"  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
        width = 60
        return (f"\n{boarder_delim * width}\n{title}\n{section_delim * width}\nFailures:\n  <NO_OTHER_FAILURES>\n"
                f"{section_delim * width}\nRoot Cause (first observed failure):\n{root}\n{boarder_delim * width}")


def record(fn):
    return fn
'''

# ---------------------------------------------------------------- diffusers example scripts
DIFFUSERS = "home/diffusers/examples/"

DIFFUSERS_COMMON = r'''
import argparse
import logging
import math
import os

import torch
import torch.nn.functional as F
import transformers
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import ProjectConfiguration, set_seed
from tqdm.auto import tqdm

import _simharness
import diffusers
from diffusers.optimization import get_scheduler
from diffusers.utils import logging as diffusers_logging

logger = get_logger(__name__)


def parse_args(input_args=None):
    parser = argparse.ArgumentParser(description="Simple example of a training script.")
    parser.add_argument("--pretrained_model_name_or_path", type=str, default=None)
    parser.add_argument("--instance_data_dir", type=str, default=None)
    parser.add_argument("--train_data_dir", type=str, default=None)
    parser.add_argument("--instance_prompt", type=str, default=None)
    parser.add_argument("--validation_prompt", type=str, default=None)
    parser.add_argument("--num_validation_images", type=int, default=4)
    parser.add_argument("--validation_epochs", type=int, default=50)
    parser.add_argument("--output_dir", type=str, default="lora-model")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--resolution", type=int, default=512)
    parser.add_argument("--train_batch_size", type=int, default=4)
    parser.add_argument("--num_train_epochs", type=int, default=1)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--checkpointing_steps", type=int, default=500)
    parser.add_argument("--resume_from_checkpoint", type=str, default=None)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--gradient_checkpointing", action="store_true")
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--lr_scheduler", type=str, default="constant")
    parser.add_argument("--lr_warmup_steps", type=int, default=0)
    parser.add_argument("--mixed_precision", type=str, default=None)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--max_grad_norm", default=1.0, type=float)
    parser.add_argument("--report_to", type=str, default="tensorboard")
    parser.add_argument("--dataloader_num_workers", type=int, default=0)
    args = parser.parse_args(input_args)
    return args


def setup_logging(accelerator):
    # Make one log on every process with the configuration for debugging.
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        level=logging.INFO,
    )
    logger.info(accelerator.state, main_process_only=False)
    if accelerator.is_local_main_process:
        transformers.utils.logging.set_verbosity_warning()
        diffusers_logging.set_verbosity_info()
    else:
        transformers.utils.logging.set_verbosity_error()
        diffusers_logging.set_verbosity_error()
    cfg = diffusers_logging.get_logger("diffusers.configuration_utils")
    for line in _simharness.knob("diffusers_config_notes", []):
        cfg.info(line)


def banner(num_examples, batches, epochs, bs, total_bs, gas, max_steps):
    logger.info("***** Running training *****")
    logger.info(f"  Num examples = {num_examples}")
    logger.info(f"  Num batches each epoch = {batches}")
    logger.info(f"  Num Epochs = {epochs}")
    logger.info(f"  Instantaneous batch size per device = {bs}")
    logger.info(f"  Total train batch size (w. parallel, distributed & accumulation) = {total_bs}")
    logger.info(f"  Gradient Accumulation steps = {gas}")
    logger.info(f"  Total optimization steps = {max_steps}")
'''

TREE[DIFFUSERS + "dreambooth/train_dreambooth_lora.py"] = DIFFUSERS_COMMON + r'''

from diffusers import AutoencoderKL, DDPMScheduler, StableDiffusionPipeline, UNet2DConditionModel


#@120
def log_validation(
    pipeline,
    args,
    accelerator,
    pipeline_args,
    epoch,
    torch_dtype,
    is_final_validation=False,
):
    logger.info(
        f"Running validation... \n Generating {args.num_validation_images} images with prompt:"
        f" {args.validation_prompt}."
    )
    pipeline = pipeline.to(accelerator.device, dtype=torch_dtype)
    pipeline.set_progress_bar_config(disable=True)
    generator = None
    with torch.no_grad():
        #@160
        images = [pipeline(**pipeline_args, generator=generator).images[0] for _ in range(args.num_validation_images)]
    return images


#@700
def main(args):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision)
    setup_logging(accelerator)
    if args.seed is not None:
        set_seed(args.seed)
    noise_scheduler = DDPMScheduler.from_pretrained(args.pretrained_model_name_or_path, subfolder="scheduler")
    vae = AutoencoderKL.from_pretrained(args.pretrained_model_name_or_path, subfolder="vae")
    unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")
    if args.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    params_to_optimize = [torch.nn.Parameter(torch.Tensor((args.rank, 320))) for _ in range(4)]
    optimizer = torch.optim.AdamW(params_to_optimize, lr=args.learning_rate)
    n_examples = _simharness.knob("images", 5)
    len_train_dataloader = math.ceil(n_examples / args.train_batch_size)
    num_update_steps_per_epoch = math.ceil(len_train_dataloader / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
    lr_scheduler = get_scheduler(args.lr_scheduler, optimizer=optimizer)
    optimizer, lr_scheduler = accelerator.prepare(optimizer, lr_scheduler)
    total_batch_size = args.train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    banner(n_examples, len_train_dataloader, args.num_train_epochs, args.train_batch_size, total_batch_size,
           args.gradient_accumulation_steps, args.max_train_steps)
    global_step = 0
    first_epoch = 0
    initial_global_step = 0

    progress_bar = tqdm(
        range(0, args.max_train_steps),
        initial=initial_global_step,
        desc="Steps",
        # Only show the progress bar once on each machine.
        disable=not accelerator.is_local_main_process,
    )

    for epoch in range(first_epoch, args.num_train_epochs):
        unet.train()
        for step in range(len_train_dataloader):
            with accelerator.accumulate(unet):
                _simharness.at("train_step", global_step)
                _simharness.tick(_simharness.knob("step_seconds", 1.1) / args.gradient_accumulation_steps)
                pixel_values = torch.Tensor((args.train_batch_size, 3, args.resolution, args.resolution))
                # Convert images to latent space
                model_input = vae.encode(pixel_values).latent_dist.sample()
                model_input = model_input * vae.config.scaling_factor
                noise = torch.randn_like(model_input)
                timesteps = torch.Tensor((args.train_batch_size,))
                noisy_model_input = noise_scheduler.add_noise(model_input, noise, timesteps)
                encoder_hidden_states = torch.Tensor((args.train_batch_size, 77, 768))
                # Predict the noise residual
                #@1280
                model_pred = unet(
                    noisy_model_input,
                    timesteps,
                    encoder_hidden_states,
                    class_labels=None,
                    return_dict=False,
                )[0]
                target = noise
                loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")

                #@1318
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_to_optimize, args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

            # Checks if the accelerator has performed an optimization step behind the scenes
            if accelerator.sync_gradients:
                progress_bar.update(1)
                global_step += 1

                if accelerator.is_main_process:
                    if global_step % args.checkpointing_steps == 0:
                        save_path = os.path.join(args.output_dir, f"checkpoint-{global_step}")
                        accelerator.save_state(save_path)
                        logger.info(f"Saved state to {save_path}")

            logs = {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0]}
            progress_bar.set_postfix(**logs)
            accelerator.log(logs, step=global_step)

            if global_step >= args.max_train_steps:
                break

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    args = parse_args()
    main(args)
'''

TREE[DIFFUSERS + "dreambooth/train_dreambooth_lora_flux.py"] = DIFFUSERS_COMMON + r'''

from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel


#@170
def log_validation(
    pipeline,
    args,
    accelerator,
    pipeline_args,
    epoch,
    torch_dtype,
    is_final_validation=False,
):
    logger.info(
        f"Running validation... \n Generating {args.num_validation_images} images with prompt:"
        f" {args.validation_prompt}."
    )
    pipeline = pipeline.to(accelerator.device)
    pipeline.set_progress_bar_config(disable=True)

    # run inference
    generator = None
    # autocast_ctx = torch.autocast(accelerator.device.type) if not is_final_validation else nullcontext()
    autocast_ctx = torch.no_grad()

    with autocast_ctx:
        #@198
        images = [pipeline(**pipeline_args, generator=generator).images[0] for _ in range(args.num_validation_images)]

    torch.cuda.empty_cache()
    return images


#@1180
def main(args):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision)
    setup_logging(accelerator)
    if args.seed is not None:
        set_seed(args.seed)
    noise_scheduler = FlowMatchEulerDiscreteScheduler.from_pretrained(args.pretrained_model_name_or_path,
                                                                      subfolder="scheduler")
    vae = AutoencoderKL.from_pretrained(args.pretrained_model_name_or_path, subfolder="vae")
    transformer = FluxTransformer2DModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="transformer")
    params_to_optimize = [torch.nn.Parameter(torch.Tensor((args.rank, 3072))) for _ in range(4)]
    optimizer = torch.optim.AdamW(params_to_optimize, lr=args.learning_rate)
    n_examples = _simharness.knob("images", 20)
    len_train_dataloader = math.ceil(n_examples / args.train_batch_size)
    num_update_steps_per_epoch = math.ceil(len_train_dataloader / args.gradient_accumulation_steps)
    args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
    lr_scheduler = get_scheduler(args.lr_scheduler, optimizer=optimizer)
    optimizer, lr_scheduler = accelerator.prepare(optimizer, lr_scheduler)
    total_batch_size = args.train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    banner(n_examples, len_train_dataloader, args.num_train_epochs, args.train_batch_size, total_batch_size,
           args.gradient_accumulation_steps, args.max_train_steps)
    global_step = 0
    first_epoch = 0
    initial_global_step = 0

    progress_bar = tqdm(
        range(0, args.max_train_steps),
        initial=initial_global_step,
        desc="Steps",
        # Only show the progress bar once on each machine.
        disable=not accelerator.is_local_main_process,
    )

    for epoch in range(first_epoch, args.num_train_epochs):
        transformer.train()
        for step in range(len_train_dataloader):
            models_to_accumulate = [transformer]
            with accelerator.accumulate(models_to_accumulate):
                _simharness.at("train_step", global_step)
                _simharness.tick(_simharness.knob("step_seconds", 2.2))
                model_input = torch.Tensor((1, 4096, 64))
                # Predict the noise residual
                model_pred = transformer(
                    hidden_states=model_input,
                    timestep=None,
                    guidance=None,
                    pooled_projections=None,
                    encoder_hidden_states=None,
                    txt_ids=None,
                    img_ids=None,
                    return_dict=False,
                )[0]
                loss = F.mse_loss(model_pred.float(), model_input.float(), reduction="mean")
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_to_optimize, args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

            # Checks if the accelerator has performed an optimization step behind the scenes
            if accelerator.sync_gradients:
                progress_bar.update(1)
                global_step += 1

            logs = {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0]}
            progress_bar.set_postfix(**logs)
            accelerator.log(logs, step=global_step)

            if global_step >= args.max_train_steps:
                break

        if accelerator.is_main_process:
            if args.validation_prompt is not None and epoch % args.validation_epochs == 0:
                # create pipeline
                pipeline = FluxPipeline.from_pretrained(
                    args.pretrained_model_name_or_path,
                    vae=vae,
                    transformer=accelerator.unwrap_model(transformer),
                )
                pipeline_args = {"prompt": args.validation_prompt}
                _simharness.at("validation", global_step)
                #@1740
                images = log_validation(
                    pipeline=pipeline,
                    args=args,
                    accelerator=accelerator,
                    pipeline_args=pipeline_args,
                    epoch=epoch,
                    torch_dtype=torch.bfloat16,
                )
                del pipeline
                torch.cuda.empty_cache()

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    args = parse_args()
    main(args)
'''

TREE[DIFFUSERS + "text_to_image/train_text_to_image_lora.py"] = DIFFUSERS_COMMON + r'''

from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel


#@400
def main():
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision)
    setup_logging(accelerator)
    if args.seed is not None:
        set_seed(args.seed)
    noise_scheduler = DDPMScheduler.from_pretrained(args.pretrained_model_name_or_path, subfolder="scheduler")
    vae = AutoencoderKL.from_pretrained(args.pretrained_model_name_or_path, subfolder="vae")
    unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")
    weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
    lora_layers = [torch.nn.Parameter(torch.Tensor((args.rank, 320))) for _ in range(4)]
    if _simharness.knob("fp16_trainable_params"):
        # the user cast the whole unet (LoRA layers included) to fp16
        for p in lora_layers:
            p.grad = torch.Tensor(p.shape, dtype=torch.float16)
    optimizer = torch.optim.AdamW(lora_layers, lr=args.learning_rate)
    n_examples = _simharness.knob("images", 833)
    len_train_dataloader = math.ceil(n_examples / args.train_batch_size)
    num_update_steps_per_epoch = math.ceil(len_train_dataloader / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
    lr_scheduler = get_scheduler(args.lr_scheduler, optimizer=optimizer)
    unet, optimizer, lr_scheduler = accelerator.prepare(unet, optimizer, lr_scheduler)
    total_batch_size = args.train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    banner(n_examples, len_train_dataloader, args.num_train_epochs, args.train_batch_size, total_batch_size,
           args.gradient_accumulation_steps, args.max_train_steps)
    global_step = 0
    first_epoch = 0

    # Potentially load in the weights and states from a previous save
    if args.resume_from_checkpoint:
        path = _simharness.knob("resume_path")
        if path is None:
            accelerator.print(
                f"Checkpoint '{args.resume_from_checkpoint}' does not exist. Starting a new training run."
            )
            args.resume_from_checkpoint = None
            initial_global_step = 0
        else:
            accelerator.print(f"Resuming from checkpoint {path}")
            accelerator.load_state(os.path.join(args.output_dir, path))
            global_step = int(path.split("-")[1])

            initial_global_step = global_step
            first_epoch = global_step // num_update_steps_per_epoch
    else:
        initial_global_step = 0

    progress_bar = tqdm(
        range(0, args.max_train_steps),
        initial=initial_global_step,
        desc="Steps",
        # Only show the progress bar once on each machine.
        disable=not accelerator.is_local_main_process,
    )

    for epoch in range(first_epoch, args.num_train_epochs):
        unet.train()
        train_loss = 0.0
        for step in range(len_train_dataloader):
            with accelerator.accumulate(unet):
                _simharness.at("train_step", global_step)
                _simharness.tick(_simharness.knob("step_seconds", 0.83))
                # Convert images to latent space
                latents = vae.encode(torch.Tensor((args.train_batch_size, 3, 512, 512))).latent_dist.sample()
                latents = latents * vae.config.scaling_factor
                noise = torch.randn_like(latents)
                timesteps = torch.Tensor((args.train_batch_size,))
                noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)
                encoder_hidden_states = torch.Tensor((args.train_batch_size, 77, 768))
                target = noise

                # Predict the noise residual and compute loss
                #@905
                model_pred = unet(noisy_latents, timesteps, encoder_hidden_states, return_dict=False)[0]
                loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")

                # Backpropagate
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    params_to_clip = lora_layers
                    #@938
                    accelerator.clip_grad_norm_(params_to_clip, args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

            # Checks if the accelerator has performed an optimization step behind the scenes
            if accelerator.sync_gradients:
                progress_bar.update(1)
                global_step += 1
                accelerator.log({"train_loss": train_loss}, step=global_step)
                train_loss = 0.0

            logs = {"step_loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0]}
            progress_bar.set_postfix(**logs)

            if global_step >= args.max_train_steps:
                break

    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
'''

# ---------------------------------------------------------------- bghira/SimpleTuner
ST = "workspace/SimpleTuner/simpletuner/"

TREE[ST + "__init__.py"] = ""
TREE[ST + "helpers/__init__.py"] = ""
TREE[ST + "helpers/training/__init__.py"] = ""
TREE[ST + "helpers/caching/__init__.py"] = ""
TREE[ST + "helpers/models/__init__.py"] = ""
TREE[ST + "helpers/models/flux/__init__.py"] = ""
TREE[ST + "helpers/data_backend/__init__.py"] = ""

TREE[ST + "helpers/log_format.py"] = r'''
import logging
import os
import re
import sys
import warnings

import torch

# Force colors if requested (e.g., when running in subprocess with piped stdout)
FORCE_COLORS = os.environ.get("FORCE_COLOR", "").lower() in ("1", "true", "yes") or os.environ.get(
    "CLICOLOR_FORCE", ""
).lower() in ("1", "true", "yes")

DISABLE_COLORS = not FORCE_COLORS and (
    os.environ.get("SIMPLETUNER_WEB_MODE", "").lower() in ("1", "true", "yes")
    or os.environ.get("SIMPLETUNER_DISABLE_COLORS", "").lower() in ("1", "true", "yes")
)

if not DISABLE_COLORS:
    try:
        from colorama import Back, Fore, Style, init

        COLORAMA_AVAILABLE = True
    except ImportError:
        COLORAMA_AVAILABLE = False
        DISABLE_COLORS = True
else:
    COLORAMA_AVAILABLE = False


class ColorizedFormatter(logging.Formatter):
    def __init__(self, *args, **kwargs):
        if not DISABLE_COLORS and COLORAMA_AVAILABLE:
            self.level_colors = {
                logging.DEBUG: Fore.CYAN,
                logging.INFO: Fore.GREEN,
                logging.WARNING: Fore.YELLOW,
                logging.ERROR: Fore.RED,
                logging.CRITICAL: Fore.RED + Back.WHITE + Style.BRIGHT,
            }
        else:
            self.level_colors = {}
        super().__init__(*args, **kwargs)

    def format(self, record):
        try:
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                rank = torch.distributed.get_rank()
            else:
                rank = 0
        except Exception:
            rank = 0

        if not DISABLE_COLORS and COLORAMA_AVAILABLE:
            level_color = self.level_colors.get(record.levelno, "")
            reset_color = Style.RESET_ALL
            message = super().format(record)
            return f"[RANK {rank}] {level_color}{message}{reset_color}"
        else:
            message = super().format(record)
            return f"[RANK {rank}] {message}"


# Initialize colorama only if not disabled
if not DISABLE_COLORS and COLORAMA_AVAILABLE:
    # strip=False ensures ANSI codes are preserved even when stdout is piped
    init(autoreset=True, strip=False, convert=(sys.platform == "win32"))

# Create a logger
logger = logging.getLogger()
logger.setLevel(logging.DEBUG)  # Set lowest level to capture everything

# Create handlers
console_handler = logging.StreamHandler(sys.stdout)
default_console_level = os.environ.get("SIMPLETUNER_LOG_LEVEL", "ERROR").upper()
console_numeric_level = getattr(logging, default_console_level, logging.INFO)
console_handler.setLevel(console_numeric_level)
console_handler.setFormatter(ColorizedFormatter("%(asctime)s [%(levelname)s] %(message)s"))
logger.addHandler(console_handler)

warnings.filterwarnings("ignore", category=FutureWarning)
'''

TREE[ST + "helpers/logging.py"] = r'''
import logging
import os


def get_logger(name, disable_webhook=False):
    logger = logging.getLogger(name)
    logger.setLevel(os.environ.get("SIMPLETUNER_LOG_LEVEL", "INFO"))
    return logger
'''

TREE[ST + "helpers/training/state_tracker.py"] = r'''
class StateTracker:
    _webhook_handler = None

    @classmethod
    def get_webhook_handler(cls):
        return cls._webhook_handler

    @classmethod
    def get_job_id(cls):
        return None
'''

TREE[ST + "helpers/training/gpu_circuit_breaker.py"] = r'''
import logging
import time

logger = logging.getLogger("GPUCircuitBreaker")


class GPUCircuitBreaker:
    def __init__(self, webhook_handler=None, job_id=None):
        self.webhook_handler = webhook_handler
        self.state = "closed"

    def record_cuda_error(self, exception, gpu_index=None):
        reason = str(exception).split("\n")[0][:200]
        self._open_circuit("cuda_error", reason, gpu_index=gpu_index, exception=exception)

    #@426
    def _open_circuit(self, fault_type, reason, gpu_index=None, metrics=None, exception=None):
        """Open the circuit breaker and emit webhook."""
        if self.state == "open":
            return  # Already open
        self.state = "open"
        #@445
        logger.error(
            f"GPU circuit breaker OPEN: {fault_type} - {reason} "
            f"(GPU {gpu_index if gpu_index is not None else 'unknown'})"
        )


_breaker = None


def get_gpu_circuit_breaker(webhook_handler=None, job_id=None):
    global _breaker
    if _breaker is None:
        _breaker = GPUCircuitBreaker(webhook_handler, job_id)
    return _breaker


def get_current_gpu_index():
    return 0


#@717
def is_cuda_error(error: Exception) -> bool:
    """Check if an exception is a CUDA-related error."""
    error_str = str(error).lower()
    error_type = type(error).__name__.lower()

    cuda_indicators = [
        "cuda",
        "cudnn",
        "cublas",
        "nccl",
        "device-side assert",
        "out of memory",
        "illegal memory access",
    ]

    # Check exception type - only "cuda" in type name is definitive
    if "cuda" in error_type:
        return True
    return any(ind in error_str for ind in cuda_indicators)
'''

TREE[ST + "helpers/training/quantisation/__init__.py"] = r'''
import logging
import os

import torch

logger = logging.getLogger(__name__)
logger.setLevel(os.environ.get("SIMPLETUNER_LOG_LEVEL", "INFO"))


def _quanto_type_map(model_precision):
    from optimum.quanto import qint8
    return qint8


#@448
def _quanto_model(
    model,
    model_precision,
    base_model_precision=None,
    quantize_activations: bool = False,
):
    try:
        from optimum.quanto import freeze, quantize
    except ImportError as e:
        raise ImportError(f"To use Quanto, please install the optimum library: `pip install \"optimum[quanto]\"`: {e}")

    if model is None:
        return model
    if model_precision == "no_change" or model_precision is None:
        logger.info(f"...No quantisation applied to {model.__class__.__name__}.")
        return model

    #@471
    logger.info(f"Quantising {model.__class__.__name__}. Using {model_precision}.")
    weight_quant = _quanto_type_map(model_precision)
    extra_quanto_args = {}
    extra_quanto_args["exclude"] = [
        "*.norm",
        "*.norm1",
        "*.norm2",
        "*.norm2_context",
        "proj_out",
        "x_embedder",
        "norm_out",
        "context_embedder",
    ]
    if quantize_activations:
        logger.info("Quanto: Freezing model weights and activations")
        extra_quanto_args["activations"] = weight_quant
    else:
        #@546
        logger.info("Quanto: Freezing model weights only")

    try:
        quantize(model, weights=weight_quant, **extra_quanto_args)
        #@551
        freeze(model)
    except Exception as e:
        if "out of memory" in str(e).lower():
            #@554
            logger.error("GPU ran out of memory during quantisation. Use --quantize_via=cpu to use the slower CPU method.")
        #@555
        raise e

    return model


#@1330
def quantise_model(model=None, text_encoders=None, controlnet=None, ema=None, args=None, return_dict=False):
    models = [(model, {"quant_fn": _quanto_model, "model_precision": args.base_model_precision})]
    for i, (mod, qargs) in enumerate(models):
        quant_fn = qargs["quant_fn"]
        #@1360
        models[i] = (quant_fn(mod, model_precision=qargs["model_precision"]), qargs)
    return models[0][0]
'''

TREE[ST + "helpers/models/flux/model.py"] = r'''
import torch
from diffusers import FluxTransformer2DModel
from transformers.models.t5.modeling_t5 import T5EncoderModel

import _simharness


class Flux:
    NAME = "Flux.1"

    def __init__(self, config):
        self.config = config
        self.model = None
        self.text_encoders = [None, T5EncoderModel()]

    def load_model(self):
        self.model = FluxTransformer2DModel()
        return self.model

    #@340
    def _encode_prompts(self, prompts, is_validation=False):
        text_encoder = self.text_encoders[1]
        input_ids = torch.Tensor((len(prompts), 512))
        #@362
        prompt_embeds = text_encoder(input_ids, output_hidden_states=False)[0]
        return prompt_embeds

    #@600
    def model_predict(self, prepared_batch):
        flux_transformer_kwargs = {
            "hidden_states": prepared_batch["noisy_latents"],
            "timestep": prepared_batch["timesteps"],
            "guidance": None,
            "pooled_projections": None,
            "encoder_hidden_states": prepared_batch["encoder_hidden_states"],
            "txt_ids": None,
            "img_ids": None,
            "joint_attention_kwargs": None,
            "return_dict": False,
        }
        #@689
        model_pred = self.model(**flux_transformer_kwargs)[0]
        return {"model_prediction": model_pred}
'''

TREE[ST + "helpers/caching/text_embeds.py"] = r'''
import logging
import os

import torch
from tqdm import tqdm

import _simharness

logger = logging.getLogger("TextEmbeddingCache")
logger.setLevel(os.environ.get("SIMPLETUNER_LOG_LEVEL", "INFO"))


def get_rank():
    return 0


class TextEmbeddingCache:
    def __init__(self, id, model):
        self.id = id
        self.model = model

    def _num_processes(self):
        return 1

    #@600
    def compute_prompt_embeddings_with_model(self, local_records, return_concat=True, progress_callback=None):
        current_idx = -1
        with torch.no_grad():
            text_encoder_output = None
            for record in tqdm(
                local_records,
                desc="Processing prompts",
                disable=return_concat,
                miniters=50,
                leave=False,
                ncols=125,
                position=get_rank() + self._num_processes() + 1,
            ):
                current_idx += 1
                _simharness.at("cache_te", current_idx)
                _simharness.tick(0.11)
                prompt = record.get("prompt")
                #@672
                text_encoder_output = self.model._encode_prompts([prompt], is_validation=False)
        return text_encoder_output

    #@720
    def compute_embeddings_for_prompts(self, all_prompts, return_concat=False, is_validation=False, load_from_cache=True):
        logger.info(f"(id={self.id}) Listing all text embed cache entries")
        local_records = [{"prompt": p} for p in all_prompts]
        #@745
        return self.compute_prompt_embeddings_with_model(local_records, return_concat=return_concat)
'''

TREE[ST + "helpers/data_backend/factory.py"] = r'''
import logging
import os

import _simharness
from simpletuner.helpers.caching.text_embeds import TextEmbeddingCache

logger = logging.getLogger("DataBackendFactory")
logger.setLevel(os.environ.get("SIMPLETUNER_LOG_LEVEL", "INFO"))


#@1400
def configure_multi_databackend(args, accelerator, text_encoders, tokenizers, model):
    logger.info(f"Loading data backend config from {args.data_backend_config}")
    logger.info("Configuring text embed backend: text-embeds")
    text_embed_cache = TextEmbeddingCache("text-embeds", model)
    logger.info("Pre-computing null embedding")
    prompts = [f"a photo of sks person, {i}" for i in range(_simharness.knob("captions", 300))]
    #@1490
    text_embed_cache.compute_embeddings_for_prompts(prompts, return_concat=False, load_from_cache=False)
    logger.info(f"Configuring data backend: {args.dataset_id}")
    logger.info(f"(id={args.dataset_id}) Collecting captions.")
    logger.info(f"(id={args.dataset_id}) Initialise text embed pre-computation using the textfile caption strategy. "
                f"We have {len(prompts)} captions to process.")
    logger.info(f"(id={args.dataset_id}) Completed processing {len(prompts)} captions.")
    logger.info(f"(id={args.dataset_id}) Creating VAE latent cache.")
    logger.info(f"(id={args.dataset_id}) Discovering cache objects..")
'''

TREE[ST + "helpers/training/validation.py"] = r'''
import logging
import os

import torch
from diffusers import FluxPipeline
from tqdm import tqdm

import _simharness

logger = logging.getLogger("Validation")
logger.setLevel(os.environ.get("SIMPLETUNER_LOG_LEVEL", "INFO"))


class Validation:
    def __init__(self, trainer, every_n_steps, prompts):
        self.trainer = trainer
        self.every_n_steps = every_n_steps
        self.prompts = prompts
        self.pipeline = None

    def would_validate(self, step=0, epoch_end=False):
        return bool(self.every_n_steps) and step > 0 and step % self.every_n_steps == 0

    #@4100
    def _validate_work_items(self, step):
        local_work_items = [{"shortname": f"prompt_{i}", "prompt": p} for i, p in enumerate(self.prompts)]
        logger.info(
            f"[Rank 0] Processing {len(local_work_items)} local validation work items "
            f"(distributed_mode=False, total={len(local_work_items)}, "
            f"validation_worker_count=1, cp_validation=False, "
            f"work_item_prompts={[item['prompt'] for item in local_work_items]})"
        )
        for item in tqdm(
            local_work_items,
            desc="Processing validation prompts",
            total=len(local_work_items),
            leave=False,
            position=1,
            disable=False,
        ):
            _simharness.at("validation_prompt", step)
            #@4200
            validation_images = self.validate_prompt(item["prompt"], item["shortname"])

    #@4250
    def validate_prompt(self, prompt, validation_shortname):
        if self.pipeline is None:
            self.pipeline = FluxPipeline(transformer=self.trainer.model.model)
        pipeline_kwargs = {"prompt": prompt, "num_inference_steps": 20, "guidance_scale": 3.0, "height": 1024,
                           "width": 1024}
        #@4330
        return self.pipeline(**pipeline_kwargs).images

    #@4400
    def run_validations(self, validation_type="intermediary", step=0, force_evaluation=False, epoch_end=False):
        if not self.would_validate(step=step, epoch_end=epoch_end) and not force_evaluation:
            return self
        logger.info("Validations are generating.. this might take a minute! 🖼️")
        #@4418
        self._validate_work_items(step)
        logger.info("Validation completed.")
        return self
'''

TREE[ST + "helpers/training/trainer.py"] = r'''
import logging
import math
import os

import torch
from accelerate import Accelerator
from tqdm import tqdm

import _simharness
from simpletuner.helpers.data_backend.factory import configure_multi_databackend
from simpletuner.helpers.models.flux.model import Flux
from simpletuner.helpers.training.quantisation import quantise_model
from simpletuner.helpers.training.validation import Validation

logger = logging.getLogger("SimpleTuner")
logger.setLevel(os.environ.get("SIMPLETUNER_LOG_LEVEL", "INFO"))


class _Args:
    def __init__(self, d):
        self.__dict__.update(d)


class Trainer:
    def __init__(self, exit_on_error=False):
        self.config = _Args(_simharness.knob("config", {}))
        self.accelerator = Accelerator()
        self.state = {"global_step": 0, "first_epoch": 1}
        self.model = Flux(self.config)
        self.validation = None

    def cleanup(self):
        return None

    def init_preprocessing_models(self):
        logger.info(f"Load VAE: {self.config.pretrained_model_name_or_path}")
        logger.info("Loading VAE onto accelerator, converting from torch.float32 to torch.bfloat16")
        logger.info("Load tokenizers")
        logger.info(f"Loading OpenAI CLIP-L text encoder from {self.config.pretrained_model_name_or_path}/text_encoder..")
        logger.info(f"Loading T5 XXL v1.1 text encoder from {self.config.pretrained_model_name_or_path}/text_encoder_2..")
        logger.info("Moving text encoder to GPU.")
        _simharness.tick(12.6)

    #@1290
    def init_data_backend(self):
        self.init_clear_backend_cache() if hasattr(self, "init_clear_backend_cache") else None
        #@1302
        configure_multi_databackend(self.config, self.accelerator, None, None, self.model)
        _simharness.tick(3.1)

    def init_load_base_model(self):
        logger.info(f"Loading model: {self.config.pretrained_model_name_or_path}")
        _simharness.tick(31.4)
        self.model.load_model()

    #@1480
    def init_precision(self, preprocessing_models_only=False, ema_only=False):
        if preprocessing_models_only or ema_only:
            return
        if self.config.base_model_precision != "no_change":
            quantize_via = getattr(self.config, "quantize_via", "accelerator")
            #@1510
            self.model.model = quantise_model(model=self.model.model, args=self.config)

    def init_validations(self):
        self.validation = Validation(self, self.config.validation_steps, self.config.validation_prompts)

    #@6755
    def _run_validation(
        self,
        step: int,
        *,
        manual_validation_requested: bool = False,
        epoch_end: bool = False,
    ) -> bool:
        if self.validation is None:
            return False

        should_validate = manual_validation_requested or self.validation.would_validate(step=step, epoch_end=epoch_end)

        try:
            self.validation.run_validations(
                validation_type="intermediary",
                step=step,
                force_evaluation=manual_validation_requested,
                epoch_end=epoch_end,
            )
        except Exception as error:
            root_logger = logging.getLogger()
            #@6788
            root_logger.exception(f"Validation run failed at step {step}: {error}")

        return should_validate

    #@6840
    def train(self):
        initial_msg = "\n***** Running training *****"
        max_steps = self.config.max_train_steps
        per_epoch = self.config.batches_per_epoch
        num_epochs = math.ceil(max_steps / per_epoch)
        initial_msg += f"\n-  Num batches = {per_epoch}"
        initial_msg += f"\n-  Num Epochs = {num_epochs}"
        initial_msg += f"\n  - Current Epoch = {self.state['first_epoch']}"
        initial_msg += f"\n-  Total train batch size (w. parallel, distributed & accumulation) = 1"
        initial_msg += f"\n  - Instantaneous batch size per device = 1"
        initial_msg += f"\n  - Gradient Accumulation steps = 1"
        initial_msg += f"\n-  Total optimization steps = {max_steps}"
        initial_msg += f"\n  - Steps completed: {self.state['global_step']}"
        initial_msg += f"\n-  Total optimization steps remaining = {max_steps - self.state['global_step']}"
        logger.info(initial_msg)
        self.config.num_train_epochs = num_epochs

        # Only show the progress bar once on each machine.
        show_progress_bar = True
        if not self.accelerator.is_local_main_process:
            show_progress_bar = False
        progress_bar = tqdm(
            range(0, int(self.config.max_train_steps)),
            disable=not show_progress_bar,
            initial=self.state["global_step"],
            desc=f"Epoch {self.state['first_epoch']}/{self.config.num_train_epochs} Steps",
            dynamic_ncols=True,
        )
        self.accelerator.wait_for_everyone()

        step = self.state["global_step"]
        while step < max_steps:
            prepared_batch = {"noisy_latents": torch.Tensor((1, 4096, 64)), "timesteps": torch.Tensor((1,)),
                              "encoder_hidden_states": torch.Tensor((1, 512, 4096))}
            _simharness.at("train_step", step)
            _simharness.tick(_simharness.knob("step_seconds", 3.7))
            with self.accelerator.accumulate(self.model.model):
                #@7090
                model_pred = self.model_predict(prepared_batch=prepared_batch)
                loss = torch.nn.functional.mse_loss(model_pred["model_prediction"].float(), prepared_batch["noisy_latents"].float(), reduction="none")
                loss = loss.mean()
                self.accelerator.backward(loss)
            step += 1
            self.state["global_step"] = step
            progress_bar.update(1)
            logs = {"lr": 8e-05 if step > 50 else 8e-05 * step / 50, "step_loss": loss.item()}
            progress_bar.set_postfix(**logs)
            #@7260
            self._run_validation(step)
        logger.info("Training has completed.")

    #@7400
    def model_predict(self, prepared_batch):
        #@7410
        return self.model.model_predict(prepared_batch)
'''

TREE[ST + "train.py"] = r'''
import atexit
import logging
from os import environ

from simpletuner.helpers import log_format  # noqa: F401
from simpletuner.helpers.logging import get_logger
from simpletuner.helpers.training.gpu_circuit_breaker import get_current_gpu_index, get_gpu_circuit_breaker, is_cuda_error
from simpletuner.helpers.training.state_tracker import StateTracker
from simpletuner.helpers.training.trainer import Trainer

logger = get_logger("SimpleTuner")


#@88
def _run_training(trainer: Trainer) -> None:
    trainer.init_preprocessing_models()
    #@103
    trainer.init_data_backend()
    #@108
    trainer.init_load_base_model()
    #@115
    trainer.init_precision()
    trainer.init_validations()
    #@133
    trainer.train()


if __name__ == "__main__":
    trainer = None

    def _cleanup_trainer():
        if trainer is not None:
            try:
                trainer.cleanup()
            except Exception as exc:
                logger.error("Trainer cleanup failed during interpreter exit: %s", exc, exc_info=True)

    atexit.register(_cleanup_trainer)
    try:
        import multiprocessing

        multiprocessing.set_start_method("fork")
    except Exception as e:
        logger.error(
            "Failed to set the multiprocessing start method to 'fork'. Unexpected behaviour such as high memory overhead or poor performance may result."
            f"\nError: {e}"
        )
    try:
        trainer = Trainer(
            exit_on_error=True,
        )
        #@306
        _run_training(trainer)
    except KeyboardInterrupt:
        pass
    except Exception as e:
        import traceback

        # Check if this is a CUDA/GPU error and trigger circuit breaker
        if is_cuda_error(e):
            try:
                circuit_breaker = get_gpu_circuit_breaker(
                    webhook_handler=StateTracker.get_webhook_handler(),
                    job_id=StateTracker.get_job_id(),
                )
                gpu_idx = get_current_gpu_index()
                circuit_breaker.record_cuda_error(e, gpu_idx)
                logger.error(f"GPU circuit breaker triggered by CUDA error on GPU {gpu_idx}: {e}")
            except Exception as cb_err:
                logger.warning(f"Failed to trigger GPU circuit breaker: {cb_err}")
        raise
    finally:
        if trainer is not None:
            trainer.cleanup()
'''

# ---------------------------------------------------------------- Nerogar/OneTrainer
OT = "home/OneTrainer/"

TREE[OT + "modules/__init__.py"] = ""
TREE[OT + "modules/trainer/__init__.py"] = ""
TREE[OT + "modules/modelSetup/__init__.py"] = ""
TREE[OT + "modules/modelSampler/__init__.py"] = ""
TREE[OT + "modules/util/__init__.py"] = ""

TREE[OT + "modules/util/TrainProgress.py"] = r'''
class TrainProgress:
    def __init__(self):
        self.epoch = 0
        self.epoch_step = 0
        self.epoch_sample = 0
        self.global_step = 0

    def next_step(self, batch_size):
        self.epoch_step += 1
        self.epoch_sample += batch_size
        self.global_step += 1

    def next_epoch(self):
        self.epoch_step = 0
        self.epoch_sample = 0
        self.epoch += 1

    def filename_string(self):
        return f"{self.global_step}-{self.epoch}-{self.epoch_step}"
'''

TREE[OT + "modules/modelSetup/BaseFluxSetup.py"] = r'''
import torch

import _simharness


class BaseFluxSetup:
    #@380
    def predict(self, model, batch, config, train_progress, *, deterministic=False):
        with model.autocast_context:
            latent_image = batch["latent_image"]
            scaled_noisy_latent_image = latent_image
            text_encoder_output = torch.Tensor((1, 512, 4096))
            guidance = None
            #@470
            predicted_flow = model.transformer(
                hidden_states=scaled_noisy_latent_image.to(dtype=model.train_dtype.torch_dtype()),
                timestep=torch.Tensor((1,)),
                guidance=guidance,
                pooled_projections=None,
                encoder_hidden_states=text_encoder_output,
                txt_ids=None,
                img_ids=None,
                joint_attention_kwargs=None,
                return_dict=True,
            )[0]
        return {"loss_type": "target", "predicted": predicted_flow, "target": latent_image}

    def calculate_loss(self, model, batch, data, config):
        return torch.nn.functional.mse_loss(data["predicted"].float(), data["target"].float())

    def setup_train_device(self, model, config):
        return None

    def after_optimizer_step(self, model, config, train_progress):
        return None

    def report_to_tensorboard(self, *a, **k):
        return None
'''

TREE[OT + "modules/modelSampler/FluxSampler.py"] = r'''
import torch
from tqdm import tqdm

import _simharness


class FluxSampler:
    def __init__(self, model):
        self.model = model

    #@80
    @torch.no_grad()
    def __sample_base(self, prompt, height, width, seed, diffusion_steps, cfg_scale, on_update_progress=lambda _, __: None):
        with self.model.autocast_context:
            transformer = self.model.transformer
            latent_image = torch.Tensor((1, 4096, 64))
            timesteps = list(range(diffusion_steps))
            for i, timestep in enumerate(tqdm(timesteps, desc="sampling")):
                _simharness.at("sample_step", i)
                _simharness.tick(0.69)
                # predict the noise residual
                #@170
                noise_pred = transformer(
                    hidden_states=latent_image,
                    timestep=torch.Tensor((1,)),
                    guidance=None,
                    pooled_projections=None,
                    encoder_hidden_states=None,
                    txt_ids=None,
                    img_ids=None,
                    joint_attention_kwargs=None,
                    return_dict=True,
                )[0]
                on_update_progress(i + 1, len(timesteps))
        return latent_image

    #@260
    def sample(self, sample_config, destination, image_format=None, video_format=None, audio_format=None,
               on_sample=lambda _: None, on_update_progress=lambda _, __: None):
        #@275
        image = self.__sample_base(
            prompt=sample_config.prompt,
            height=sample_config.height,
            width=sample_config.width,
            seed=sample_config.seed,
            diffusion_steps=sample_config.diffusion_steps,
            cfg_scale=sample_config.cfg_scale,
            on_update_progress=on_update_progress,
        )
'''

TREE[OT + "modules/trainer/GenericTrainer.py"] = r'''
import math
import traceback

import torch
from diffusers import AutoencoderKL, FluxTransformer2DModel
from mgds.MGDS import MGDS
from mgds.pipelineModules.DiskCache import DiskCache
from mgds.pipelineModules.EncodeVAE import EncodeVAE
from tqdm import tqdm

import _simharness
from modules.modelSampler.FluxSampler import FluxSampler
from modules.modelSetup.BaseFluxSetup import BaseFluxSetup
from modules.util.TrainProgress import TrainProgress


class _Dtype:
    def torch_dtype(self):
        return torch.bfloat16


class _Model:
    def __init__(self):
        self.transformer = FluxTransformer2DModel()
        self.vae = AutoencoderKL()
        self.train_progress = TrainProgress()
        self.autocast_context = torch.no_grad()
        self.train_dtype = _Dtype()
        self.optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.Tensor((16, 3072)))], lr=3e-4)
        self.ema = None


class _SampleConfig:
    def __init__(self, d):
        self.__dict__.update(d)


class _DataSet:
    def __init__(self, vae, n):
        self.n = n
        self.epoch = 0
        self.mgds = MGDS([DiskCache(EncodeVAE(vae), n)])

    def start_next_epoch(self):
        if self.epoch == 0 and _simharness.knob("latent_caching", True):
            #@118
            self.mgds.start_next_epoch()
        self.epoch += 1

    def approximate_length(self):
        return self.n


class _DataLoader:
    def __init__(self, vae, n):
        self.ds = _DataSet(vae, n)

    def get_data_set(self):
        return self.ds

    def get_data_loader(self):
        return ({"latent_image": torch.Tensor((1, 16, 128, 128)), "concept_type": [0]} for _ in range(self.ds.n))


class GenericTrainer:
    def __init__(self, config, callbacks, commands):
        self.config = config
        self.model = None
        self.sample_queue = []
        self.one_step_trained = False

    def start(self):
        self.model = _Model()
        self.model_setup = BaseFluxSetup()
        self.model_sampler = FluxSampler(self.model)
        self.data_loader = _DataLoader(self.model.vae, self.config["epoch_length"])
        print("Selected layers: 494")
        print("Deselected layers: 0")
        print("Note: Enable verbose logging to see the selected and deselected layers.")
        for _ in tqdm(range(1), desc="enumerating sample paths"):
            _simharness.tick(0.01)

    def __needs_sample(self, train_progress):
        every = self.config.get("sample_after")
        return bool(every) and train_progress.global_step > 0 and train_progress.global_step % every == 0

    #@213
    def __sample_loop(self, train_progress, train_device, sample_config_list, ema_applied, folder_postfix="",
                      is_custom_sample=False):
        for i, sample_config in enumerate(sample_config_list):
            try:
                sample_path = f"{self.config['workspace_dir']}/samples/{i} - {sample_config.prompt}/" \
                              f"training-sample-{train_progress.filename_string()}"
                self.model.transformer.eval()
                #@265
                self.model_sampler.sample(
                    sample_config=sample_config,
                    destination=sample_path,
                    image_format="JPG",
                    video_format="MP4",
                    audio_format="MP3",
                )
            except Exception:
                traceback.print_exc()
                tqdm.write("Error during sampling, proceeding without sampling")

            torch.cuda.empty_cache()

    def __sample_during_training(self, train_progress, train_device, sample_params_list=None):
        torch.cuda.empty_cache()
        sample_params_list = [_SampleConfig(d) for d in self.config.get("samples", [])]
        self.__sample_loop(train_progress, train_device, sample_params_list, False)

    #@616
    def train(self):
        train_device = torch.device("cuda")
        train_progress = self.model.train_progress

        has_gradient = False
        accumulated_loss = 0.0
        ema_loss = None
        ema_loss_steps = 0
        epochs = range(train_progress.epoch, self.config["epochs"], 1)

        #@642
        for _epoch in tqdm(epochs, desc="epoch"):
            #@651
            self.data_loader.get_data_set().start_next_epoch()
            current_epoch_length = self.data_loader.get_data_set().approximate_length()

            batches = step_tqdm = tqdm(self.data_loader.get_data_loader(), desc="step", total=current_epoch_length,
                             initial=train_progress.epoch_step)
            for batch in batches:
                if self.__needs_sample(train_progress):
                    self.sample_queue.append(lambda: self.__sample_during_training(train_progress, train_device))

                if not has_gradient:
                    for fun in self.sample_queue:
                        fun()
                    self.sample_queue = []

                _simharness.at("train_step", train_progress.global_step, epoch=train_progress.epoch)
                _simharness.tick(self.config.get("step_seconds", 1.81))
                #@770
                model_output_data = self.model_setup.predict(self.model, batch, self.config, train_progress)

                loss = self.model_setup.calculate_loss(self.model, batch, model_output_data, self.config)
                loss.backward()
                has_gradient = True
                detached_loss = loss.detach()
                accumulated_loss += detached_loss.item()

                if True:
                    self.model.optimizer.step()
                    self.model.optimizer.zero_grad(set_to_none=True)
                    has_gradient = False

                    accumulated_loss_cpu = accumulated_loss
                    if train_progress.global_step in self.config.get("nan_at_steps", []):
                        accumulated_loss_cpu = float("nan")
                    if math.isnan(accumulated_loss_cpu):
                        #@801
                        raise RuntimeError("Training loss became NaN. This may be due to invalid parameters, precision issues, or a bug in the loss computation.")

                    ema_loss = ema_loss or accumulated_loss_cpu
                    ema_loss_steps += 1
                    ema_loss_decay = min(0.99, 1 - (1 / ema_loss_steps))
                    ema_loss = (ema_loss * ema_loss_decay) + (accumulated_loss_cpu * (1 - ema_loss_decay))
                    step_tqdm.set_postfix({
                        'loss': accumulated_loss_cpu,
                        'smooth loss': ema_loss,
                    })
                    accumulated_loss = 0.0
                    self.one_step_trained = True

                train_progress.next_step(1)

            train_progress.next_epoch()

    def end(self):
        if self.one_step_trained:
            save_path = self.config["output_model_destination"]
            print("Saving " + save_path)
            _simharness.tick(9.5)
'''

TREE[OT + "scripts/train.py"] = r'''
from util.import_util import script_imports

script_imports()

import json

import _simharness
from modules.trainer.GenericTrainer import GenericTrainer


def main():
    train_config = _simharness.knob("config", {})
    callbacks = commands = None

    trainer = GenericTrainer(train_config, callbacks, commands)

    trainer.start()

    canceled = False
    try:
        #@58
        trainer.train()
    except KeyboardInterrupt:
        canceled = True

    if not canceled or train_config.get("backup_before_save"):
        trainer.end()


if __name__ == '__main__':
    #@68
    main()
'''

TREE[OT + "scripts/util/__init__.py"] = ""
TREE[OT + "scripts/util/import_util.py"] = r'''
import os
import sys


def script_imports(allow_zluda=True):
    # insert parent dir of the script into sys.path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
'''

LIB["deepspeed/launcher/__init__.py"] = ""
LIB["deepspeed/launcher/runner.py"] = r'''
import base64
import json
import os
import subprocess
import sys

import _simharness
from deepspeed.utils.logging import logger


def fetch_hostfile(hostfile_path):
    if not os.path.isfile(hostfile_path):
        #@215
        logger.warning("Unable to find hostfile, will proceed with training with "
                       "local resources only.")
        return None


#@420
def main(args=None):
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_gpus", "--num-gpus", type=int, default=-1)
    parser.add_argument("user_script")
    parser.add_argument("user_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(args)
    fetch_hostfile("/job/hostfile")
    world_info = base64.urlsafe_b64encode(json.dumps({"localhost": [0]}).encode()).decode()
    cmd = [sys.executable, "-u", "-m", "deepspeed.launcher.launch", f"--world_info={world_info}",
           "--master_addr=127.0.0.1", "--master_port=29500", "--enable_each_rank_log=None", args.user_script] + args.user_args
    #@605
    logger.info(f"cmd = {' '.join(cmd)}")
    _simharness.publish_clock()
    result = subprocess.Popen(cmd, env=dict(os.environ))
    result.wait()
    _simharness.sync_clock()
    # In case of failure must propagate the error-condition back to the caller (usually shell). The
    # actual error and traceback should have been printed in the subprocess, so in order to avoid
    # unnecessary noise we just quietly exit here with the same code as the subprocess
    if result.returncode > 0:
        sys.exit(result.returncode)


if __name__ == "__main__":
    main()
'''

LIB["deepspeed/launcher/launch.py"] = r'''
import os
import subprocess
import sys

import _simharness
from deepspeed.utils.logging import logger


#@120
def main():
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--world_info")
    parser.add_argument("--master_addr")
    parser.add_argument("--master_port")
    parser.add_argument("--enable_each_rank_log")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    #@146
    logger.info("WORLD INFO DICT: {'localhost': [0]}")
    #@152
    logger.info("nnodes=1, num_local_procs=1, node_rank=0")
    #@163
    logger.info("global_rank_mapping=defaultdict(<class 'list'>, {'localhost': [0]})")
    logger.info("dist_world_size=1")
    #@168
    logger.info("Setting CUDA_VISIBLE_DEVICES=0")
    cmd = [sys.executable, "-u", args.training_script, "--local_rank=0"] + args.training_script_args
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    _simharness.publish_clock()
    process = subprocess.Popen(cmd, env=env)
    pid = _simharness.knob("child_pid", 4243)
    #@256
    logger.info(f"process {pid} spawned with command: {cmd}")
    process.wait()
    _simharness.sync_clock()
    if process.returncode != 0:
        sigkill_handler(process.returncode, cmd, pid)


#@310
def sigkill_handler(last_return_code, cmd, pid):
    #@319
    logger.info(f"Killing subprocess {pid}")
    #@325
    logger.error(f"{cmd} exits with return code = {last_return_code}")
    sys.exit(last_return_code)


if __name__ == "__main__":
    main()
'''

# ---------------------------------------------------------------- tdrussell/diffusion-pipe
DP = "workspace/diffusion-pipe/"

TREE[DP + "utils/__init__.py"] = ""
TREE[DP + "models/__init__.py"] = ""
TREE[DP + "models/wan/__init__.py"] = ""

TREE[DP + "utils/common.py"] = r'''
import torch


def is_main_process():
    return True


def empty_cuda_cache():
    torch.cuda.empty_cache()
'''

TREE[DP + "utils/dataset.py"] = r'''
import functools
import multiprocessing as mp

import torch
from tqdm import tqdm

import _simharness

NUM_PROC = 1


def _init(queue):
    global rank
    rank = queue.get()


#@85
def _map_and_cache(dataset, map_fn, cache_dir, cache_file_prefix="", new_fingerprint_args=None, regenerate_cache=False,
                   caching_batch_size=1):
    # Let each worker process know its rank
    manager = mp.Manager()
    id_queue = manager.Queue()
    for i in range(NUM_PROC):
        id_queue.put(i)

    pool = mp.Pool(NUM_PROC, _init, (id_queue,))

    completed_batches = 0
    total_batches = len(dataset) // caching_batch_size

    map_iter = pool.imap(functools.partial(wrapper, map_fn), iter(dataset))
    #@155
    for batch in tqdm(map_iter, initial=completed_batches, total=total_batches):
        _simharness.tick(1.31)

    pool.close()
    return None


#@170
def wrapper(map_fn, example):
    global rank
    #@174
    return map_fn(example, rank)


class SizeBucketDataset:
    def __init__(self, size_bucket, n):
        self.size_bucket = size_bucket
        self.n = n

    #@234
    def cache_latents(self, map_fn, regenerate_cache=False, trust_cache=False, caching_batch_size=1):
        print(f"caching latents: {self.size_bucket}")
        examples = [{"image_file": f"/data/wan/img_{i:03d}.jpg", "index": i} for i in range(self.n)]
        #@240
        _map_and_cache(examples, map_fn, "/data/wan/cache", cache_file_prefix="latents_", caching_batch_size=caching_batch_size)

    #@301
    def cache_text_embeddings(self, map_fn, i, regenerate_cache=False, caching_batch_size=1):
        print(f"caching text embeddings: {self.size_bucket}")
        examples = [{"caption": f"caption {j}", "index": j} for j in range(self.n)]
        _map_and_cache(examples, map_fn, "/data/wan/cache", cache_file_prefix=f"text_embeddings_{i}_")


class DatasetManager:
    def __init__(self, model, regenerate_cache=False, trust_cache=False, caching_batch_size=1):
        self.model = model
        self.datasets = []

    def register(self, dataset):
        self.datasets.append(dataset)

    #@1167
    def cache(self, unload_models=True):
        for ds in self.datasets:
            #@1185
            ds.cache_latents(self.model.latents_map_fn)
            ds.cache_text_embeddings(self.model.text_embeddings_map_fn, 0)
'''

TREE[DP + "utils/saver.py"] = r'''
import torch

import _simharness
from utils.common import is_main_process


#@14
def convert_state_dict_dtype(state_dict, dtype):
    for key, v in state_dict.items():
        #@16
        state_dict[key] = v.to(device="cpu", dtype=dtype)


class Saver:
    def __init__(self, args, config, is_adapter, save_root, model, train_dataloader, model_engine, pipeline_model):
        self.args = args
        self.config = config
        self.is_adapter = is_adapter
        self.save_root = save_root
        self.model_engine = model_engine
        self.pipeline_model = pipeline_model

    #@58
    def save_adapter(self, name):
        save_dir = f"{self.save_root}/{name}"
        partial_state_dict = {f"diffusion_model.blocks.{i}.self_attn.q.lora_A.weight": torch.Tensor((32, 5120))
                              for i in range(40)}
        _simharness.at("save_adapter", name)
        if "save_dtype" in self.config:
            #@76
            convert_state_dict_dtype(partial_state_dict, self.config["save_dtype"])
        _simharness.tick(2.2)

    #@110
    def save_model(self, name):
        if is_main_process():
            print(f"Saving model to directory {name}")
        if self.is_adapter:
            #@114
            self.save_adapter(name)

    def save_checkpoint(self, step, examples):
        self.model_engine.save_checkpoint(self.save_root, client_state={"step": step, "examples": examples},
                                          save_latest=True, exclude_frozen_parameters=True)

    #@146
    def process_step(self, step, examples):
        checkpointed, saved = False, False
        if "save_every_n_steps" in self.config and step % self.config["save_every_n_steps"] == 0:
            #@166
            self.save_model(f"step{step}")
            saved = True
        return checkpointed, saved
'''

TREE[DP + "models/wan/wan.py"] = r'''
import torch
from torch import nn

import _simharness
from diffusers import AutoencoderKL


class _Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(5120, 5120)

    #@120
    def forward(self, x):
        q = self.q(x)
        #@128
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=None, is_causal=False)


class TransformerLayer(nn.Module):
    def __init__(self, block_idx):
        super().__init__()
        self.block_idx = block_idx
        self.self_attn = _Attn()

    #@820
    def forward(self, inputs):
        x, context, t = inputs
        #@834
        x = self.self_attn(x)
        return (x, context, t)


class InitialLayer(nn.Module):
    def forward(self, inputs):
        return inputs


class FinalLayer(nn.Module):
    def forward(self, inputs):
        return inputs[0]


class WanPipeline:
    name = "wan"

    def __init__(self, config):
        self.config = config
        self.vae = AutoencoderKL()

    def load_diffusion_model(self):
        _simharness.tick(41.0)

    def to_layers(self):
        return [InitialLayer()] + [TransformerLayer(i) for i in range(6)] + [FinalLayer()]

    #@1066
    def latents_map_fn(self, example, rank):
        _simharness.at("cache_latents", example["index"])
        _simharness.tick(1.2)
        tensor = torch.Tensor((1, 3, 1, 480, 832))
        with torch.no_grad():
            #@1090
            latents = self.vae.encode(tensor).latent_dist.sample()
        return {"latents": latents}

    def text_embeddings_map_fn(self, example, rank):
        _simharness.tick(0.4)
        return {"text_embeddings": None}
'''

TREE[DP + "train.py"] = r'''
import argparse
import os
import time

import deepspeed
import torch
from deepspeed import comm as dist
from tqdm import tqdm

import _simharness
from models.wan import wan
import utils.dataset as dataset_util
import utils.saver
from utils.common import empty_cuda_cache, is_main_process

parser = argparse.ArgumentParser()
parser.add_argument("--config", help="Path to TOML configuration file.")
parser.add_argument("--local_rank", type=int, default=-1, help="local rank passed from distributed launcher")
parser.add_argument("--resume_from_checkpoint", nargs="?", const=True, default=None)
parser = deepspeed.add_config_arguments(parser)
args = parser.parse_args()


#@176
def evaluate_single(model_engine, eval_dataloader, eval_gradient_accumulation_steps, quantile, pbar=None):
    total_loss = 0
    count = 0
    for i in range(_simharness.knob("eval_batches", 4)):
        model_engine.reset_activation_shape()
        _simharness.at("eval_step", model_engine.global_steps, quantile=quantile, batch=i)
        #@183
        loss = model_engine.eval_batch(None, num_micro_batches=eval_gradient_accumulation_steps).item()
        if pbar:
            pbar.update(1)
        total_loss += loss
        count += 1
    return total_loss / count


#@196
def _evaluate(model_engine, eval_dataloaders, tb_writer, step, eval_gradient_accumulation_steps):
    pbar_total = len(eval_dataloaders) * 4 * _simharness.knob("eval_batches", 4)
    if is_main_process():
        print("Running eval")
        pbar = tqdm(total=pbar_total)
    else:
        pbar = None

    start = time.time()
    for name, eval_dataloader in eval_dataloaders.items():
        losses = []
        for quantile in (0.1, 0.3, 0.5, 0.7):
            #@210
            loss = evaluate_single(model_engine, eval_dataloader, eval_gradient_accumulation_steps, quantile, pbar=pbar)
            losses.append(loss)
    duration = time.time() - start
    if is_main_process():
        pbar.close()


#@230
def evaluate(model, model_engine, eval_dataloaders, tb_writer, step, eval_gradient_accumulation_steps, disable_block_swap):
    if len(eval_dataloaders) == 0:
        return
    empty_cuda_cache()
    with torch.no_grad():
        #@240
        _evaluate(model_engine, eval_dataloaders, tb_writer, step, eval_gradient_accumulation_steps)
    empty_cuda_cache()


if __name__ == "__main__":
    config = _simharness.knob("config", {})
    deepspeed.init_distributed()
    model = wan.WanPipeline(config)
    dataset_manager = dataset_util.DatasetManager(model, caching_batch_size=1)
    train_data = dataset_util.SizeBucketDataset((480, 832, 1), _simharness.knob("images", 12))
    dataset_manager.register(train_data)
    #@516
    dataset_manager.cache()
    #@529
    model.load_diffusion_model()
    layers = model.to_layers()
    pipeline_model = deepspeed.PipelineModule(layers=layers, num_stages=1, partition_method="parameters")
    ds_config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": config.get("gradient_accumulation_steps", 4),
                 "steps_per_print": config.get("steps_per_print", 1), "train_batch_size": 4}
    model_engine, optimizer, _, _ = deepspeed.initialize(args=args, model=pipeline_model, config=ds_config)
    #@633
    print(f"Global batch size = {ds_config['train_batch_size']}")

    step = 1
    examples = 4
    epoch = 1
    eval_dataloaders = {"eval0": None} if config.get("eval_every_n_steps") else {}
    saver = utils.saver.Saver(args, config, True, config.get("output_dir", "/data/wan/output/20260822_12-00-00"),
                              model, None, model_engine, pipeline_model)

    if config.get("eval_before_first_step", True) and eval_dataloaders:
        #@909
        evaluate(model, model_engine, eval_dataloaders, None, 0, 1, False)

    epoch_loss = 0
    num_steps = 0
    empty_cuda_cache()
    while True:
        model_engine.reset_activation_shape()
        _simharness.at("train_step", step)
        #@917
        loss = model_engine.train_batch(None).item()
        epoch_loss += loss
        num_steps += 1

        if config.get("eval_every_n_steps") and step % config["eval_every_n_steps"] == 0:
            #@946
            evaluate(model, model_engine, eval_dataloaders, None, step, 1, False)

        #@967
        checkpointed, saved = saver.process_step(step, examples)
        if "max_steps" in config and step >= config["max_steps"]:
            final_model_name = f"step{step}"
            break
        step += 1
        examples += 4

    if not saved:
        saver.save_model(final_model_name)

    if is_main_process():
        print("TRAINING COMPLETE!")
'''

# ---------------------------------------------------------------- transformers Trainer user scripts
HF = "home/llm-finetune/"

TREE[HF + "finetune_llama.py"] = r'''
import logging
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

import _simharness


def main():
    cfg = _simharness.knob("script", {})
    transformers.utils.logging.set_verbosity_info()
    lib_logger = transformers.utils.logging.get_logger("transformers.modeling_utils")
    cfg_logger = transformers.utils.logging.get_logger("transformers.configuration_utils")
    model_id = cfg.get("model_id", "meta-llama/Llama-3.1-8B")
    snap = f"/home/user/.cache/huggingface/hub/models--{model_id.replace('/', '--')}/snapshots/0e9e39f249a16976918f6564b8830bc894c89659"
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    tokenizer.pad_token = tokenizer.eos_token
    cfg_logger.info(f"loading configuration file config.json from cache at {snap}/config.json")
    lib_logger.info(f"loading weights file model.safetensors from cache at {snap}/model.safetensors.index.json")
    lib_logger.info("Instantiating LlamaForCausalLM model under default dtype torch.bfloat16.")
    #@40
    model = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch.bfloat16, device_map="cuda")
    lib_logger.info("All model checkpoint weights were used when initializing LlamaForCausalLM.\n")
    lib_logger.info(f"All the weights of LlamaForCausalLM were initialized from the model checkpoint at {model_id}.\n"
                    "If your task is similar to the task the model of the checkpoint was trained on, you can already use "
                    "LlamaForCausalLM for predictions without further training.")
    train_dataset = list(range(cfg.get("train_examples", 2000)))
    eval_dataset = list(range(cfg.get("eval_batches", 50)))
    training_args = TrainingArguments(output_dir=cfg.get("output_dir", "out/llama-sft"), **cfg.get("args", {}))
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset, eval_dataset=eval_dataset,
                      processing_class=tokenizer)
    #@57
    trainer.train()
    trainer.save_model()


if __name__ == "__main__":
    #@62
    main()
'''

TREE["home/transformers/examples/pytorch/language-modeling/run_clm.py"] = r'''
import logging
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

import _simharness

logger = logging.getLogger(__name__)


#@260
def main():
    cfg = _simharness.knob("script", {})
    training_args = TrainingArguments(output_dir=cfg.get("output_dir", "/tmp/test-clm"), **cfg.get("args", {}))
    # Setup logging
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    # The default of training_args.log_level is passive, so we set log level at info here to have that default.
    transformers.utils.logging.set_verbosity_info()
    log_level = logging.INFO
    logger.setLevel(log_level)
    transformers.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.enable_explicit_format()

    # Log on each process the small summary:
    logger.warning(
        f"Process rank: 0, device: cuda:0, n_gpu: 1, "
        + f"distributed training: False, 16-bits training: False"
    )
    logger.info(f"Training/evaluation parameters TrainingArguments(output_dir={training_args.output_dir}, "
                f"per_device_train_batch_size={training_args.per_device_train_batch_size}, "
                f"gradient_accumulation_steps={training_args.gradient_accumulation_steps}, bf16=True, ...)")
    model = AutoModelForCausalLM.from_pretrained(cfg.get("model_id", "meta-llama/Llama-3.2-3B"), torch_dtype=torch.bfloat16)
    train_dataset = list(range(cfg.get("train_examples", 4000)))
    eval_dataset = list(range(cfg.get("eval_batches", 20)))
    logger.info(f"Sample 1823 of the training set: {{'input_ids': [128000, 791, 4062, 14198, 39935, ...]}}.")
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset, eval_dataset=eval_dataset)
    # Training
    #@640
    train_result = trainer.train(resume_from_checkpoint=None)
    trainer.save_model()  # Saves the tokenizer too for easy upload


def _mp_fn(index):
    # For xla_spawn (TPUs)
    main()


if __name__ == "__main__":
    #@688
    main()
'''

# ---------------------------------------------------------------- PyTorch Lightning project
LIT = "home/lit-diffusion/"

TREE[LIT + "train.py"] = r'''
import os

import lightning as L
import torch
from lightning.pytorch.tuner import Tuner
from torch import nn

import _simharness


class DenoiserBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj_in = nn.Linear(dim, dim * 4)
        self.proj_out = nn.Linear(dim * 4, dim)

    def forward(self, x):
        return x + self.proj_out(nn.functional.gelu(self.proj_in(x)))


def _compiled_region(compiled_file):
    # what torch.compile leaves behind: a module whose call runs the inductor output code
    import importlib.util
    spec = importlib.util.spec_from_file_location("c3kxqzx2", compiled_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class LitDenoiser(L.LightningModule):
    def __init__(self, dim=1024, depth=6, batch_size=16):
        super().__init__()
        self.model = nn.Sequential(*[DenoiserBlock(dim) for _ in range(depth)])
        self.batch_size = batch_size
        if _simharness.knob("compile"):
            from torch._dynamo.eval_frame import OptimizeContext
            compiled = _compiled_region(_simharness.knob("compiled_file"))
            self.model._compiled_call_impl = OptimizeContext(compiled.call)(self.model._call_impl)

    #@45
    def training_step(self, batch, batch_idx):
        x = torch.randn(self.batch_size, 256, 1024)
        noise = torch.randn_like(x)
        #@49
        pred = self.model(x + noise)
        loss = nn.functional.mse_loss(pred, noise)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    #@55
    def validation_step(self, batch, batch_idx):
        x = torch.randn(self.batch_size * 4, 256, 1024)
        #@58
        pred = self.model(x)
        loss = nn.functional.mse_loss(pred, x)
        self.log("val_loss", loss, prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


if __name__ == "__main__":
    cfg = _simharness.knob("script", {})
    L.seed_everything(42)
    model = LitDenoiser(batch_size=cfg.get("batch_size", 16))
    trainer = L.Trainer(
        accelerator="gpu",
        devices=1,
        precision="bf16-mixed",
        max_epochs=cfg.get("max_epochs", 3),
        val_check_interval=cfg.get("val_check_interval"),
        limit_val_batches=cfg.get("limit_val_batches", 5),
        default_root_dir=os.getcwd(),
    )
    if cfg.get("scale_batch_size"):
        tuner = Tuner(trainer)
        tuner.scale_batch_size(model, mode="power")
    #@95
    trainer.fit(model)
'''

# ---------------------------------------------------------------- ComfyUI + kijai/ComfyUI-FluxTrainer
COMFY = "home/ComfyUI/"
FT = COMFY + "custom_nodes/ComfyUI-FluxTrainer/"

TREE[COMFY + "comfy/__init__.py"] = ""
TREE[COMFY + "comfy/model_management.py"] = r'''
import logging

import torch

OOM_EXCEPTION = torch.cuda.OutOfMemoryError


class InterruptProcessingException(Exception):
    pass


def is_oom(e):
    return isinstance(e, OOM_EXCEPTION)


def unload_all_models():
    return None


def cleanup_models():
    return None
'''

TREE[COMFY + "comfy/utils.py"] = r'''
class ProgressBar:
    def __init__(self, total):
        self.total = total
        self.current = 0

    def update(self, value):
        self.current += value
'''

TREE[COMFY + "nodes.py"] = r'''
import importlib.util
import os
import sys

NODE_CLASS_MAPPINGS = {}


def load_custom_node(module_path):
    module_name = os.path.basename(module_path)
    module_spec = importlib.util.spec_from_file_location(module_name, os.path.join(module_path, "__init__.py"))
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    NODE_CLASS_MAPPINGS.update(module.NODE_CLASS_MAPPINGS)
'''

TREE[COMFY + "execution.py"] = r'''
import asyncio
import inspect
import logging
import sys
import time
import traceback

import comfy.model_management
import nodes


def full_type_name(klass):
    module = klass.__module__
    if module == "builtins":
        return klass.__qualname__
    return module + "." + klass.__qualname__


#@230
async def _async_map_node_over_list(prompt_id, unique_id, obj, input_data_all, func, allow_interrupt=False,
                                    execution_block_cb=None, pre_execute_cb=None, hidden_inputs=None):
    results = []

    async def process_inputs(inputs, index=None, input_is_list=False):
        f = getattr(obj, func)
        if inspect.iscoroutinefunction(f):
            async def async_wrapper(f, prompt_id, unique_id, list_index, args):
                return await f(**args)
            task = asyncio.create_task(async_wrapper(f, prompt_id, unique_id, index, args=inputs))
            results.append(task)
        else:
            #@277
            result = f(**inputs)
            results.append(result)

    input_dict = input_data_all
    #@289
    await process_inputs(input_dict, 0)
    return results


#@300
async def get_output_data(prompt_id, unique_id, obj, input_data_all, execution_block_cb=None, pre_execute_cb=None, hidden_inputs=None):
    #@315
    return_values = await _async_map_node_over_list(prompt_id, unique_id, obj, input_data_all, obj.FUNCTION, allow_interrupt=True, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)
    return return_values[0], {}, False, False


#@400
async def execute(server, dynprompt, caches, current_item, extra_data, executed, prompt_id, execution_list, pending_subgraph_results, pending_async_nodes, ui_outputs):
    unique_id = current_item
    class_type, inputs = dynprompt[unique_id]
    class_def = nodes.NODE_CLASS_MAPPINGS[class_type]
    input_data_all = None
    try:
        input_data_all = {k: (caches[v[0]][v[1]] if isinstance(v, list) else v) for k, v in inputs.items()}
        obj = class_def()
        execution_block_cb = pre_execute_cb = hidden_inputs = None
        #@496
        output_data, output_ui, has_subgraph, has_pending_tasks = await get_output_data(prompt_id, unique_id, obj, input_data_all, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)
        caches[unique_id] = output_data
    except comfy.model_management.InterruptProcessingException as iex:
        logging.info("Processing interrupted")
        return ("FAILURE", {"node_id": unique_id}, iex)
    except Exception as ex:
        typ, _, tb = sys.exc_info()
        exception_type = full_type_name(typ)
        input_data_formatted = {}

        logging.error(f"!!! Exception during processing !!! {ex}")
        logging.error(traceback.format_exc())
        tips = ""

        if comfy.model_management.is_oom(ex):
            tips = "This error means you ran out of memory on your GPU.\n\nTIPS: If the workflow worked before you might have accidentally set the batch_size to a large number."
            logging.error("Got an OOM, unloading all loaded models.")
            comfy.model_management.unload_all_models()

        error_details = {
            "node_id": unique_id,
            "exception_message": "{}\n{}".format(ex, tips),
            "exception_type": exception_type,
            "traceback": traceback.format_tb(tb),
            "current_inputs": input_data_formatted,
        }
        return ("FAILURE", error_details, ex)

    executed.add(unique_id)
    return ("SUCCESS", None, None)


class PromptExecutor:
    def __init__(self, server, cache_type=False, cache_size=None):
        self.server = server
        self.success = True

    def execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        asyncio.run(self.execute_async(prompt, prompt_id, extra_data, execute_outputs))

    async def execute_async(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        caches = {}
        executed = set()
        for node_id in prompt:
            result, error, ex = await execute(self.server, prompt, caches, node_id, extra_data, executed, prompt_id,
                                              None, None, None, None)
            if result == "FAILURE":
                self.success = False
                break
'''

TREE[COMFY + "main.py"] = r'''
import logging
import os
import sys
import time

import _simharness


def setup_logger(log_level="INFO"):
    logger = logging.getLogger()
    logger.setLevel(log_level)
    stream_handler = logging.StreamHandler()
    stream_handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(stream_handler)


def startup_banner():
    t = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}"
    here = os.path.dirname(os.path.abspath(__file__))
    for line in ["[START] Security scan", "[DONE] Security scan",
                 "## ComfyUI-Manager: installing dependencies done.",
                 f"** ComfyUI startup time: {stamp}", "** Platform: Linux",
                 f"** Python version: {sys.version}", f"** Python executable: {sys.executable}",
                 f"** ComfyUI Path: {here}", f"** ComfyUI Base Folder Path: {here}",
                 f"** User directory: {here}/user",
                 f"** ComfyUI-Manager config path: {here}/user/default/ComfyUI-Manager/config.ini",
                 f"** Log path: {here}/user/comfyui.log", "", "Prestartup times for custom nodes:",
                 f"   0.4 seconds: {here}/custom_nodes/ComfyUI-Manager", ""]:
        print(line)
    import torch
    logging.info("Checkpoint files will always be loaded safely.")
    logging.info("Total VRAM 24082 MB, total RAM 64203 MB")
    logging.info(f"pytorch version: {torch.__version__}")
    logging.info("Set vram state to: NORMAL_VRAM")
    logging.info("Device: cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync")
    logging.info("Using pytorch attention")
    logging.info(f"Python version: {sys.version}")
    logging.info("ComfyUI version: 0.3.49")
    logging.info("ComfyUI frontend version: 1.24.4")
    logging.info(f"[Prompt Server] web root: {here}/venv/lib/python3.11/site-packages/comfyui_frontend_package/static")


def main():
    setup_logger()
    startup_banner()
    import execution
    import nodes
    here = os.path.dirname(os.path.abspath(__file__))
    _simharness.tick(2.3)
    nodes.load_custom_node(os.path.join(here, "custom_nodes", "ComfyUI-FluxTrainer"))
    logging.info("\nImport times for custom nodes:")
    logging.info(f"   0.0 seconds: {here}/custom_nodes/websocket_image_save.py")
    logging.info(f"   0.9 seconds: {here}/custom_nodes/ComfyUI-Manager")
    logging.info(f"   2.3 seconds: {here}/custom_nodes/ComfyUI-FluxTrainer\n")
    logging.info("Context impl SQLiteImpl.")
    logging.info("Will assume non-transactional DDL.")
    logging.info("No target revision found.")
    logging.info("Starting server\n")
    logging.info("To see the GUI go to: http://127.0.0.1:8188")
    print("FETCH ComfyRegistry Data: 5/96")
    _simharness.tick(31.0)
    logging.info("got prompt")
    prompt = {k: (v[0], v[1]) for k, v in _simharness.knob("workflow", {}).items()}
    e = execution.PromptExecutor(None)
    execution_start_time = time.perf_counter()
    t0 = time.time()
    e.execute(prompt, "9c1f6a1e-0d0b-4b5e-9a3c-5a8e7f0d2b61", {}, [])
    logging.info("Prompt executed in {:.2f} seconds".format(time.time() - t0))
    # The server goes on running (this is a snapshot of its log): no interpreter shutdown, so nothing
    # closes the trainer's progress bar.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
'''

TREE[FT + "__init__.py"] = "from .nodes import NODE_CLASS_MAPPINGS  # noqa: F401\n"
TREE[FT + "nodes.py"] = r'''
import logging
import os

import torch

import _simharness
import comfy.model_management as mm
import comfy.utils
from .flux_train_network_comfy import FluxNetworkTrainer

logger = logging.getLogger(__name__)


class _Args:
    def __init__(self, d):
        self.__dict__.update(d)


class FluxTrainModelSelect:
    FUNCTION = "loadmodel"

    def loadmodel(self, transformer, vae, clip_l, t5):
        return ({"transformer": transformer, "vae": vae, "clip_l": clip_l, "t5": t5},)


class TrainDatasetGeneralConfig:
    FUNCTION = "create_config"

    def create_config(self, **kw):
        return ({"datasets": [{"resolution": 512, "batch_size": 1}]},)


class InitFluxLoRATraining:
    FUNCTION = "init_training"

    #@440
    def init_training(self, flux_models, dataset, optimizer_settings, output_name, output_dir, network_dim,
                      network_alpha, learning_rate, max_train_steps, **kwargs):
        args = _Args(dict(_simharness.knob("trainer_args", {}), output_name=output_name, output_dir=output_dir,
                          network_dim=network_dim, network_alpha=network_alpha, learning_rate=learning_rate,
                          max_train_steps=max_train_steps, pretrained_model_name_or_path=flux_models["transformer"]))
        print(f"additional_args: {None}")
        #pass args to kohya and initialize trainer
        with torch.inference_mode(False):
            network_trainer = FluxNetworkTrainer()
            #@634
            training_loop = network_trainer.init_train(args)

        trainer = {
            "network_trainer": network_trainer,
            "training_loop": training_loop,
        }
        return (trainer, network_trainer.num_train_epochs, args.max_train_steps)


class FluxTrainLoop:
    FUNCTION = "train"

    #@897
    def train(self, network_trainer, steps):
        with torch.inference_mode(False):
            training_loop = network_trainer["training_loop"]
            network_trainer = network_trainer["network_trainer"]
            initial_global_step = network_trainer.global_step

            target_global_step = network_trainer.global_step + steps
            comfy_pbar = comfy.utils.ProgressBar(steps)
            network_trainer.comfy_pbar = comfy_pbar

            network_trainer.optimizer_train_fn()

            while network_trainer.global_step < target_global_step:
                #@910
                steps_done = training_loop(
                    break_at_steps = target_global_step,
                    epoch = network_trainer.current_epoch.value,
                )
                #pbar.update(steps_done)

                # Also break if the global steps have reached the max train steps
                if network_trainer.global_step >= network_trainer.args.max_train_steps:
                    break

            trainer = {
                "network_trainer": network_trainer,
                "training_loop": training_loop,
            }
        return (trainer, network_trainer.global_step)


class FluxTrainAndValidateLoop:
    FUNCTION = "train"

    #@944
    def train(self, network_trainer, validate_at_steps, save_at_steps, validation_settings=None):
        with torch.inference_mode(False):
            training_loop = network_trainer["training_loop"]
            network_trainer = network_trainer["network_trainer"]

            target_global_step = network_trainer.args.max_train_steps
            comfy_pbar = comfy.utils.ProgressBar(target_global_step)
            network_trainer.comfy_pbar = comfy_pbar

            network_trainer.optimizer_train_fn()

            while network_trainer.global_step < target_global_step:
                next_validate_step = ((network_trainer.global_step // validate_at_steps) + 1) * validate_at_steps
                next_save_step = ((network_trainer.global_step // save_at_steps) + 1) * save_at_steps

                steps_done = training_loop(
                    break_at_steps=min(next_validate_step, next_save_step),
                    epoch=network_trainer.current_epoch.value,
                )

                # Check if we need to validate
                if network_trainer.global_step % validate_at_steps == 0:
                    #@967
                    self.validate(network_trainer, validation_settings)

                # Check if we need to save
                if network_trainer.global_step % save_at_steps == 0:
                    self.save(network_trainer)

                # Also break if the global steps have reached the max train steps
                if network_trainer.global_step >= network_trainer.args.max_train_steps:
                    break

            trainer = {
                "network_trainer": network_trainer,
                "training_loop": training_loop,
            }
        return (trainer, network_trainer.global_step)

    #@984
    def validate(self, network_trainer, validation_settings=None):
        params = (
            network_trainer.current_epoch.value,
            network_trainer.global_step,
            validation_settings
        )
        network_trainer.optimizer_eval_fn()
        #@991
        image_tensors = network_trainer.sample_images(*params)
        network_trainer.optimizer_train_fn()
        print("Validating at step:", network_trainer.global_step)

    def save(self, network_trainer):
        ckpt_name = f"{network_trainer.args.output_name}-step{network_trainer.global_step:08d}.safetensors"
        logger.info(f"saving checkpoint: {network_trainer.args.output_dir}/{ckpt_name}")
        print("Saving at step:", network_trainer.global_step)


NODE_CLASS_MAPPINGS = {
    "FluxTrainModelSelect": FluxTrainModelSelect,
    "TrainDatasetGeneralConfig": TrainDatasetGeneralConfig,
    "InitFluxLoRATraining": InitFluxLoRATraining,
    "FluxTrainLoop": FluxTrainLoop,
    "FluxTrainAndValidateLoop": FluxTrainAndValidateLoop,
}
'''

TREE[FT + "library/__init__.py"] = ""
TREE[FT + "library/utils.py"] = r'''
import torch
from safetensors.torch import load_file


#@400
def load_safetensors(path, device="cpu", disable_mmap=False, dtype=None):
    if disable_mmap:
        return None
    else:
        try:
            #@420
            state_dict = load_file(path, device=device)
        except:
            state_dict = load_file(path)  # prevent device invalid Error
        return state_dict
'''

TREE[FT + "library/flux_utils.py"] = r'''
import logging

import torch

from . import flux_models
from .utils import load_safetensors

logger = logging.getLogger(__name__)


#@100
def load_flow_model(ckpt_path, dtype, device, disable_mmap=False, model_type="flux"):
    logger.info(f"Building Flux model dev from BFL checkpoint")
    model = flux_models.Flux()
    # load_sft doesn't support torch.device
    logger.info(f"Loading state dict from {ckpt_path}")
    #@148
    sd = load_safetensors(ckpt_path, device=str(device), disable_mmap=disable_mmap, dtype=dtype)
    info = model.load_state_dict(sd, strict=False, assign=True)
    logger.info(f"Loaded Flux: <All keys matched successfully>")
    return model
'''

TREE[FT + "flux_train_network_comfy.py"] = r'''
import logging

import torch
from tqdm import tqdm

import _simharness
from .library import flux_models, flux_train_utils, flux_utils
from .train_network import NetworkTrainer

logger = logging.getLogger(__name__)


class FluxNetworkTrainer(NetworkTrainer):
    def __init__(self):
        super().__init__()
        self.sample_prompts_te_outputs = None

    #@54
    def load_target_model(self, args, weight_dtype, accelerator):
        # currently offload to cpu for some models
        loading_dtype = None if args.fp8_base else weight_dtype
        #@60
        model = flux_utils.load_flow_model(
            args.pretrained_model_name_or_path, loading_dtype, "cuda" if args.highvram else "cpu",
            disable_mmap=args.disable_mmap_load_safetensors
        )
        logger.info(f"Loaded {model.dtype} FLUX model")
        if args.blocks_to_swap:
            logger.info(f"enable block swap: blocks_to_swap={args.blocks_to_swap}")
        logger.info("Loaded fp8 T5XXL model")
        return "flux1-dev", [None, None], flux_models.AutoEncoder(), model

    #@244
    def sample_images(self, epoch, global_step, validation_settings):
        text_encoders = None
        #@248
        image_tensors = flux_train_utils.sample_images(self.accelerator, self.args, epoch, global_step, self.unet, self.vae, text_encoders, self.sample_prompts_te_outputs, validation_settings)
        return image_tensors

    #@263
    def get_noise_pred_and_target(self, args, accelerator, noise_scheduler, latents, batch, text_encoder_conds, unet,
                                  network, weight_dtype, train_unet, is_train=True):
        noisy_model_input = latents
        img_ids = t5_out = txt_ids = l_pooled = t5_attn_mask = guidance_vec = None
        timesteps = torch.Tensor((1,))

        # call model
        def call_dit(img, img_ids, t5_out, txt_ids, l_pooled, timesteps, guidance_vec, t5_attn_mask):
            # if not args.split_mode:
            # normal forward
            with accelerator.autocast():
                # YiYi notes: divide it by 1000 for now because we scale it by 1000 in the transformer model
                #@313
                model_pred = unet(
                    img=img,
                    img_ids=img_ids,
                    txt=t5_out,
                    txt_ids=txt_ids,
                    y=l_pooled,
                    timesteps=timesteps / 1000,
                    guidance=guidance_vec,
                    txt_attention_mask=t5_attn_mask,
                )
            return model_pred

        #@370
        model_pred = call_dit(
            img=noisy_model_input,
            img_ids=img_ids,
            t5_out=t5_out,
            txt_ids=txt_ids,
            l_pooled=l_pooled,
            timesteps=timesteps,
            guidance_vec=guidance_vec,
            t5_attn_mask=t5_attn_mask,
        )
        return model_pred, latents, timesteps, None
'''

TREE[FT + "library/flux_train_utils.py"] = r'''
import logging

import torch
from tqdm import tqdm

import _simharness

logger = logging.getLogger(__name__)


#@40
def sample_images(accelerator, args, epoch, steps, flux, ae, text_encoders, sample_prompts_te_outputs,
                  validation_settings=None, prompt_replacement=None, controlnet=None):
    logger.info("")
    logger.info(f"generating sample images at step / サンプル画像生成 ステップ: {steps}")
    prompts = _simharness.knob("sample_prompts", [])
    image_tensors = []
    for prompt_dict in prompts:
        #@110
        image_tensor = sample_image_inference(accelerator, args, flux, text_encoders, ae, args.output_dir, prompt_dict,
                                              epoch, steps, sample_prompts_te_outputs, prompt_replacement, controlnet)
        image_tensors.append(image_tensor)
    return image_tensors


#@150
def sample_image_inference(accelerator, args, flux, text_encoders, ae, save_dir, prompt_dict, epoch, steps,
                           sample_prompts_te_outputs, prompt_replacement, controlnet):
    sample_steps = prompt_dict.get("sample_steps", 20)
    width = prompt_dict.get("width", 512)
    height = prompt_dict.get("height", 512)
    scale = prompt_dict.get("scale", 3.5)
    seed = prompt_dict.get("seed")
    prompt = prompt_dict.get("prompt", "")
    logger.info(f"prompt: {prompt}")
    logger.info(f"height: {height}")
    logger.info(f"width: {width}")
    logger.info(f"sample_steps: {sample_steps}")
    logger.info(f"embedded guidance scale: {scale}")
    if seed is not None:
        logger.info(f"seed: {seed}")
    noise = torch.Tensor((1, 4096, 64))
    timesteps = [1.0 - i / sample_steps for i in range(sample_steps + 1)]
    with accelerator.autocast(), torch.no_grad():
        #@237
        x = denoise(flux, noise, None, None, None, None, timesteps=timesteps, guidance=scale, t5_attn_mask=None)
    with accelerator.autocast():
        x = ae.decode(x)
    return x


#@280
def denoise(model, img, img_ids, txt, txt_ids, vec, timesteps, guidance=4.0, t5_attn_mask=None):
    comfy_pbar = None
    for t_curr, t_prev in zip(tqdm(timesteps[:-1]), timesteps[1:]):
        _simharness.tick(0.81)
        _simharness.at("sample_step", None)
        t_vec = torch.Tensor((1,), value=t_curr)
        #@301
        pred = model(img=img, img_ids=img_ids, txt=txt, txt_ids=txt_ids, y=vec, timesteps=t_vec, guidance=None,
                     txt_attention_mask=t5_attn_mask)
        img = img + (t_prev - t_curr) * pred
    return img
'''

TREE[FT + "train_network.py"] = r'''
import logging
import math

import torch
from accelerate import Accelerator
from tqdm import tqdm

import _simharness

logger = logging.getLogger(__name__)


class _Value:
    def __init__(self, v):
        self.value = v


class LossRecorder:
    def __init__(self):
        self.loss_list = []
        self.loss_total = 0.0

    def add(self, *, epoch, step, global_step, loss):
        self.loss_list.append(loss)
        self.loss_total += loss
        if len(self.loss_list) > 20:
            self.loss_total -= self.loss_list.pop(0)

    @property
    def moving_average(self):
        return self.loss_total / len(self.loss_list)


class NetworkTrainer:
    def __init__(self):
        self.global_step = 0
        self.comfy_pbar = None
        self.optimizer_train_fn = self.optimizer_eval_fn = lambda: None

    #@312
    def init_train(self, args):
        self.args = args
        n_images = getattr(args, "images", 20)
        logger.info(f"Loading dataset config from {getattr(args, 'dataset_config', 'dataset.toml')}")
        logger.info("prepare images.")
        logger.info(f"found directory {getattr(args, 'image_dir', '/data/lora')} contains {n_images} image files")
        logger.info(f"{n_images} train images with repeating.")
        logger.info("Using DreamBooth method.")
        logger.info("preparing accelerator")
        accelerator = self.accelerator = Accelerator()
        weight_dtype = torch.bfloat16
        #@440
        model_version, text_encoder, vae, unet = self.load_target_model(args, weight_dtype, accelerator)
        self.unet, self.vae = unet, vae
        unet_weight_dtype = torch.float8_e4m3fn if args.fp8_base else weight_dtype
        logger.info(f"set U-Net weight dtype to {unet_weight_dtype}, device to {accelerator.device}")
        _simharness.at("unet_to", None)
        #@448
        unet.to(accelerator.device, dtype=unet_weight_dtype)  # this seems to be safer than above
        accelerator.print("import network module:", "networks.lora_flux")
        logger.info(f"create LoRA network. base dim (rank): {args.network_dim}, alpha: {args.network_alpha}")
        logger.info("create LoRA for Text Encoder 1:")
        logger.info("create LoRA for Text Encoder 1: 72 modules.")
        logger.info("create LoRA for FLUX all blocks: 304 modules.")
        logger.info("enable LoRA for U-Net: 304 modules")
        accelerator.print("prepare optimizer, data loader etc.")
        params = [torch.nn.Parameter(torch.Tensor((args.network_dim, 3072)))]
        optimizer = accelerator.prepare(torch.optim.AdamW(params, lr=args.learning_rate))
        num_update_steps_per_epoch = n_images
        num_train_epochs = self.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
        self.current_epoch = current_epoch = _Value(0)
        accelerator.print("running training / 学習開始")
        accelerator.print(f"  num train images * repeats / 学習画像の数×繰り返し回数: {n_images}")
        accelerator.print(f"  num batches per epoch / 1epochのバッチ数: {n_images}")
        accelerator.print(f"  num epochs / epoch数: {num_train_epochs}")
        accelerator.print(f"  total optimization steps / 学習ステップ数: {args.max_train_steps}")
        self.loss_recorder = LossRecorder()
        initial_step = 0
        network = None
        text_encoders = [None, None]
        weight_dtype = torch.bfloat16

        progress_bar = tqdm(range(args.max_train_steps - initial_step), smoothing=0, disable=False, desc="steps")

        #@1155
        def training_loop(break_at_steps, epoch):
            steps_done = 0

            #accelerator.print(f"\nepoch {epoch+1}/{num_train_epochs}")
            progress_bar.set_description(f"Epoch {epoch + 1}/{num_train_epochs} - steps")

            current_epoch.value = epoch + 1

            for step in range(n_images):
                batch = {"latents": torch.Tensor((1, 16, 64, 64))}
                with accelerator.accumulate(unet):
                    latents = batch["latents"].to(accelerator.device).to(dtype=weight_dtype)
                    _simharness.at("train_step", self.global_step)
                    _simharness.tick(getattr(args, "step_seconds", 2.05))
                    #@1224
                    noise_pred, target, timesteps, weighting = self.get_noise_pred_and_target(
                        args,
                        accelerator,
                        None,
                        latents,
                        batch,
                        None,
                        unet,
                        network,
                        weight_dtype,
                        True,
                    )
                    loss = torch.nn.functional.mse_loss(noise_pred.float(), target.float(), reduction="none")
                    loss = loss.mean()
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

                # Checks if the accelerator has performed an optimization step behind the scenes
                if accelerator.sync_gradients:
                    progress_bar.update(1)
                    self.global_step += 1

                current_loss = loss.detach().item()
                self.loss_recorder.add(epoch=epoch, step=step, global_step=self.global_step, loss=current_loss)
                avr_loss: float = self.loss_recorder.moving_average
                logs = {"avr_loss": avr_loss}  # , "lr": lr_scheduler.get_last_lr()[0]}
                progress_bar.set_postfix(**logs)

                if self.global_step >= break_at_steps:
                    break
                steps_done += 1
                self.comfy_pbar.update(1)
            return steps_done

        return training_loop
'''

TREE[FT + "library/flux_models.py"] = TREE[KOHYA + "library/flux_models.py"]


# --------------------------------------------------------------------------------------------------
# Layout: where each trainer lives and which python/site-packages it uses
# --------------------------------------------------------------------------------------------------
# temp-relative prefix -> path shown in the logs (longest first)
PATH_MAP = [("tmp_inductor", "/tmp/torchinductor_user"), ("home", "/home/user"), ("workspace", "/workspace"),
            ("opt", "/opt")]

VENVS = {
    "kohya": ("home/sd-scripts/venv", False),
    "musubi": ("home/musubi-tuner/.venv", False),
    "diffusers": ("opt/conda", True),
    "simpletuner": ("workspace/SimpleTuner/.venv", False),
    "onetrainer": ("home/OneTrainer/venv", False),
    "diffusion-pipe": ("opt/conda/envs/diffusion-pipe", True),
    "hf-trainer": ("home/llm-finetune/.venv", False),
    "lightning": ("home/lit-diffusion/.venv", False),
    "comfyui": ("home/ComfyUI/venv", False),
}

CONSOLE_SCRIPTS = {
    "accelerate": "accelerate.commands.accelerate_cli",
    "torchrun": "torch.distributed.run",
    "deepspeed": "deepspeed.launcher.runner",
}

INDUCTOR_FILE = "tmp_inductor/xq/cxqkz7fzp2xn6u3l4vwm3ofq2ckr3qzbg5hkkq6cb3kxqzx2.py"
TREE[INDUCTOR_FILE] = r'''
# AOT ID: ['0_forward']
from ctypes import c_void_p, c_long, c_int
import torch
from torch._inductor.runtime.triton_heuristics import CachingAutotuner

triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_2 = CachingAutotuner("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_2")


def grid(n):
    return (n, 1, 1)


def call(args):
    primals_1 = args
    buf0 = torch.empty((16, 256, 1024))
    stream0 = None
    buf2 = buf0
    triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_2.run(buf2, primals_1, 4096, 1024, grid=grid(4096), stream=stream0)
    return (buf2, primals_1, )
'''


# --------------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------------
def ev(phase, step, recovered=False, kind="cuda"):
    return {"kind": kind, "phase": phase, "step": step, "recovered": recovered}


def fault(where, op, msg, cls="torch.OutOfMemoryError", **match):
    f = {"where": where, "op": op, "msg": msg, "cls": cls}
    f.update(match)
    return f


SCENARIOS = []


def scenario(name, family, venv, cwd, argv, plan, outcome, events, env=None, unbuffered=True, epoch=1771229000,
             hard="", frames="real", pythonpath=()):
    SCENARIOS.append(dict(name=name, family=family, venv=venv, cwd=cwd, argv=argv, plan=plan, outcome=outcome,
                          events=events, env=env or {}, unbuffered=unbuffered, epoch=epoch, hard=hard,
                          frames=frames, pythonpath=list(pythonpath)))


DEV_ASSERT_LINES = "".join(
    f"../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [{b},0,0], thread: [{t},0,0] "
    "Assertion `srcIndex < srcSelectDimSize` failed.\n" for b, t in ((220, 64), (220, 65), (221, 0), (221, 1)))

SDXL_LORA = ["create LoRA for Text Encoder 1:", "create LoRA for Text Encoder 2:",
             "create LoRA for Text Encoder: 264 modules.", "create LoRA for U-Net: 722 modules.",
             "enable LoRA for U-Net: 722 modules"]
FLUX_LORA = ["create LoRA for Text Encoder 1:", "create LoRA for Text Encoder 1: 72 modules.",
             "create LoRA for FLUX all blocks: 304 modules.", "enable LoRA for U-Net: 304 modules"]
KOHYA_LAUNCH = ["{py}", "{bin}/accelerate", "launch", "--num_cpu_threads_per_process", "1"]

# ---- kohya sd-scripts
scenario(
    "kohya_sdxl_optimizer_oom_step0_buffered", "kohya", "kohya", KOHYA,
    KOHYA_LAUNCH + ["sdxl_train_network.py", "--config_file", "config.toml", "--pretrained_model_name_or_path",
                    "/models/sd_xl_base_1.0.safetensors", "--max_train_steps", "1600", "--gradient_checkpointing",
                    "--cache_latents", "--network_dim", "32", "--network_alpha", "16"],
    {"images": 16, "repeats": 10, "resolution": "(1024, 1024)", "config_file": "config.toml", "lora_modules": SDXL_LORA,
     "faults": [fault("optimizer_step", "zeros_like", oom("50.00 MiB", "23.65 GiB", "31.12 MiB", used="23.61 GiB",
                                                          alloc="22.87 GiB", unalloc="287.50 MiB"), index=0)]},
    "crashed_oom", [ev("train_step", 0)], unbuffered=False,
    hard="OOM in AdamW state init at the first optimizer step, before the first bar update (bar shows 0/1600); "
         "stdout block-buffered: accelerator.print lines ('running training', 'epoch 1/10') land after the "
         "traceback; latent-caching bars precede the training bar; accelerate launch adds a CalledProcessError "
         "traceback as the last exception")

scenario(
    "kohya_flux_sample_oom_step120", "kohya", "kohya", KOHYA,
    KOHYA_LAUNCH + ["flux_train_network.py", "--pretrained_model_name_or_path", "/models/flux1-dev.safetensors",
                    "--max_train_steps", "2000", "--sample_every_n_steps", "120", "--sample_prompts", "prompts.txt",
                    "--gradient_checkpointing", "--cache_text_encoder_outputs"],
    {"images": 20, "repeats": 10, "resolution": "(1024, 1024)", "lora_modules": FLUX_LORA,
     "sample_prompts": [{"prompt": "portrait photo of sks woman in a red coat, golden hour, 85mm", "width": 1024,
                         "height": 1024, "sample_steps": 20, "scale": 3.5, "seed": 42}],
     "faults": [fault("sample_decode", "interpolate",
                      oom("2.00 GiB", "23.55 GiB", "1.19 GiB", used="22.34 GiB", alloc="21.80 GiB",
                          unalloc="95.43 MiB"), index=120)]},
    "crashed_oom", [ev("sampling", 120)], epoch=1771230000,
    hard="sampling OOM in the VAE decode after the no-desc sampler bar reached 20/20; rich wraps the Japanese "
         "announcement over two lines; the 'steps:' bar is redrawn after the traceback")

scenario(
    "kohya_sdxl_cache_latents_oom", "kohya", "kohya", KOHYA,
    ["{py}", "sdxl_train_network.py", "--pretrained_model_name_or_path", "/models/sd_xl_base_1.0.safetensors",
     "--cache_latents", "--max_train_steps", "3000"],
    {"images": 40, "repeats": 5, "resolution": "(1280, 1280)",
     "faults": [fault("cache_latents", "conv2d",
                      oom("1.56 GiB", "11.72 GiB", "1.02 GiB", used="10.69 GiB", alloc="10.21 GiB",
                          unalloc="301.45 MiB", capacty=True),
                      cls="torch.cuda._LegacyOutOfMemoryError", index=13)]},
    "crashed_oom", [ev("cache_latents", None)], epoch=1771231000,
    hard="no-desc caching bar (13/40) right after 'caching latents...'; torch 2.1 'capacty' message printed as "
         "torch.cuda.OutOfMemoryError; no training bar yet")

scenario(
    "kohya_flux_te_cache_oom", "kohya", "kohya", KOHYA,
    KOHYA_LAUNCH + ["flux_train_network.py", "--pretrained_model_name_or_path", "/models/flux1-dev.safetensors",
                    "--cache_text_encoder_outputs", "--max_train_steps", "1500"],
    {"images": 12, "repeats": 10, "resolution": "(768, 768)", "lora_modules": FLUX_LORA,
     "faults": [fault("cache_te", "linear",
                      oom("160.00 MiB", "15.70 GiB", "84.69 MiB", used="14.58 GiB", alloc="14.11 GiB",
                          unalloc="197.06 MiB", others=((2231, "1.02 GiB"),)), index=4)]},
    "crashed_oom", [ev("cache_text_embeddings", None)], epoch=1771232000,
    hard="T5 OOM inside the no-desc 'caching Text Encoder outputs...' bar (4/12); message lists another process "
         "before 'this process'")

scenario(
    "kohya_sdxl_device_assert_not_oom", "kohya", "kohya", KOHYA,
    KOHYA_LAUNCH + ["sdxl_train_network.py", "--pretrained_model_name_or_path", "/models/sd_xl_base_1.0.safetensors",
                    "--max_train_steps", "1600"],
    {"images": 16, "repeats": 10, "resolution": "(1024, 1024)", "lora_modules": SDXL_LORA,
     "faults": [fault("loss_item", "tensor_item", DEVICE_ASSERT, cls="RuntimeError", index=31,
                      stderr=DEV_ASSERT_LINES)]},
    "crashed_other", [], epoch=1771233000,
    hard="negative: device-side assert at loss.item() at step 31; not an OOM")

# ---- musubi-tuner
MUSUBI_ROOT = "home/musubi-tuner/"
MUSUBI_LAUNCH = ["{py}", "{bin}/accelerate", "launch", "--num_cpu_threads_per_process", "1", "--mixed_precision", "bf16"]
scenario(
    "musubi_wan_train_step_oom_step73", "musubi", "musubi", MUSUBI_ROOT,
    MUSUBI_LAUNCH + ["src/musubi_tuner/wan_train_network.py", "--task", "t2v-14B", "--dit",
                     "/models/wan2.1_t2v_14B_bf16.safetensors", "--dataset_config", "/data/wan/dataset.toml",
                     "--max_train_steps", "1200", "--blocks_to_swap", "20", "--network_dim", "32"],
    {"images": 40, "faults": [fault("train_step", "sdpa",
                                    oom("3.16 GiB", "23.53 GiB", "2.57 GiB", used="20.94 GiB", alloc="19.87 GiB",
                                        unalloc="612.40 MiB", hint=HINT_29), index=73)]},
    "crashed_oom", [ev("train_step", 73)], epoch=1771234000, frames="generic", pythonpath=["home/musubi-tuner/src"],
    hard="'steps:' bar is reset() at the first step (0/1200 drawn twice); frames are forward/_call_impl only "
         "below train(); PYTORCH_ALLOC_CONF (torch 2.9) hint")

scenario(
    "musubi_wan_cache_latents_oom", "musubi", "musubi", MUSUBI_ROOT,
    ["{py}", "src/musubi_tuner/wan_cache_latents.py", "--dataset_config", "/data/wan/dataset.toml", "--vae",
     "/models/wan_2.1_vae.safetensors"],
    {"images": 40, "faults": [fault("cache_latents", "conv3d",
                                    oom("4.39 GiB", "23.53 GiB", "3.86 GiB", used="19.66 GiB", alloc="18.95 GiB",
                                        unalloc="330.12 MiB"), nth=5)]},
    "crashed_oom", [ev("cache_latents", None)], epoch=1771235000, pythonpath=["home/musubi-tuner/src"],
    hard="separate caching script; unknown-total tqdm bar ('5it [00:14,  2.84s/it]'); no training bar at all")

scenario(
    "musubi_wan_cache_te_oom", "musubi", "musubi", MUSUBI_ROOT,
    ["{py}", "src/musubi_tuner/wan_cache_text_encoder_outputs.py", "--dataset_config", "/data/wan/dataset.toml",
     "--t5", "/models/models_t5_umt5-xxl-enc-bf16.pth", "--batch_size", "16"],
    {"images": 40, "faults": [fault("cache_te", "linear",
                                    oom("640.00 MiB", "11.99 GiB", "412.81 MiB", used="11.02 GiB",
                                        alloc="10.79 GiB", unalloc="5.14 MiB",
                                        others=((1873, "512.00 MiB"),)), nth=1)]},
    "crashed_oom", [ev("cache_text_embeddings", None)], epoch=1771236000, frames="generic",
    pythonpath=["home/musubi-tuner/src"],
    hard="T5 caching script; 'Encoding with T5' then an unknown-total bar; frames are __call__/forward/<listcomp>-free")

scenario(
    "musubi_wan_sample_oom_step120", "musubi", "musubi", MUSUBI_ROOT,
    MUSUBI_LAUNCH + ["src/musubi_tuner/wan_train_network.py", "--task", "t2v-14B", "--dit",
                     "/models/wan2.1_t2v_14B_bf16.safetensors", "--max_train_steps", "1200",
                     "--sample_every_n_steps", "60", "--sample_prompts", "/data/wan/sample_prompts.txt"],
    {"images": 40, "sample_prompts": [{"prompt": "a corgi running on a beach, slow motion", "width": 832,
                                       "height": 480, "frame_count": 33, "sample_steps": 20, "guidance_scale": 5.0,
                                       "discrete_flow_shift": 3.0, "seed": 1234}],
     "faults": [fault("sample_step", "sdpa", oom("7.03 GiB", "23.53 GiB", "5.92 GiB", used="17.60 GiB",
                                                 alloc="16.93 GiB", unalloc="262.00 MiB"), nth=27)]},
    "crashed_oom", [ev("sampling", 120)], epoch=1771237000, pythonpath=["home/musubi-tuner/src"],
    hard="second sampling (step 120) fails after a successful one at step 60; 'Sampling timesteps for prompt 1' "
         "bar closed before the traceback, 'steps:' bar redrawn after it")

# ---- diffusers examples
D_LAUNCH = ["{py}", "{bin}/accelerate", "launch"]
D_NOTES = ["{'variance_type', 'clip_sample_range', 'thresholding', 'dynamic_thresholding_ratio', 'sample_max_value', "
           "'rescale_betas_zero_snr', 'timestep_spacing'} was not found in config. Values will be initialized to "
           "default values."]
scenario(
    "diffusers_dreambooth_lora_backward_oom_step64", "diffusers", "diffusers", DIFFUSERS + "dreambooth/",
    D_LAUNCH + ["--mixed_precision", "bf16", "train_dreambooth_lora.py", "--pretrained_model_name_or_path",
                "stable-diffusion-v1-5/stable-diffusion-v1-5", "--instance_data_dir", "dog",
                "--instance_prompt", "a photo of sks dog", "--train_batch_size", "1",
                "--gradient_accumulation_steps", "2", "--max_train_steps", "400", "--checkpointing_steps", "100",
                "--output_dir", "lora-dog", "--seed", "0"],
    {"images": 5, "diffusers_config_notes": D_NOTES,
     "faults": [fault("train_step", "run_backward",
                      oom("1.12 GiB", "7.78 GiB", "96.00 MiB", used="7.67 GiB", alloc="7.20 GiB",
                          unalloc="189.41 MiB"), index=64, nth=1)]},
    "crashed_oom", [ev("train_step", 64)], epoch=1771238000, frames="generic",
    hard="gradient accumulation 2: the bar moves every second micro-batch and set_postfix redraws every micro-batch; "
         "OOM in backward (torch frames only below main); accelerate CalledProcessError trailer")

scenario(
    "diffusers_flux_lora_validation_oom_step120", "diffusers", "diffusers", DIFFUSERS + "dreambooth/",
    D_LAUNCH + ["--mixed_precision", "bf16", "train_dreambooth_lora_flux.py", "--pretrained_model_name_or_path",
                "black-forest-labs/FLUX.1-dev", "--instance_data_dir", "dog", "--instance_prompt",
                "a photo of sks dog", "--validation_prompt", "A photo of sks dog in a bucket",
                "--validation_epochs", "5", "--max_train_steps", "500", "--train_batch_size", "1", "--rank", "16"],
    {"images": 20, "accelerate_rank_prefix": True,
     "faults": [fault("pipeline_step", "sdpa", oom("4.50 GiB", "79.15 GiB", "3.94 GiB", used="75.20 GiB",
                                                   alloc="73.97 GiB", unalloc="489.61 MiB", hint=HINT_211),
                      nth=121)]},
    "crashed_oom", [ev("sampling", 120)], epoch=1771239000,
    hard="validation after epoch 0 (step 20) succeeds, the one after epoch 5 (step 120) fails; two-line "
         "'Running validation... ' announcement with accelerate 1.13's [RANK 0] prefix; pipeline bar disabled")

scenario(
    "diffusers_t2i_lora_resume_oom_step517_rank0", "diffusers", "diffusers", DIFFUSERS + "text_to_image/",
    D_LAUNCH + ["--multi_gpu", "--num_processes", "2", "--mixed_precision", "bf16", "train_text_to_image_lora.py",
                "--pretrained_model_name_or_path", "stable-diffusion-v1-5/stable-diffusion-v1-5",
                "--train_data_dir", "/data/naruto", "--max_train_steps", "1500", "--resume_from_checkpoint",
                "latest", "--output_dir", "sd-naruto-lora", "--train_batch_size", "1"],
    {"images": 833, "resume_path": "checkpoint-500", "step_seconds": 0.61, "diffusers_config_notes": D_NOTES,
     "faults": [fault("train_step", "sdpa", oom("768.00 MiB", "23.64 GiB", "432.31 MiB", used="23.21 GiB",
                                                alloc="22.50 GiB", unalloc="318.77 MiB"), index=517)]},
    "crashed_oom", [ev("train_step", 517)], epoch=1771240000, frames="generic",
    hard="resumed run: the bar starts at 500/1500 (initial=500), OOM at 517; [rank0]: excepthook prefix on every "
         "traceback line; torchrun's ChildFailedError block follows")

scenario(
    "diffusers_t2i_fp16_unscale_not_oom", "diffusers", "diffusers", DIFFUSERS + "text_to_image/",
    D_LAUNCH + ["--mixed_precision", "fp16", "train_text_to_image_lora.py", "--pretrained_model_name_or_path",
                "stable-diffusion-v1-5/stable-diffusion-v1-5", "--train_data_dir", "/data/naruto",
                "--max_train_steps", "1500", "--mixed_precision", "fp16"],
    {"images": 833, "fp16_trainable_params": True},
    "crashed_other", [], epoch=1771241000,
    hard="negative: ValueError 'Attempting to unscale FP16 gradients.' at the first step")

# ---- SimpleTuner
ST_ROOT = "workspace/SimpleTuner/"
ST_CONFIG = {"pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev", "base_model_precision": "no_change",
             "max_train_steps": 1500, "batches_per_epoch": 520, "validation_steps": 250,
             "validation_prompts": ["a photo of sks person wearing a tuxedo, studio lighting"],
             "data_backend_config": "config/multidatabackend.json", "dataset_id": "pseudo-camera-10k-flux"}
scenario(
    "simpletuner_flux_train_oom_step42", "simpletuner", "simpletuner", ST_ROOT,
    ["{py}", "simpletuner/train.py"],
    {"config": ST_CONFIG, "captions": 40,
     "faults": [fault("train_step", "linear", oom("270.00 MiB", "47.40 GiB", "253.31 MiB", used="47.14 GiB",
                                                  alloc="46.31 GiB", unalloc="412.69 MiB"), index=42)]},
    "crashed_oom", [ev("train_step", 42)], env={"SIMPLETUNER_LOG_LEVEL": "INFO"}, epoch=1771242000,
    pythonpath=["workspace/SimpleTuner"],
    hard="colorama (autoreset, strip=False) appends '\\x1b[0m' after every write, splitting even the traceback's "
         "exception line ('torch.OutOfMemoryError\\x1b[0m: \\x1b[0mCUDA out of memory...'); [RANK 0] log lines on "
         "stdout; GPU circuit breaker ERROR lines repeat the OOM text before the traceback")

scenario(
    "simpletuner_validation_oom_recovered_then_train_oom", "simpletuner", "simpletuner", ST_ROOT,
    ["{py}", "simpletuner/train.py"],
    {"config": dict(ST_CONFIG, validation_steps=60,
                    validation_prompts=["a photo of sks person wearing a tuxedo", "sks person as an astronaut"]),
     "captions": 40,
     "faults": [fault("pipeline_step", "sdpa", oom("2.50 GiB", "23.55 GiB", "1.00 GiB", used="22.54 GiB",
                                                   alloc="21.95 GiB", unalloc="167.06 MiB"), nth=5),
                fault("train_step", "sdpa", oom("1.13 GiB", "23.55 GiB", "744.94 MiB", used="22.81 GiB",
                                                 alloc="22.02 GiB", unalloc="339.68 MiB"), index=83)]},
    "crashed_oom", [ev("sampling", 60, True), ev("train_step", 83)], env={"SIMPLETUNER_LOG_LEVEL": "INFO"},
    epoch=1771243000, pythonpath=["workspace/SimpleTuner"],
    hard="validation OOM at step 60 is caught ('Validation run failed at step 60: ...' with the traceback through "
         "logging) and training goes on; the fatal OOM follows at step 83; two OOM texts, two incidents")

scenario(
    "simpletuner_text_embed_cache_oom_quiet", "simpletuner", "simpletuner", ST_ROOT,
    ["{py}", "simpletuner/train.py"],
    {"config": ST_CONFIG, "captions": 300,
     "faults": [fault("cache_te", "linear", oom("80.00 MiB", "15.69 GiB", "26.88 MiB", used="15.66 GiB",
                                                alloc="15.37 GiB", unalloc="113.49 MiB"), index=173)]},
    "crashed_oom", [ev("cache_text_embeddings", None)], epoch=1771244000, pythonpath=["workspace/SimpleTuner"],
    hard="default console level ERROR: no INFO lines at all; only a 'Processing prompts' bar (ncols=125, "
         "miniters=50, position=2) and the error lines")

scenario(
    "simpletuner_quanto_quantize_oom", "simpletuner", "simpletuner", ST_ROOT,
    ["{py}", "simpletuner/train.py"],
    {"config": dict(ST_CONFIG, base_model_precision="int8-quanto"), "captions": 40,
     "faults": [fault("quantize_layer", "quanto_quantize",
                      oom("72.00 MiB", "23.55 GiB", "17.25 MiB", used="23.53 GiB", alloc="23.08 GiB",
                          unalloc="7.44 MiB"), index=4)]},
    "crashed_oom", [ev("quantize", None)], env={"SIMPLETUNER_LOG_LEVEL": "INFO"}, epoch=1771245000,
    pythonpath=["workspace/SimpleTuner"],
    hard="quanto freeze OOM: 'Quantising FluxTransformer2DModel. Using int8-quanto.' then SimpleTuner's own "
         "'GPU ran out of memory during quantisation' line; re-raised with `raise e`")

# ---- OneTrainer
OT_CONFIG = {"epochs": 10, "epoch_length": 40, "workspace_dir": "/home/user/OneTrainer/workspace/run",
             "output_model_destination": "/home/user/OneTrainer/models/flux_lora.safetensors"}
scenario(
    "onetrainer_flux_oom_epoch0_step23", "onetrainer", "onetrainer", OT,
    ["{py}", "scripts/train.py", "--config-path", "training_presets/#flux LoRA.json"],
    {"config": OT_CONFIG, "faults": [fault("train_step", "sdpa", oom("1.69 GiB", "23.99 GiB", "1.38 GiB",
                                                                    used="22.59 GiB", alloc="21.71 GiB",
                                                                    unalloc="432.19 MiB"), index=23, epoch=0)]},
    "crashed_oom", [ev("train_step", 23)], epoch=1771246000,
    hard="nested 'epoch'/'step' bars with '\\x1b[A'; iterated bars are closed (redrawn) BEFORE the traceback; "
         "first epoch so the per-epoch n is the global step")

scenario(
    "onetrainer_flux_oom_epoch2", "onetrainer", "onetrainer", OT,
    ["{py}", "scripts/train.py", "--config-path", "training_presets/#flux LoRA.json"],
    {"config": dict(OT_CONFIG, epoch_length=30), "faults": [
        fault("train_step", "sdpa", oom("1.69 GiB", "23.99 GiB", "1.21 GiB", used="22.76 GiB", alloc="21.88 GiB",
                                        unalloc="430.02 MiB"), index=71, epoch=2)]},
    "crashed_oom", [ev("train_step", None)], epoch=1771247000,
    hard="third epoch: the 'step' bar shows 11/30 (per-epoch n), the global step (71) is not printed")

scenario(
    "onetrainer_sampling_oom_caught_then_completed", "onetrainer", "onetrainer", OT,
    ["{py}", "scripts/train.py", "--config-path", "training_presets/#flux LoRA.json"],
    {"config": dict(OT_CONFIG, epochs=2, epoch_length=45, sample_after=40,
                    samples=[{"prompt": "photo of ohwx man", "height": 1024, "width": 1024, "seed": 42,
                              "diffusion_steps": 20, "cfg_scale": 1.0}]),
     "faults": [fault("sample_step", "sdpa", oom("3.38 GiB", "23.99 GiB", "2.07 GiB", used="21.91 GiB",
                                                 alloc="21.15 GiB", unalloc="312.50 MiB"), nth=6)]},
    "completed", [ev("sampling", 40, True)], epoch=1771248000,
    hard="OneTrainer catches sampling errors: traceback.print_exc() + 'Error during sampling, proceeding without "
         "sampling', then training goes on (a second sampling at step 80 works) and the model is saved")

scenario(
    "onetrainer_caching_oom", "onetrainer", "onetrainer", OT,
    ["{py}", "scripts/train.py", "--config-path", "training_presets/#flux LoRA.json"],
    {"config": OT_CONFIG, "faults": [fault("encode_vae", "conv2d", oom("3.00 GiB", "23.99 GiB", "2.61 GiB",
                                                                      used="21.37 GiB", alloc="20.62 GiB",
                                                                      unalloc="308.42 MiB"), index=17)]},
    "crashed_oom", [ev("cache_latents", None)], epoch=1771249000,
    hard="mgds 'caching' bar nested under 'epoch 0/10'; the cache kind (latents vs text) only shows in frames")

scenario(
    "onetrainer_nan_loss_not_oom", "onetrainer", "onetrainer", OT,
    ["{py}", "scripts/train.py", "--config-path", "training_presets/#flux LoRA.json"],
    {"config": dict(OT_CONFIG, nan_at_steps=[7])},
    "crashed_other", [], epoch=1771250000, hard="negative: 'Training loss became NaN' RuntimeError")

# ---- diffusion-pipe (DeepSpeed launcher)
DP_LAUNCH = ["{py}", "{bin}/deepspeed", "--num_gpus=1", "train.py", "--deepspeed", "--config",
             "examples/wan_14b_min_vram.toml"]
DP_CONFIG = {"steps_per_print": 1, "max_steps": 2000, "output_dir": "/data/wan/output/20260822_12-00-00"}
scenario(
    "dpipe_wan_train_step_oom_step120", "diffusion-pipe", "diffusion-pipe", DP, DP_LAUNCH,
    {"config": DP_CONFIG, "images": 8, "faults": [
        fault("train_step", "sdpa", oom("5.06 GiB", "23.52 GiB", "4.61 GiB", used="18.90 GiB", alloc="18.23 GiB",
                                        unalloc="215.33 MiB"), index=121)]},
    "crashed_oom", [ev("train_step", 120)], epoch=1771251000,
    hard="no training bar: the step comes from DeepSpeed's 'steps: 120 loss: ... iter time (s): ...' lines "
         "(printed after each step); deepspeed launcher's 'exits with return code = 1' after the traceback")

scenario(
    "dpipe_cache_latents_pool_oom", "diffusion-pipe", "diffusion-pipe", DP, DP_LAUNCH,
    {"config": DP_CONFIG, "images": 12, "faults": [
        fault("cache_latents", "conv2d", oom("2.76 GiB", "23.52 GiB", "1.87 GiB", used="21.64 GiB",
                                             alloc="21.02 GiB", unalloc="118.52 MiB"), index=7)]},
    "crashed_oom", [ev("cache_latents", None)], epoch=1771252000,
    hard="OOM in a multiprocessing.Pool worker: the message appears twice (RemoteTraceback string, then the "
         "re-raised exception after 'The above exception was the direct cause'), one incident")

scenario(
    "dpipe_eval_oom_step200", "diffusion-pipe", "diffusion-pipe", DP, DP_LAUNCH,
    {"config": dict(DP_CONFIG, steps_per_print=10, eval_every_n_steps=100, eval_before_first_step=True),
     "images": 8, "eval_batches": 4, "faults": [
        fault("eval_step", "sdpa", oom("3.52 GiB", "23.52 GiB", "2.98 GiB", used="20.53 GiB", alloc="19.87 GiB",
                                       unalloc="177.88 MiB"), index=200, quantile=0.5, batch=2)]},
    "crashed_oom", [ev("sampling", 200)], epoch=1771253000,
    hard="'Running eval' + a no-desc bar at step 0, 100 and 200; the eval at 200 fails mid-bar")

scenario(
    "dpipe_oom_after_save_step500", "diffusion-pipe", "diffusion-pipe", DP, DP_LAUNCH,
    {"config": dict(DP_CONFIG, steps_per_print=10, save_every_n_steps=500, save_dtype="bfloat16"), "images": 8,
     "step_seconds": 3.1,
     "faults": [fault("train_step", "sdpa", oom("5.06 GiB", "23.52 GiB", "4.88 GiB", used="18.63 GiB",
                                                alloc="17.96 GiB", unalloc="208.40 MiB"), index=503)]},
    "crashed_oom", [ev("train_step", 500)], epoch=1771254000,
    hard="'Saving model to directory step500' then a train-step OOM at step 503 whose counter was never printed "
         "(steps_per_print=10): the last counter and the checkpoint name both say 500; not a saving OOM")

# ---- HF transformers Trainer
HF_ARGS = {"per_device_train_batch_size": 8, "learning_rate": 2e-5, "logging_steps": 10, "save_steps": 0,
           "num_train_epochs": 1}
scenario(
    "hf_auto_find_batch_size_recovered_completed", "hf-trainer", "hf-trainer", HF,
    ["{py}", "finetune_llama.py"],
    {"script": {"args": dict(HF_ARGS, per_device_train_batch_size=32, auto_find_batch_size=True),
                "train_examples": 640},
     "step_seconds": 3.4, "trainable_params": 8030261248,
     "faults": [fault("train_step", "linear", oom("896.00 MiB", "79.14 GiB", "301.75 MiB", used="78.83 GiB",
                                                  alloc="76.94 GiB", unalloc="1.37 GiB"), index=3, bs=32)]},
    "completed", [ev("train_step", 3, True)], epoch=1771255000,
    hard="accelerate's find_executable_batch_size swallows the OOM silently: the only evidence is a second "
         "'***** Running training *****' banner with 'batch size has been adjusted to: 16' and a new bar")

scenario(
    "hf_auto_find_batch_size_gave_up", "hf-trainer", "hf-trainer", HF,
    ["{py}", "finetune_llama.py"],
    {"script": {"args": dict(HF_ARGS, per_device_train_batch_size=4, auto_find_batch_size=True),
                "train_examples": 400, "model_id": "meta-llama/Llama-3.1-70B"},
     "step_seconds": 9.0, "trainable_params": 70553706496,
     "faults": [fault("train_step", "linear", oom("3.50 GiB", "79.14 GiB", "2.13 GiB", used="77.00 GiB",
                                                  alloc="75.61 GiB", unalloc="901.44 MiB"), index=0)]},
    "crashed_oom", [ev("train_step", 0, True), ev("train_step", 0, True), ev("train_step", 0)], epoch=1771256000,
    hard="three silent OOMs (batch 4, 2, 1) then 'RuntimeError: No executable batch size found, reached zero.'; "
         "no OOM text anywhere in the log")

scenario(
    "hf_run_clm_step137_buffered", "hf-trainer", "hf-trainer", "home/transformers/examples/pytorch/language-modeling/",
    ["{py}", "run_clm.py", "--model_name_or_path", "meta-llama/Llama-3.2-3B", "--dataset_name", "wikitext",
     "--per_device_train_batch_size", "4", "--do_train", "--output_dir", "/tmp/test-clm"],
    {"script": {"args": dict(HF_ARGS, per_device_train_batch_size=4, gradient_accumulation_steps=4, max_steps=1000,
                             logging_steps=25), "model_id": "meta-llama/Llama-3.2-3B", "train_examples": 16000},
     "step_seconds": 2.7, "trainable_params": 3212749824,
     "faults": [fault("train_step", "cross_entropy", oom("7.83 GiB", "23.68 GiB", "5.12 GiB", used="18.55 GiB",
                                                         alloc="17.93 GiB", unalloc="226.97 MiB"), index=137, nth=2)]},
    "crashed_oom", [ev("train_step", 137)], unbuffered=False, epoch=1771257000,
    hard="stdout block-buffered: the script's own logging (stdout) and the {'loss': ...} dicts (tqdm.write to "
         "stdout) come out after the traceback, while '[INFO|trainer.py:...] >>' lines and the no-desc bar "
         "(stderr) are in order; OOM in the logits' cross-entropy")

scenario(
    "hf_eval_oom_step200", "hf-trainer", "hf-trainer", HF,
    ["{py}", "finetune_llama.py"],
    {"script": {"args": dict(HF_ARGS, per_device_train_batch_size=8, max_steps=500, eval_strategy="steps",
                             eval_steps=100, logging_steps=50, per_device_eval_batch_size=16),
                "train_examples": 4000, "eval_batches": 50},
     "step_seconds": 2.2,
     "faults": [fault("eval_step", "sdpa", oom("4.00 GiB", "79.14 GiB", "3.41 GiB", used="75.72 GiB",
                                               alloc="74.10 GiB", unalloc="1.09 GiB"), index=3, global_step=200)]},
    "crashed_oom", [ev("sampling", 200)], epoch=1771258000,
    hard="training and eval bars both have no desc; the eval bar (leave=False, position 1) is cleared at exit "
         "and the training bar redrawn; a successful eval at step 100 precedes")

scenario(
    "hf_torchrun_save_oom_step100", "hf-trainer", "hf-trainer", HF,
    ["{py}", "{bin}/torchrun", "--nproc_per_node", "1", "finetune_llama.py"],
    {"script": {"args": dict(HF_ARGS, per_device_train_batch_size=2, max_steps=300, save_steps=100,
                             logging_steps=10), "train_examples": 4000},
     "step_seconds": 2.9, "omp_warning": True,
     "faults": [fault("save_shard", "tensor_contiguous", oom("448.00 MiB", "23.68 GiB", "212.56 MiB",
                                                             used="23.47 GiB", alloc="22.86 GiB",
                                                             unalloc="283.70 MiB"),
                      index="model-00002-of-00002.safetensors")]},
    "crashed_oom", [ev("saving", 100)], epoch=1771259000,
    hard="'Saving model checkpoint to out/llama-sft/checkpoint-100' then an OOM in save_pretrained's "
         ".contiguous(); [rank0]: prefixes; torchrun ChildFailedError block at the end")

scenario(
    "hf_model_load_oom_shard3", "hf-trainer", "hf-trainer", HF,
    ["{py}", "finetune_llama.py"],
    {"script": {"args": HF_ARGS, "model_id": "meta-llama/Llama-3.1-8B"},
     "faults": [fault("load_shard", "tensor_to", oom("224.00 MiB", "15.57 GiB", "98.12 MiB", used="15.47 GiB",
                                                     alloc="15.21 GiB", unalloc="1.88 MiB"), index=2)]},
    "crashed_oom", [ev("model_load", None)], epoch=1771260000,
    hard="OOM while 'Loading checkpoint shards' (2/4, bar closed before the traceback); no training yet")

# ---- PyTorch Lightning
LIT_SUMMARY = ["", "  | Name  | Type       | Params | Mode ", "---------------------------------------------",
               "0 | model | Sequential | 50.4 M | train", "---------------------------------------------",
               "50.4 M    Trainable params", "0         Non-trainable params", "50.4 M    Total params",
               "201.523   Total estimated model params size (MB)", "25        Modules in train mode",
               "0         Modules in eval mode"]
scenario(
    "lightning_train_oom_epoch0_step45", "lightning", "lightning", LIT, ["{py}", "train.py"],
    {"script": {"max_epochs": 3}, "batches_per_epoch": 100, "model_summary": LIT_SUMMARY,
     "faults": [fault("train_step", "linear", oom("2.00 GiB", "23.65 GiB", "1.71 GiB", used="21.93 GiB",
                                                  alloc="21.44 GiB", unalloc="41.27 MiB"), index=45, epoch=0)]},
    "crashed_oom", [ev("train_step", 45)], epoch=1771261000,
    hard="bars on stdout, logging on stderr; 'Sanity Checking DataLoader 0' bar before training; "
         "'Epoch 0:  45%|...| 45/100' redrawn after the traceback; frames are Lightning's generic loop machinery")

scenario(
    "lightning_validation_oom_step50", "lightning", "lightning", LIT, ["{py}", "train.py"],
    {"script": {"max_epochs": 3, "val_check_interval": 50}, "batches_per_epoch": 100, "model_summary": LIT_SUMMARY,
     "faults": [fault("val_step", "linear", oom("4.00 GiB", "23.65 GiB", "3.12 GiB", used="20.52 GiB",
                                                alloc="20.03 GiB", unalloc="22.18 MiB"),
                      index=2, global_step=50, sanity=False)]},
    "crashed_oom", [ev("sampling", 50)], epoch=1771262000,
    hard="mid-epoch validation (val_check_interval=50): 'Validation DataLoader 0' bar at position 1 under "
         "'Epoch 0' at 50/100; the sanity check ran the same validation_step without failing")

scenario(
    "lightning_train_oom_epoch1", "lightning", "lightning", LIT, ["{py}", "train.py"],
    {"script": {"max_epochs": 3}, "batches_per_epoch": 80, "model_summary": LIT_SUMMARY,
     "faults": [fault("train_step", "linear", oom("2.00 GiB", "23.65 GiB", "1.64 GiB", used="22.00 GiB",
                                                  alloc="21.47 GiB", unalloc="75.38 MiB"), index=113, epoch=1)]},
    "crashed_oom", [ev("train_step", None)], epoch=1771263000,
    hard="'Epoch 1: 41%|...| 33/80': the bar's n is per epoch, so the global step is not shown")

scenario(
    "lightning_bs_finder_recovered_completed", "lightning", "lightning", LIT, ["{py}", "train.py"],
    {"script": {"max_epochs": 2, "scale_batch_size": True, "batch_size": 2, "limit_val_batches": 3},
     "batches_per_epoch": 40, "model_summary": LIT_SUMMARY, "ckpt_uuid": "1f0e6a8c-3c4b-4b8e-9a52-6f7d2c9e0b13",
     "faults": [fault("bs_trial", "linear", oom("4.00 GiB", "23.65 GiB", "2.80 GiB", used="20.84 GiB",
                                                alloc="20.21 GiB", unalloc="117.04 MiB"), index=0, bs=64)]},
    "completed", [ev("train_step", 0, True)], epoch=1771264000,
    hard="the batch-size finder catches the OOM: only 'Batch size 64 failed, trying batch size 32' shows it; "
         "then training completes ('`Trainer.fit` stopped: `max_epochs=2` reached.'); the finder's trial "
         "runs under a 'Training: 0/?' bar, so the step the log shows is 0")

scenario(
    "lightning_compiled_triton_out_of_resource_not_oom", "lightning", "lightning", LIT, ["{py}", "train.py"],
    {"script": {"max_epochs": 3}, "batches_per_epoch": 100, "model_summary": LIT_SUMMARY, "compile": True,
     "compiled_file": "{tmp}/" + INDUCTOR_FILE,
     "faults": [fault("train_step", "triton_run", TRITON_OOR, index=0, epoch=0)]},
    "crashed_other", [], epoch=1771265000,
    hard="negative: torch.OutOfMemoryError class but 'out of resource: triton_...' (kernel shared-memory limit), "
         "not a memory OOM")

# ---- ComfyUI + ComfyUI-FluxTrainer
ASYNC_OOM = ("Allocation on device 0 would exceed allowed memory. (out of memory)\n"
             "Currently allocated     : 21.53 GiB\nRequested               : 1.25 GiB\n"
             "Device limit            : 23.52 GiB\nFree (according to CUDA): 19.12 MiB\n"
             "PyTorch limit (set by user-supplied memory fraction)\n                        : 17179869184.00 GiB")
COMFY_WF = {
    "1": ["FluxTrainModelSelect", {"transformer": "/home/user/ComfyUI/models/unet/flux1-dev.safetensors",
                                   "vae": "ae.safetensors", "clip_l": "clip_l.safetensors",
                                   "t5": "t5xxl_fp8_e4m3fn_scaled.safetensors"}],
    "2": ["TrainDatasetGeneralConfig", {}],
    "3": ["InitFluxLoRATraining", {"flux_models": ["1", 0], "dataset": ["2", 0], "optimizer_settings": None,
                                   "output_name": "flux_lora_file_name", "output_dir": "flux_trainer_output",
                                   "network_dim": 16, "network_alpha": 16, "learning_rate": 0.0004,
                                   "max_train_steps": 3000}],
}
COMFY_ARGS = {"images": 25, "fp8_base": True, "highvram": False, "disable_mmap_load_safetensors": False,
              "blocks_to_swap": 0, "dataset_config": "/home/user/ComfyUI/flux_trainer_output/dataset.toml",
              "image_dir": "/home/user/ComfyUI/input/lora_images"}
scenario(
    "comfyui_fluxtrainer_train_oom_step30", "comfyui", "comfyui", COMFY, ["{py}", "main.py", "--listen"],
    {"workflow": dict(COMFY_WF, **{"4": ["FluxTrainLoop", {"network_trainer": ["3", 0], "steps": 250}]}),
     "trainer_args": COMFY_ARGS, "torch_version": "2.7.1+cu128",
     "faults": [fault("train_step", "sdpa", ASYNC_OOM, index=30)]},
    "crashed_oom", [ev("train_step", 30)], epoch=1771266000,
    hard="ComfyUI catches it: '!!! Exception during processing !!! Allocation on device 0 would exceed allowed "
         "memory. (out of memory)' (cudaMallocAsync text, no 'CUDA out of memory'), traceback via logging, "
         "'Got an OOM, unloading all loaded models.', 'Prompt executed in ...'; the server keeps running so "
         "the 'Epoch 1/120 - steps' bar is never closed")

scenario(
    "comfyui_fluxtrainer_validate_oom_step100", "comfyui", "comfyui", COMFY, ["{py}", "main.py", "--listen"],
    {"workflow": dict(COMFY_WF, **{"4": ["FluxTrainAndValidateLoop", {"network_trainer": ["3", 0],
                                                                      "validate_at_steps": 100,
                                                                      "save_at_steps": 100}]}),
     "trainer_args": COMFY_ARGS, "torch_version": "2.7.1+cu128",
     "sample_prompts": [{"prompt": "cute anime girl blonde messy long hair blue eyes wearing a maid outfit",
                         "width": 1024, "height": 1024, "sample_steps": 20, "scale": 3.5, "seed": 42}],
     "faults": [fault("sample_step", "sdpa", oom("1.64 GiB", "23.52 GiB", "1.21 GiB", used="22.30 GiB",
                                                 alloc="21.67 GiB", unalloc="160.11 MiB"), nth=8)]},
    "crashed_oom", [ev("sampling", 100)], epoch=1771267000,
    hard="validation node samples at step 100 ('generating sample images at step / サンプル画像生成 ステップ: 100'); "
         "the no-desc sampler bar is closed before the logged traceback")

scenario(
    "comfyui_fluxtrainer_model_load_oom", "comfyui", "comfyui", COMFY, ["{py}", "main.py", "--listen"],
    {"workflow": dict(COMFY_WF), "trainer_args": dict(COMFY_ARGS, highvram=True, fp8_base=False),
     "torch_version": "2.7.1+cu128",
     "faults": [fault("unet_to", "tensor_to", oom("144.00 MiB", "23.52 GiB", "121.69 MiB", used="23.39 GiB",
                                                  alloc="22.97 GiB", unalloc="4.56 MiB"))]},
    "crashed_oom", [ev("model_load", None)], epoch=1771268000,
    hard="InitFluxLoRATraining: the bf16 transformer is loaded, then moved to the GPU ('set U-Net weight dtype to "
         "torch.bfloat16, device to cuda:0') and runs out of memory in Module.to (recursive _apply frames); no bar")


# --------------------------------------------------------------------------------------------------
# Runner
# --------------------------------------------------------------------------------------------------
CONSOLE_SCRIPT_TEMPLATE = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from {module} import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def build_tree(tmp):
    for venv, _conda in VENVS.values():
        site = os.path.join(tmp, venv, "lib", "python3.11", "site-packages")
        for rel, src in LIB.items():
            write(os.path.join(site, rel), place(src) if src.strip() else "")
        bindir = os.path.join(tmp, venv, "bin")
        os.makedirs(bindir, exist_ok=True)
        os.symlink("/usr/bin/python3", os.path.join(bindir, "python"))
        for name, module in CONSOLE_SCRIPTS.items():
            write(os.path.join(bindir, name),
                  CONSOLE_SCRIPT_TEMPLATE.format(python=os.path.join(bindir, "python"), module=module))
    for rel, src in TREE.items():
        write(os.path.join(tmp, rel), place(src) if src.strip() else "")


def display_path(tmp, path):
    for rel, shown in PATH_MAP:
        path = path.replace(os.path.join(tmp, rel), shown)
    return path


def run_scenario(tmp, sc):
    venv, conda = VENVS[sc["venv"]]
    venv_abs = os.path.join(tmp, venv)
    site = os.path.join(venv_abs, "lib", "python3.11", "site-packages")
    py = os.path.join(venv_abs, "bin", "python")
    argv = [a.replace("{py}", py).replace("{bin}", os.path.join(venv_abs, "bin")) for a in sc["argv"]]
    plan = json.dumps(sc["plan"]).replace("{tmp}", tmp)
    clock = os.path.join(tmp, f".clock-{sc['name']}")
    env = {
        "PATH": f"{venv_abs}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.path.join(tmp, "home"),
        "USER": "user",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": ":".join([site] + [os.path.join(tmp, p) for p in sc["pythonpath"]]),
        "SIM_PLAN": plan,
        "SIM_EPOCH": str(sc["epoch"]),
        "SIM_CLOCK_FILE": clock,
    }
    if sc["unbuffered"]:
        env["PYTHONUNBUFFERED"] = "1"
    env.update(sc["env"])
    out_path = os.path.join(tmp, f".out-{sc['name']}")
    with open(out_path, "wb") as out:
        proc = subprocess.run(argv, cwd=os.path.join(tmp, sc["cwd"]), env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=300)
    with open(out_path, "rb") as f:
        text = f.read().decode("utf-8")
    text = display_path(tmp, text)
    shown_site = display_path(tmp, site) + "/"
    text = text.replace("/usr/lib/python3/dist-packages/", shown_site)
    if conda:
        text = text.replace("/usr/lib/python3.11/", display_path(tmp, venv_abs) + "/lib/python3.11/")
    return text, proc.returncode


# --- a light self-check of each log: the last training-bar frame before the first traceback, and whether
# --- some bar frame is drawn after it (tqdm closing at interpreter exit)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FRAME = re.compile(r"^(?:(?P<desc>.*?): ?)?(?:\s*\d+%\|[^|]*\| ?|\s*)(?P<n>\d+)(?:/(?P<total>\d+|\?))?(?:it)? \[")


def self_check(text):
    pieces = [ANSI.sub("", p).strip() for p in re.split(r"[\r\n]", text)]
    first_tb = next((i for i, p in enumerate(pieces) if "Traceback (most recent call last):" in p), None)
    frames_after = 0
    if first_tb is not None:
        frames_after = sum(1 for p in pieces[first_tb:] if FRAME.match(p) and "[" in p and ("it/s" in p or "s/it" in p or "?it/s" in p))
    return {"traceback": first_tb is not None, "bar_after_traceback": frames_after > 0}


def main(selected):
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="oomsim-")
    report = []
    try:
        build_tree(tmp)
        for sc in sorted(SCENARIOS, key=lambda s: s["name"]):
            if selected and sc["name"] not in selected:
                continue
            text, rc = run_scenario(tmp, sc)
            size = len(text.encode("utf-8"))
            with open(os.path.join(OUT, sc["name"] + ".log"), "w", encoding="utf-8", newline="") as f:
                f.write(text)
            expect = {"family": sc["family"], "outcome": sc["outcome"], "events": sc["events"]}
            with open(os.path.join(OUT, sc["name"] + ".expect.json"), "w", encoding="utf-8") as f:
                json.dump(expect, f, indent=2, ensure_ascii=False)
                f.write("\n")
            chk = self_check(text)
            report.append((sc["name"], rc, size, chk))
            flag = "" if size <= MAX_LOG_BYTES else "  TOO BIG"
            print(f"{sc['name']:55s} rc={rc:<4d} {size:6d} B  traceback={chk['traceback']!s:5s} "
                  f"bar_after_tb={chk['bar_after_traceback']!s:5s}{flag}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


if __name__ == "__main__":
    main(set(sys.argv[1:]))
