"""The repository's front door stays tidy: one version, a long description that renders on a
package index, a short README whose links resolve, one home for measured numbers, and no
development-history words in tracked files."""

import email
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import zipfile

import packaging.version
import pytest

import bahdanau_tf
import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a Markdown link or image target: ](target) or ](target "title")
LINK = re.compile(r"\]\(([^)\s]+)")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)


def load_setup_py():
    """setup.py as a module (its ``setup()`` call runs only as a script)."""
    spec = importlib.util.spec_from_file_location("bahdanau_setup", os.path.join(ROOT, "setup.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_version_is_pyprojects_everywhere():
    project = pyproject()["project"]
    version = project["version"]
    assert "version" not in project.get("dynamic", [])
    # the package says the version of the distribution it was installed from
    assert bahdanau_tf.__version__ == importlib.metadata.version("bahdanau_tf")
    # main carries a development version above the changelog's latest release; every release
    # section is dated (YYYY-MM-DD)
    changelog = read("CHANGELOG.md")
    releases = re.findall(r"^## \[(\d[^\]]*)\]", changelog, re.M)
    dated = re.findall(r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert releases and dated == releases, (releases, dated)
    development = packaging.version.Version(version)
    assert development.is_devrelease and development > packaging.version.Version(releases[0])
    assert "## [Unreleased]" in changelog
    # an SPDX license expression, as setuptools >= 77 reads it (a table is deprecated)
    assert project["license"] == "Apache-2.0"
    assert any(r.startswith("setuptools>=") and int(r.split(">=")[1]) >= 77
               for r in pyproject()["build-system"]["requires"])
    citation = read("CITATION.cff")
    assert re.search(rf"^version: {re.escape(version)}$", citation, re.M), "CITATION.cff's version"
    repository = project["urls"]["Repository"]
    assert f'repository-code: "{repository}"' in citation
    assert "Apache License" in read("LICENSE") and "Version 2.0, January 2004" in read("LICENSE")


def _relative_links(text):
    return [link for link in LINK.findall(text)
            if not re.match(r"(https?://|mailto:|#)", link)]


def test_the_long_description_has_no_relative_links():
    setup_py = load_setup_py()
    base = setup_py.repository_url()
    description = setup_py.long_description()
    assert _relative_links(description) == []
    # every link README made absolute points at a file or directory of the repository
    readme_links = _relative_links(read("README.md"))
    absolute = [link for link in LINK.findall(description) if link.startswith(base + "/")]
    assert len(absolute) >= len(readme_links) > 0
    for link in absolute:
        path = re.sub(r"^(blob|tree)/main/", "", link[len(base) + 1:]).split("#")[0]
        assert os.path.exists(os.path.join(ROOT, path)), link


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_wheels_metadata_carries_the_long_description(tmp_path_factory):
    """The wheel a package index receives (the one the notebooks install): the version, the
    licence expression, and the description without relative links; its build shows no
    setuptools deprecation warning."""
    wheel = helpers.wheel_of_this_checkout(tmp_path_factory)
    assert "SetuptoolsDeprecationWarning" not in (wheel.parent / "pip-wheel.log").read_text()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = email.message_from_string(
            archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode("utf-8"))
    assert metadata["Version"] == pyproject()["project"]["version"]
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Description-Content-Type"] == "text/markdown"
    description = metadata.get_payload()
    assert description.strip() == load_setup_py().long_description().strip()
    assert _relative_links(description) == []
    # the package data a user needs from a wheel (BUILD.md lists it): the corpus, the shipped
    # model and its card, the serving kit, the licence
    for name in ("bahdanau_tf/corpora/bible-en-es.tsv.gz", "bahdanau_tf/_serving_kit/models.config",
                 "bahdanau_tf/pretrained/bible-en-es-small/model.weights.h5",
                 "bahdanau_tf/pretrained/bible-en-es-small/model.json",
                 "bahdanau_tf/pretrained/bible-en-es-small/README.md", "bahdanau_tf/py.typed"):
        assert name in names, name
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
               for n in names)


def _benchmark_pages():
    """benchmarks/README.md and the topic pages beside it (benchmarks/*.md)."""
    return sorted(os.path.join("benchmarks", name)
                  for name in os.listdir(os.path.join(ROOT, "benchmarks")) if name.endswith(".md"))


def test_benchmarks_pages_are_the_index_of_every_results_file():
    """The benchmark pages (benchmarks/README.md and benchmarks/*.md) name every results file,
    every file they name exists, README.md links each script and each topic page, and the
    README stays a reference (at most 400 lines)."""
    pages = _benchmark_pages()
    readme = read(os.path.join("benchmarks", "README.md"))
    assert len(readme.splitlines()) <= 400
    on_disk = {name for name in os.listdir(os.path.join(ROOT, "benchmarks", "results"))
               if name.endswith(".json")}
    named = set()
    for page in pages:
        named |= set(re.findall(r"\b([\w.-]+\.json)\b", read(page)))
    assert on_disk and named == on_disk, (sorted(named - on_disk), sorted(on_disk - named))
    # a row per benchmark script, each linked, and a link to each topic page
    scripts = {name for name in os.listdir(os.path.join(ROOT, "benchmarks"))
               if name.endswith(".py") and not name.startswith("_")}
    assert scripts <= set(re.findall(r"\]\(([\w.]+\.py)\)", readme)), scripts
    for page in pages:
        if not page.endswith("README.md"):
            assert f"]({os.path.basename(page)})" in readme, page
    for page in pages:
        text = read(page)
        for link in _relative_links(text):
            target, _, anchor = link.partition("#")
            path = os.path.normpath(os.path.join("benchmarks", target)) if target else page
            assert os.path.exists(os.path.join(ROOT, path)), (page, link)
            if anchor and path.endswith(".md"):
                assert anchor in _anchors(path), (page, link)
        for link in LINK.findall(text):
            if link.startswith("#"):
                assert link[1:] in _anchors(page), (page, link)


def _slug(heading):
    """GitHub's anchor of a Markdown heading."""
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def _anchors(path):
    text = read(path)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def _documents():
    """Every tracked Markdown file (``git ls-files '*.md'``), and the notebooks (their Markdown
    cells are read)."""
    return sorted(name for name in _tracked_files() if name.endswith((".md", ".ipynb")))


def _prose(document):
    """A document's text without fenced code blocks; a notebook's Markdown cells."""
    text = read(document)
    if document.endswith(".ipynb"):
        text = "\n\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"]
                           if cell["cell_type"] == "markdown")
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_the_readme_is_a_front_door():
    text = read("README.md")
    assert len(text.splitlines()) <= 200
    # the two commands, as CI (.ci/run) and the Keras block's test use them
    assert ("pip install -e . && bahdanau-train --output_dir=bahdanau_run && bahdanau-evaluate "
            "--model_dir=bahdanau_run --output_dir=bahdanau_run/evaluation") in text
    # the install line and the two tiers' commands (tests/conftest.py), in this order in both
    ci = read(os.path.join(".ci", "run"))
    commands = ['pip install -e ".[test]"'] + [f"python -m pytest -n 2 --dist loadfile --tier={tier} tests"
                                                for tier in ("fast", "extended")]
    for document in (text, ci):
        positions = [document.find(command) for command in commands]
        assert -1 not in positions and positions == sorted(positions), (commands, positions)
    # a page per topic, each linked from the README
    for page in ("training", "translating", "serving", "evaluation", "data", "paper", "design"):
        assert f"](docs/{page}.md)" in text, page
    assert "](benchmarks/README.md)" in text


def test_the_two_tiers_are_the_whole_suite_split_by_the_costly_markers(pytester):
    """tests/conftest.py's rule, on a suite of its own: ``--tier=fast`` runs the tests with no
    costly marker (a new, unmarked test among them), ``--tier=extended`` the others, and no
    ``--tier`` runs both."""
    pytester.makeconftest(read(os.path.join("tests", "conftest.py")))
    pytester.makeini(read("pytest.ini").replace("-p pytester", ""))
    pytester.makepyfile(test_suite="""
        import pytest
        def test_new(): pass
        @pytest.mark.slow
        def test_slow(): pass
        @pytest.mark.subprocess
        class TestProcesses:
            def test_a_command(self): pass
        @pytest.mark.learning
        def test_learns(): pass
        @pytest.mark.parametrize("size", [1, pytest.param(1000, marks=pytest.mark.slow)])
        def test_sizes(size): pass
    """)
    ran = {}
    for tier in ("fast", "extended", None):
        result = pytester.runpytest(*(["--tier", tier] if tier else []), "-q", "-rA", "-p", "no:xdist")
        ran[tier] = set(re.findall(r"^PASSED test_suite.py::(\S+)", result.stdout.str(), re.M))
    assert ran["fast"] == {"test_new", "test_learns", "test_sizes[1]"}, ran
    assert ran["extended"] == {"test_slow", "TestProcesses::test_a_command", "test_sizes[1000]"}, ran
    assert ran[None] == ran["fast"] | ran["extended"]


def test_every_relative_link_resolves():
    """Every relative link of every tracked Markdown file and of the notebooks' Markdown cells
    names a file of the repository, and an anchor (into its own page too) names a heading."""
    checked, broken = 0, []
    for document in _documents():
        for link in LINK.findall(_prose(document)):
            if re.match(r"(https?://|mailto:)", link):
                continue
            path, _, anchor = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(document), path)) if path else document
            if not os.path.exists(os.path.join(ROOT, target)):
                broken.append((document, link))
            elif anchor and target.endswith(".md") and anchor not in _anchors(target):
                broken.append((document, link))
            checked += 1
    assert broken == []
    assert checked > 100


# a section named by its page and its quoted heading: `docs/x.md, "Heading"`,
# `[docs/x.md](../docs/x.md), "Heading"`, `docs/x.md's "Heading"`, `the README's "Heading"`
QUOTED_SECTION = re.compile(r"(?:\[[^\]]*\]\(([^)#\s]+\.md)\)|([\w./-]*\.md)|(the README))(?:'s|,| under)? \"([^\"]{2,100})\"")


def _headings(path):
    """A page's headings, and the bold labels that open a paragraph (README's **Result**)."""
    text = re.sub(r"```.*?```", "", read(path), flags=re.S)
    return [" ".join(h.split()) for h in re.findall(r"^(?:#+ (.*)|\*\*([^*]+)\*\*)", text, re.M) for h in h if h]


def _quoted_sections(name, text):
    """(page, heading) of each section ``text`` names by a quoted heading."""
    for link, plain, readme, heading in QUOTED_SECTION.findall(" ".join(text.split())):
        if readme:
            yield "README.md", heading
            continue
        candidates = [os.path.normpath(os.path.join(os.path.dirname(name), link or plain)),
                      os.path.normpath(link or plain)]
        yield next((c for c in candidates if os.path.isfile(os.path.join(ROOT, c))), candidates[0]), heading


def test_every_quoted_section_exists():
    """A section named by its page and quoted heading (``benchmarks/README.md, "Training"``), in
    every tracked Markdown file, the notebooks' Markdown cells and the package's, scripts' and
    benchmarks' Python (docstrings and messages), is a heading of that page (a quoted heading may
    be the beginning of a longer one)."""
    names = [name for name in _tracked_files() if name.endswith((".md", ".ipynb", ".py"))
             and not name.startswith("tests/")]
    checked, missing = 0, []
    for name in names:
        text = _prose(name) if name.endswith((".md", ".ipynb")) else read(name)
        for page, heading in _quoted_sections(name, text):
            if not os.path.isfile(os.path.join(ROOT, page)):
                missing.append((name, page, heading))
            elif not any(h == heading or h.startswith(heading) for h in _headings(page)):
                if page.endswith("CHANGELOG.md") and heading == "Unreleased":
                    continue  # a release section's name ("## [Unreleased]")
                missing.append((name, page, heading))
            checked += 1
    assert missing == []
    assert checked > 20


# development history is the changelog's and git's, not the code's
HISTORY = re.compile(r"session ?[0-9]|sessions [0-9]|issue ?#?[0-9]", re.I)


def test_no_development_history_words_in_tracked_files():
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                                check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    hits = []
    for name in filter(None, listed):
        path = os.path.join(ROOT, name)
        if HISTORY.search(name):
            hits.append(name)
        if not os.path.isfile(path) or name.endswith((".gz", ".png")):
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if HISTORY.search(line):
                    hits.append(f"{name}:{number}: {line.strip()[:80]}")
    assert hits == []


def _tracked_files():
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                                check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [name for name in listed if name]


# an install hint that asks a package index for bahdanau_tf, which no index has: the package is
# installed from a clone (pip install -e ".[extra]") or from the repository's URL
# ("bahdanau_tf[extra] @ git+URL"), as the notebooks do
INDEX_HINT = re.compile(r"""pip install\s+(?:-\S+\s+)*\\?["']?bahdanau_tf\b(?!-)(?![^"'\n]*@ git\+)""")
# hints the alignment code's move will carry over (fixed where the code lands), and this file's examples
INDEX_HINT_ELSEWHERE = {"tests/test_repository.py"}


def test_every_install_hint_works_from_a_clone():
    hits = []
    for name in _tracked_files():
        if name.endswith((".py", ".md", ".ipynb", ".txt", ".toml", ".cfg")) and name not in INDEX_HINT_ELSEWHERE:
            path = os.path.join(ROOT, name)
            if os.path.isfile(path):
                for match in INDEX_HINT.finditer(read(name)):
                    hits.append(f"{name}: {match.group(0)}")
    assert hits == []
    assert INDEX_HINT.search("""pip install "bahdanau_tf[serving]\"""")
    assert INDEX_HINT.search("pip install 'bahdanau_tf[align]'") and INDEX_HINT.search("pip install bahdanau_tf")
    assert not INDEX_HINT.search('''pip install "bahdanau_tf @ git+https://github.com/OWNER/bahdanau_tf.git"''')
    assert not INDEX_HINT.search('pip install -e ".[serving]"')


def test_build_md_lists_every_extra_and_the_python_versions_agree():
    project = pyproject()["project"]
    build, readme = read("BUILD.md"), read("README.md")
    for extra, requirements in project["optional-dependencies"].items():
        assert re.search(rf'pip install -e "\.\[(?:\w+,)*{extra}(?:,\w+)*\]"', build), extra
        assert f"`[{extra}]`" in readme, extra
        # the extra's own line lists what it installs, every package of it
        listed = re.search(rf'pip install -e "\.\[{extra}\]" +# \+ ([^:(\n]+)', build)
        if listed:
            said = {name.strip().lower() for name in listed.group(1).split(",")}
            names = {re.match(r"[\w.\[\]-]+", requirement).group(0).lower() for requirement in requirements}
            assert said == names, (extra, said ^ names)
    # requires-python, the classifiers, README and BUILD.md: the same minor versions
    lower, upper = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", project["requires-python"]).groups()
    minors = list(range(int(lower), int(upper)))
    classified = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert classified == minors
    said = f"Python 3.{minors[0]} to 3.{minors[-1]}"
    assert said in build and said in readme, said
