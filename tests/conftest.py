"""The test tiers, and how the suite shares the machine between xdist workers (``-n 2``).

Tiers: ``--tier=fast`` runs the tests that carry none of the costly markers of `COSTLY`
(pytest.ini says what each means), ``--tier=extended`` runs those that carry one, no ``--tier``
runs both. The rule is here and nowhere else: a new test is in the fast tier unless it is marked
costly, and the two tiers together are the whole suite (README.md's two test commands, `.ci/run`).

Threads: each worker, and every process it starts (commands, notebooks' kernels, serving
processes inherit the environment), gets its share of the cores for TensorFlow's thread pools
(``TF_NUM_INTRAOP_THREADS``/``TF_NUM_INTEROP_THREADS``, unless already set). Two workers whose
TensorFlow each sized its pools for the whole machine would fight over the same cores.

bfloat16: a test marked ``bfloat16`` runs bf16 matmuls on the CPU. Under a oneDNN capped below
AVX-512 (``ONEDNN_MAX_CPU_ISA=AVX2``, how the suite is run "as on an AVX2 CPU") on a CPU that has
AVX-512, TensorFlow still hands them to oneDNN, which has no kernel for them: the process
crashes (`bahdanau_tf.devices.Machine.cpu_bf16_matmul_crashes`). There the test is skipped,
with that reason; on a real AVX2 CPU, or with ``TF_ENABLE_ONEDNN_OPTS=0`` added (every op in
Eigen), it runs.

XLA: the run's compilations go to one cache (TensorFlow's persistent compilation cache,
``TF_XLA_FLAGS=--tf_xla_persistent_cache_directory``), an empty ``xla_cache`` in the run's own
pytest base temporary directory, made by the process that starts the workers and removed when
the run ends (a killed run's goes with pytest's rotation of its base directories, as its
tests' ``tmp_path`` do): the workers and the processes they start inherit it, so a program compiled once (a ``tiny`` model's train step, a search over one shape) is
loaded, not compiled again, by the next Trainer, translator or command line that builds it. Each
run compiles everything once; nothing is kept between runs. A ``TF_XLA_FLAGS`` that already
names a cache is kept.

Order: the order of the test files.

A file is one unit of work, handed to whichever worker is free. xdist's default queue puts the
files with the most tests first, so the few-but-long ones (notebooks, hostile command lines,
the export fixture) came last and one worker ran them alone while the other sat idle. Here the
longest files go first (longest-processing-time-first scheduling), and the many short ones fill
in at the end. A file's length is estimated from its markers (`pytest.ini`): no timing table to
go stale, and a new slow test moves its file forward by itself. A test's markers add up (a slow
test that starts processes weighs more than a slow one that does not), and a test skipped by a
condition known at collection (another backend not installed) weighs nothing. A worker is handed
its next file while the last two tests of its current one still run (xdist's heuristic), so a
long file estimated too short, handed out late, is what leaves the other worker idle at the end.
"""

import collections
import os
import shutil

import pytest

# a test with one of these markers is in the extended tier; every other test is in the fast tier
COSTLY = ("slow", "subprocess")
TIERS = ("fast", "extended")

_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:  # this is an xdist worker: set before any test module imports TensorFlow
    _THREADS = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", _THREADS)
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", _THREADS)

_XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"
_XLA_CACHE = []  # the cache this process made (the one that starts the workers)

# estimated seconds of one test on two loaded cores, by marker (summed); only the order they give matters
SECONDS = {"slow": 40.0, "subprocess": 12.0}
OTHER_SECONDS = 2.0


BF16_CRASH = ("bf16 matmuls crash here: ONEDNN_MAX_CPU_ISA={isa} caps oneDNN below AVX-512, but "
              "TensorFlow still sends them to it (it tests the CPU's avx512f, not the cap); a real "
              "AVX2 CPU runs them in Eigen, as TF_ENABLE_ONEDNN_OPTS=0 does (float32 too)")


def _estimate(item) -> float:
    """A test's estimated seconds: the sum of its markers' (a slow test that starts processes
    costs more than one that does not), nothing when it is skipped unconditionally or by a
    condition already known to hold (another backend's missing package)."""
    if item.get_closest_marker("skip") or any(
            marker.args and marker.args[0] is True for marker in item.iter_markers("skipif")):
        return 0.0
    seconds = sum(value for marker, value in SECONDS.items() if item.get_closest_marker(marker))
    return seconds or OTHER_SECONDS


def tier(item) -> str:
    """"extended" when the test carries a costly marker, else "fast"."""
    return "extended" if any(item.get_closest_marker(marker) for marker in COSTLY) else "fast"


def pytest_addoption(parser):
    parser.addoption("--tier", choices=TIERS, default=None,
                     help="run one tier: fast (no test marked %s) or extended (the others); "
                          "default: both" % " or ".join(COSTLY))


@pytest.hookimpl(trylast=True)  # after pytest's temporary-directory plugin is configured
def pytest_configure(config):
    if os.environ.get("BAHDANAU_LEARNING_SEED"):  # a bad seed: one line, before any test fails of it
        from helpers import parse_learning_seed

        try:
            parse_learning_seed(os.environ["BAHDANAU_LEARNING_SEED"])
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
    # xdist's own reordering (most tests first) would undo the order set below
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    # not in a worker (it inherits the cache), nor where a cache is already named
    if not hasattr(config, "workerinput") and _XLA_CACHE_FLAG not in os.environ.get("TF_XLA_FLAGS", ""):
        cache = config._tmp_path_factory.getbasetemp() / "xla_cache"
        cache.mkdir()
        _XLA_CACHE.append(cache)
        os.environ["TF_XLA_FLAGS"] = f"{os.environ.get('TF_XLA_FLAGS', '')} {_XLA_CACHE_FLAG}={cache}".strip()


def pytest_unconfigure(config):
    for cache in _XLA_CACHE:
        shutil.rmtree(cache, ignore_errors=True)


def pytest_collection_modifyitems(session, config, items):
    chosen = config.getoption("--tier")
    if chosen:
        deselected = [item for item in items if tier(item) != chosen]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if tier(item) == chosen]
    _skip_bf16_where_it_crashes(items)
    weight = collections.Counter()
    for item in items:
        weight[item.path] += _estimate(item)
    order = {path: rank for rank, (path, _) in enumerate(
        sorted(weight.items(), key=lambda entry: (-entry[1], str(entry[0]))))}
    items.sort(key=lambda item: order[item.path])  # stable: a file keeps its own order


def _skip_bf16_where_it_crashes(items):
    from bahdanau_tf import devices  # imports no TensorFlow

    machine = devices.cpu()
    if machine.cpu_bf16_matmul_crashes:
        skip = pytest.mark.skip(reason=BF16_CRASH.format(isa=machine.onednn_max_isa))
        for item in items:
            if item.get_closest_marker("bfloat16"):
                item.add_marker(skip)
