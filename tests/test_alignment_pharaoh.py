"""Tests of bahdanau_tf.alignment.pharaoh (Pharaoh files, eflomal) and `symmetrize`, and of the
command lines that read and write its files: ``bahdanau-data align`` and ``bahdanau-train
--guided_alignment``."""

import importlib.util
import itertools
import os

import pytest

from bahdanau_tf import alignment
from helpers import env_without_tensorflow_logging, run_commands

HAS_EFLOMAL = importlib.util.find_spec("eflomal") is not None


def test_pharaoh_round_trip_and_bad_fields(tmp_path):
    links = {(0, 0), (3, 1), (1, 1), (2, 5)}
    line = alignment.format_pharaoh(links)
    assert line == "0-0 1-1 3-1 2-5"
    assert alignment.parse_pharaoh(line + "\n") == links
    assert alignment.parse_pharaoh("   \n") == set()
    path = tmp_path / "a.links"
    path.write_text("0-0\n1-x\n")
    with pytest.raises(ValueError, match="line 2.*'1-x'"):
        alignment.read_pharaoh(str(path))


def test_a_links_file_is_read_by_the_package_line_rule(tmp_path):
    """A byte-order mark, CR LF and lone CR line ends are read as every other input; bytes that
    are not UTF-8 are one error naming the file and the line."""
    path = tmp_path / "windows.links"
    path.write_bytes(b"\xef\xbb\xbf0-0 1-1\r\n\r\n2-1\r0-0")
    assert alignment.read_pharaoh(str(path)) == [{(0, 0), (1, 1)}, set(), {(2, 1)}, {(0, 0)}]
    path.write_bytes(b"0-0\n1-1 \xe9\n")
    with pytest.raises(ValueError, match="windows.links' line 2 is not valid UTF-8"):
        alignment.read_pharaoh(str(path))


def _grow_diag_final_and_reference(forward, reverse):
    """Koehn's pseudo-code (GROW-DIAG-FINAL-AND), written out once more: for comparison."""
    union, alignment = forward | reverse, set(forward & reverse)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]

    def source_aligned(s):
        return any(a == s for a, _ in alignment)

    def target_aligned(t):
        return any(b == t for _, b in alignment)

    added = True
    while added:
        added = False
        for s, t in sorted(alignment):
            for ds, dt in neighbours:
                new = (s + ds, t + dt)
                if new in union and new not in alignment and (
                        not source_aligned(new[0]) or not target_aligned(new[1])):
                    alignment.add(new)
                    added = True
    for direction in (forward, reverse):
        for s, t in sorted(direction):
            if not source_aligned(s) and not target_aligned(t):
                alignment.add((s, t))
    return alignment


def test_symmetrizations_against_the_definitions():
    cells = list(itertools.product(range(4), range(4)))
    rng = __import__("numpy").random.default_rng(0)
    for _ in range(200):
        forward = {c for c in cells if rng.random() < 0.3}
        reverse = {c for c in cells if rng.random() < 0.3}
        assert alignment.symmetrize(forward, reverse, "intersection") == forward & reverse
        assert alignment.symmetrize(forward, reverse, "union") == forward | reverse
        grown = alignment.symmetrize(forward, reverse)
        assert grown == _grow_diag_final_and_reference(forward, reverse)
        assert forward & reverse <= grown <= forward | reverse
    with pytest.raises(ValueError, match="grow-diag"):
        alignment.symmetrize(set(), set(), "grow")


# the refusals' command lines (bahdanau-data align without eflomal, bahdanau-train with bad
# alignment files), rows of one process: (name, command, arguments, what its test checks)
_TRAIN = ["--preset=tiny", "--max_steps=1", "--max_train_pairs=2", "--tokenizer=word", "--vocabulary_size=100"]
_REFUSED_LINKS = (("bad.links", "line 2: not a Pharaoh link"),
                  ("short.links", "1 lines of alignments for 2 training pairs"),
                  ("missing.links", "No such file"))


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    """{row name: result}: every refusal of this file's tests, in one process whose eflomal
    cannot be imported (a blocker module first on its path)."""
    tmp_path = tmp_path_factory.mktemp("refusals")
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "eflomal.py").write_text("raise ImportError('no eflomal here')\n")
    (tmp_path / "bad.links").write_text("0-0 1-1\nzero-one\n")
    (tmp_path / "short.links").write_text("0-0\n")
    env = env_without_tensorflow_logging()
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env.get("PYTHONPATH", "")])
    rows = {"align": ("data", ["align", f"--alignment_file={tmp_path / 'x.links'}"]),
            "realign": ("data", ["realign"])}
    rows.update({name: ("train", [*_TRAIN, f"--guided_alignment={name}", f"--output_dir={tmp_path / name}.run"])
                 for name, _ in _REFUSED_LINKS})
    results = run_commands([(command, arguments, "") for command, arguments in rows.values()],
                           cwd=str(tmp_path), env=env)
    return tmp_path, dict(zip(rows, results, strict=True))


@pytest.mark.subprocess
def test_data_align_without_eflomal_is_one_line_and_exit_code_2(refusals):
    tmp_path, results = refusals
    result, other = results["align"], results["realign"]
    assert result["code"] == 2, result["stderr"]
    lines = [line for line in result["stderr"].splitlines() if line.startswith("bahdanau-data")]
    assert lines == ["bahdanau-data: error: " + alignment.EFLOMAL_MISSING]
    assert not (tmp_path / "x.links").exists()
    assert other["code"] == 2 and "commands: align" in other["stderr"]


@pytest.mark.subprocess
@pytest.mark.skipif(not HAS_EFLOMAL, reason="eflomal (the optional extra align) is not installed")
def test_data_align_writes_a_line_of_links_per_pair(tmp_path):
    words = ["house", "small", "big", "the", "car", "is", "a"]
    rng = __import__("numpy").random.default_rng(1)
    pairs = []
    for _ in range(300):
        sentence = list(rng.choice(words, rng.integers(2, 7)))
        pairs.append((" ".join(sentence), " ".join(w.upper() + "x" for w in sentence)))
    (tmp_path / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
    (result,) = run_commands([("data", ["align", "--tsv=train.tsv", "--alignment_file=train.links",
                                        "--symmetrization=intersection"], "")], cwd=str(tmp_path),
                             env=env_without_tensorflow_logging())
    assert result["code"] == 0, result["stderr"]
    links = alignment.read_pharaoh(str(tmp_path / "train.links"))
    assert len(links) == len(pairs)
    # word i translates word i: eflomal finds (nearly) the diagonal
    found = sum(len(sentence) for sentence in links)
    diagonal = sum(len({(i, i) for i in range(len(s.split()))} & sentence)
                   for (s, _), sentence in zip(pairs, links))
    assert found and diagonal / found > 0.9
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporary left


@pytest.mark.subprocess
def test_train_refuses_a_bad_or_short_alignment_file(refusals):
    tmp_path, results = refusals
    for name, message in _REFUSED_LINKS:
        result = results[name]
        assert result["code"] == 2, result["stderr"]
        errors = [line for line in result["stderr"].splitlines() if "error" in line]
        assert len(errors) == 1 and message in errors[0], result["stderr"]
        assert not (tmp_path / f"{name}.run").exists()
