"""Tests of bahdanau_tf.devices: the hardware rule behind the default precision and XLA setting."""

import pytest

from bahdanau_tf import devices, training

AVX2_EPYC = devices.Machine(kind="cpu", name="AMD EPYC 7B12", cores=2, cpu_flags=("avx2", "fma"))
BF16_XEON = devices.Machine(kind="cpu", name="Intel Xeon", cores=2,
                            cpu_flags=("avx2", "fma", "avx512f", "avx512_bf16"))
AMX_XEON = devices.Machine(kind="cpu", name="Sapphire Rapids", cores=8,
                           cpu_flags=("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"))


@pytest.mark.parametrize("machine,precision,jit", [
    (AVX2_EPYC, "float32", True),
    (BF16_XEON, "float32", True),  # avx512_bf16 without AMX: float32 + XLA measured faster
    (AMX_XEON, "float32", True),  # AMX tiles: float32 + XLA measured faster than bf16 too
    # oneDNN capped below its bf16 ISA, or off: the bf16 units are out of reach
    (devices.Machine(kind="cpu", name="x", cores=2, cpu_flags=AMX_XEON.cpu_flags, onednn_max_isa="AVX2"),
     "float32", True),
    (devices.Machine(kind="cpu", name="x", cores=2, cpu_flags=AMX_XEON.cpu_flags,
                     onednn_max_isa="avx512_core_bf16"), "float32", True),
    (devices.Machine(kind="cpu", name="x", cores=2, cpu_flags=AMX_XEON.cpu_flags,
                     onednn_max_isa="avx512_core_amx"), "float32", True),
    (devices.Machine(kind="cpu", name="x", cores=2, cpu_flags=AMX_XEON.cpu_flags, onednn_enabled=False),
     "float32", True),
    (devices.Machine(kind="gpu", name="A100", cores=1, compute_capability=(8, 0)), "mixed_bfloat16", True),
    (devices.Machine(kind="gpu", name="T4", cores=1, compute_capability=(7, 5)), "mixed_float16", True),
    (devices.Machine(kind="gpu", name="P100", cores=1, compute_capability=(6, 0)), "float32", True),
])
def test_training_choice_follows_the_hardware(machine, precision, jit):
    choice = devices.training_choice(machine)
    assert (choice.precision, choice.jit_compile) == (precision, jit)
    assert choice.reason


def test_a_fixed_precision_gets_its_own_xla_setting():
    # XLA:CPU emulates bf16, so a user's bf16 on a CPU runs without XLA; float32 gets XLA
    assert devices.training_choice(AMX_XEON, precision="float32").jit_compile is True
    assert devices.training_choice(AVX2_EPYC, precision="mixed_bfloat16").jit_compile is False


def test_cpu_info_reads_model_name_and_relevant_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B12\n"
                       "flags\t\t: fpu sse2 avx avx2 fma bmi2\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B12\n")
    assert devices.cpu_info(str(cpuinfo)) == ("AMD EPYC 7B12", ("avx2", "fma"))


@pytest.fixture
def fresh_detection(monkeypatch):
    devices.detect.cache_clear()
    yield monkeypatch
    devices.detect.cache_clear()


def test_onednn_cap_in_the_environment_turns_bf16_off(fresh_detection):
    fresh_detection.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    machine = devices.detect()
    assert machine.onednn_max_isa == "AVX2" and not machine.cpu_bf16
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in machine.description()
    config = training.TrainingConfig.for_preset("small")
    assert (config.precision, config.jit_compile, config.padding_multiple) == ("float32", True, 8)
    assert config.device_chose == ("precision", "jit_compile")
    assert config.speed_summary() == "float32 + XLA (device choice: CPU without bfloat16 units)"


@pytest.mark.parametrize("machine,isa,onednn,crashes", [
    (BF16_XEON, "AVX2", True, True),  # TensorFlow sends bf16 to oneDNN (avx512f), capped below it
    (BF16_XEON, "sse41", True, True),
    (BF16_XEON, "AVX2", False, False),  # TF_ENABLE_ONEDNN_OPTS=0: Eigen
    (BF16_XEON, "AVX512_CORE", True, False),  # oneDNN keeps a bf16 matmul at AVX-512
    (BF16_XEON, None, True, False),
    (AVX2_EPYC, "AVX2", True, False),  # a real AVX2 CPU: TensorFlow runs bf16 in Eigen
    (devices.Machine(kind="gpu", name="A100", cores=1, compute_capability=(8, 0)), "AVX2", True, False),
])
def test_bf16_matmuls_crash_only_where_tensorflow_hands_them_to_a_capped_onednn(machine, isa, onednn, crashes):
    import dataclasses

    machine = dataclasses.replace(machine, onednn_max_isa=isa, onednn_enabled=onednn)
    assert machine.cpu_bf16_matmul_crashes is crashes


def test_the_cpu_alone_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    machine = devices.cpu()
    assert (machine.kind, machine.onednn_max_isa, machine.onednn_enabled) == ("cpu", "AVX2", False)
    assert machine.cpu_flags == devices.cpu_info()[1] and not machine.cpu_bf16_matmul_crashes


def test_explicit_settings_win_over_the_device():
    config = training.TrainingConfig.for_preset("small", precision="mixed_float16", jit_compile=False)
    assert (config.precision, config.jit_compile, config.device_chose) == ("mixed_float16", False, ())
    assert config.speed_summary() == "mixed_float16, no XLA (as set)"
    # the paper presets follow the device too (no preset row fixes precision or XLA)
    auto = training.TrainingConfig.for_preset("rnnsearch-50")
    choice = devices.training_choice()
    assert (auto.precision, auto.jit_compile) == (choice.precision, choice.jit_compile)


def test_decoding_slots_fit_about_160_rows_on_a_cpu_and_64_slots_on_a_gpu():
    gpu = devices.Machine(kind="gpu", name="NVIDIA A100", cores=8, compute_capability=(8, 0))
    slots = {beam: devices.decoding_slots(AVX2_EPYC, beam_size=beam) for beam in (1, 2, 3, 4, 5, 12)}
    assert slots == {1: 64, 2: 64, 3: 53, 4: 40, 5: 32, 12: 32}
    assert devices.decoding_slots(AVX2_EPYC) == 32  # a beam not known when tracing
    assert devices.decoding_slots(gpu, beam_size=1) == devices.decoding_slots(gpu, beam_size=5) == 64
