"""The order of the test files, for two xdist workers (`.ci/run`: ``-n 2 --dist loadfile``).

A file is one unit of work, handed to whichever worker is free. xdist's default queue puts the
files with the most tests first, so the few-but-long ones (notebooks, hostile command lines,
the export fixture) came last and one worker ran them alone while the other sat idle. Here the
longest files go first (longest-processing-time-first scheduling), and the many short ones fill
in at the end. A file's length is estimated from its markers (`pytest.ini`): no timing table to
go stale, and a new slow test moves its file forward by itself.
"""

import collections

# estimated seconds of one test on two loaded cores, by marker; only the order they give matters
SECONDS = {"slow": 40.0, "subprocess": 12.0}
OTHER_SECONDS = 2.0


def _estimate(item) -> float:
    for marker, seconds in SECONDS.items():
        if item.get_closest_marker(marker):
            return seconds
    return OTHER_SECONDS


def pytest_configure(config):
    # xdist's own reordering (most tests first) would undo the order set below
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    weight = collections.Counter()
    for item in items:
        weight[item.path] += _estimate(item)
    order = {path: rank for rank, (path, _) in enumerate(
        sorted(weight.items(), key=lambda entry: (-entry[1], str(entry[0]))))}
    items.sort(key=lambda item: order[item.path])  # stable: a file keeps its own order
