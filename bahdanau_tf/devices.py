"""What this machine is, and which precision and XLA setting suit it (DESIGN §2).

This module owns one question: *on the device training or decoding runs on, which compute
precision and which XLA setting are fastest?* It answers from the hardware's own description,
not from a timing run:

- **GPU** (compute capability from ``tf.config.experimental.get_device_details``): XLA on;
  ``mixed_bfloat16`` from 8.0 (Ampere and newer: bf16 tensor cores), ``mixed_float16`` on 7.x
  (Volta, Turing: fp16 tensor cores, dynamic loss scaling), ``float32`` below.
- **any CPU**: ``float32`` with XLA, AMX tiles or not. On CPUs with AVX-512 bf16 instructions
  but no AMX, and on AVX2/FMA-only x86 (where a bf16 matmul falls back to Eigen), float32 +
  XLA was the fastest of all four variants (float32 and mixed bfloat16, each with and without
  XLA; XLA:CPU emulates bf16). CPUs with AMX tiles (oneDNN runs its bf16 matmuls on them) get
  the same choice; a run there that found it fastest too wrote no results file, so re-run
  the benchmark on such a CPU before trusting it. benchmarks/README.md ("Training") has the
  runs, their dates and CPUs (benchmarks/train_throughput.py, which times every variant side
  by side in interleaved rounds; benchmarks/twelve_minute_runs.py).

``ONEDNN_MAX_CPU_ISA`` set below ``AVX512_CORE_AMX`` (oneDNN then leaves the tiles alone), and
``TF_ENABLE_ONEDNN_OPTS=0`` (no oneDNN at all), count as "no AMX" in the reason given.

Why a rule rather than a calibration run: it is deterministic (the same machine always makes
the same choice, so a resumed run and ``model.json`` agree and tests are repeatable), it costs
nothing (a calibration would spend seconds of the 12-minute budget, and an XLA compilation
alone takes ~4 s per shape), and on a shared 2-core machine a few seconds of timing can flip on
noise. The rule is checked by ``benchmarks/train_throughput.py``, which times every variant
side by side and records the CPU model and flags it ran on.

    >>> choice = training_choice(Machine(kind="cpu", name="AMD EPYC", cores=2,
    ...                                  cpu_flags=("avx2", "fma")))
    >>> choice.precision, choice.jit_compile
    ('float32', True)
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform

# CPU flags (as /proc/cpuinfo spells them) that matter for speed; benchmarks record them.
RELEVANT_CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# oneDNN's ONEDNN_MAX_CPU_ISA values that leave the bf16 instructions out, and the AMX tiles.
_ISAS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")
_ISAS_WITHOUT_AMX = _ISAS_WITHOUT_BF16 + ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512")
# ... and those below AVX-512, where oneDNN has no bf16 matmul at all
_ISAS_WITHOUT_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")


@dataclasses.dataclass(frozen=True)
class Machine:
    """The accelerator training would use: the GPUs if any, else the CPU.

    Attributes:
        kind: ``"gpu"`` or ``"cpu"``.
        name: the CPU model name, or the GPU names joined by ``", "``.
        cores: int, CPU cores (logical), or the number of GPUs.
        cpu_flags: the `RELEVANT_CPU_FLAGS` the CPU has.
        compute_capability: ``(major, minor)`` of the weakest GPU, or None.
        onednn_max_isa: the ``ONEDNN_MAX_CPU_ISA`` in effect, or None.
        onednn_enabled: False when ``TF_ENABLE_ONEDNN_OPTS`` turns oneDNN off.
    """

    kind: str
    name: str
    cores: int
    cpu_flags: tuple = ()
    compute_capability: tuple | None = None
    onednn_max_isa: str | None = None
    onednn_enabled: bool = True

    @property
    def cpu_bf16(self) -> bool:
        """True when the CPU has bf16 units and oneDNN may use them."""
        has_units = any(flag in self.cpu_flags for flag in _BF16_CPU_FLAGS)
        capped = (self.onednn_max_isa or "").upper() in _ISAS_WITHOUT_BF16
        return has_units and self.onednn_enabled and not capped

    @property
    def cpu_amx(self) -> bool:
        """True when the CPU has AMX bf16 tiles and oneDNN may use them."""
        capped = (self.onednn_max_isa or "").upper() in _ISAS_WITHOUT_AMX
        return "amx_bf16" in self.cpu_flags and self.onednn_enabled and not capped

    @property
    def cpu_bf16_matmul_crashes(self) -> bool:
        """True when a bf16 matmul crashes the process here (a segfault, not an error).

        TensorFlow sends bf16 matmuls to oneDNN whenever the CPU has AVX-512F (its own CPUID
        test, which ``ONEDNN_MAX_CPU_ISA`` does not change), and a oneDNN capped below AVX-512
        has no kernel for them. A real AVX2 CPU is not like this: TensorFlow runs its bf16
        matmuls in Eigen. ``TF_ENABLE_ONEDNN_OPTS=0`` runs every op in Eigen, bf16 included.
        """
        capped = (self.onednn_max_isa or "").upper() in _ISAS_WITHOUT_AVX512
        return self.kind == "cpu" and "avx512f" in self.cpu_flags and self.onednn_enabled and capped

    def description(self) -> str:
        """One line for logs and reports, e.g. ``CPU (AMD EPYC 7B13, 2 cores, avx2 fma)``."""
        if self.kind == "gpu":
            capability = ".".join(map(str, self.compute_capability or ()))
            return f"{self.cores} x GPU ({self.name}, compute capability {capability or '?'})"
        flags = " ".join(self.cpu_flags) or "no AVX2"
        notes = []
        if self.onednn_max_isa:
            notes.append(f"ONEDNN_MAX_CPU_ISA={self.onednn_max_isa}")
        if not self.onednn_enabled:
            notes.append("oneDNN off")
        extra = f"; {', '.join(notes)}" if notes else ""
        return f"CPU ({self.name}, {self.cores} cores, {flags}{extra})"

    def to_json(self) -> dict:
        """The fields as a JSON-able dict (benchmarks and ``model.json`` record it)."""
        return {**dataclasses.asdict(self), "flags": {flag: flag in self.cpu_flags for flag in RELEVANT_CPU_FLAGS},
                "description": self.description()}


@dataclasses.dataclass(frozen=True)
class SpeedChoice:
    """A precision and XLA setting, and why they were chosen.

    Attributes:
        precision: ``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"``.
        jit_compile: bool, XLA.
        reason: str, one clause for the header line.
    """

    precision: str
    jit_compile: bool
    reason: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def cpu_info(path="/proc/cpuinfo") -> tuple[str, tuple]:
    """``(model name, relevant flags)`` of the CPU, from ``/proc/cpuinfo`` where it exists."""
    name, flags = "", set()
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                if name and flags:
                    break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "unknown CPU"
    return name, tuple(flag for flag in RELEVANT_CPU_FLAGS if flag in flags)


def _gpus():
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    names, capabilities = [], []
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        names.append(details.get("device_name", gpu.name))
        if details.get("compute_capability"):
            capabilities.append(tuple(details["compute_capability"]))
    return names, (min(capabilities) if capabilities else None)


def cpu() -> Machine:
    """The CPU as a `Machine`, with the oneDNN settings of the environment; imports no TensorFlow."""
    onednn_max_isa = os.environ.get("ONEDNN_MAX_CPU_ISA") or None
    onednn_enabled = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1").strip().lower() not in ("0", "false")
    name, flags = cpu_info()
    return Machine(kind="cpu", name=name, cores=os.cpu_count() or 1, cpu_flags=flags,
                   onednn_max_isa=onednn_max_isa, onednn_enabled=onednn_enabled)


@functools.lru_cache(maxsize=None)
def detect() -> Machine:
    """The `Machine` this process runs on (GPUs first); cached, reads no timing."""
    names, capability = _gpus()
    if names:
        return Machine(kind="gpu", name=", ".join(sorted(set(names))), cores=len(names),
                       compute_capability=capability)
    return cpu()


def training_choice(machine: Machine | None = None, precision: str | None = None) -> SpeedChoice:
    """The precision and XLA setting that train fastest on ``machine`` (default: this one).

    Args:
        machine: a `Machine`; default `detect()`.
        precision: a precision the user fixed, or None: then only the XLA setting is chosen,
            for that precision (on a CPU, XLA for float32 only: XLA:CPU emulates bf16/fp16).

    See the module docstring for the rule and the measurements behind it.
    """
    machine = machine or detect()
    if machine.kind == "gpu":
        major, minor = machine.compute_capability or (0, 0)
        if precision is None:
            precision = "mixed_bfloat16" if major >= 8 else "mixed_float16" if major >= 7 else "float32"
        return SpeedChoice(precision, True, f"GPU compute capability {major}.{minor}")
    if machine.cpu_amx:
        reason = "CPU with AMX bfloat16 tiles"
    elif machine.cpu_bf16:
        reason = "CPU with AVX-512 bfloat16 but no AMX"
    else:
        reason = "CPU without bfloat16 units"
    if precision is None:
        precision = "float32"
    return SpeedChoice(precision, precision == "float32", reason)


def decoding_jit(machine: Machine | None = None) -> bool:
    """Whether the Translator's Python path compiles its search with XLA: yes, on every device.

    Beam search is a loop of small ops; XLA fuses each step and was faster at every batch size
    on the CPUs measured (benchmarks/decode_throughput.py, benchmarks/README.md), bf16
    units or not (decoding runs in float32 on CPUs, `decoding_precision`).
    """
    del machine
    return True


_DECODING_ROWS = 160  # rows (slots x beam) a CPU search step is fitted to


def decoding_slots(machine: Machine | None = None, beam_size: int | None = None) -> int:
    """Sentences the Translator's beam search keeps in flight (`bahdanau_tf.decoding`'s
    ``slots``). On a CPU about 160 rows a step (slots x ``beam_size``), between 32 and 64
    slots: 64 for greedy search, 32 from beam 5 up (32 when the beam is not known when
    tracing); 64 on a GPU.

    A finished sentence's slot is refilled at once, so the slot count is not a unit anything
    waits for: it sets the rows of each step's matmuls (slots x beam). Each step has a fixed
    cost (every op a kernel launch without XLA, a thunk under XLA), which more rows amortise;
    the search's tail (the slots emptying once nothing is left to load) goes on over half the
    slots (`bahdanau_tf.decoding.beam_search`). On a 2-core CPU these counts translated the
    test verses fastest at batch 64, with and without XLA (benchmarks/decode_throughput.py;
    benchmarks/README.md). A GPU needs more rows to fill its units.
    """
    machine = machine or detect()
    if machine.kind == "gpu":
        return 64
    if beam_size is None:
        return 32
    return min(64, max(32, _DECODING_ROWS // max(int(beam_size), 1)))


def decoding_precision(machine: Machine | None = None) -> str | None:
    """The dtype policy a trained model is loaded in for translation: ``"float32"`` on a CPU,
    None (the policy it was trained in) on a GPU.

    A model trained in mixed bfloat16 keeps float32 weights, so float32 loses nothing; on a CPU
    it is the faster choice under XLA (XLA:CPU emulates bf16), and without bf16 units (Eigen
    runs bf16 at a fraction of float32's speed; under ``ONEDNN_MAX_CPU_ISA=AVX2`` oneDNN even
    aborts on bf16 matmuls).
    """
    machine = machine or detect()
    return None if machine.kind == "gpu" else "float32"


def benchmark_record() -> dict:
    """What a benchmark's JSON records about the machine: the `Machine` (CPU model and its
    relevant flags), the environment variables that cap or change the kernels used, and the
    load average (the machine may be shared)."""
    import tensorflow as tf

    return {
        **detect().to_json(),
        "environment": {name: os.environ.get(name) for name in
                        ("ONEDNN_MAX_CPU_ISA", "XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS")},
        "tensorflow": tf.__version__,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def device_description() -> str:
    """A short description of the devices training runs on, for the report."""
    return detect().description()


__all__ = ["Machine", "SpeedChoice", "RELEVANT_CPU_FLAGS", "cpu_info", "detect", "training_choice",
           "decoding_jit", "decoding_precision", "benchmark_record", "device_description"]
