"""The two things pyproject.toml cannot say: the long description and the package list.

All other metadata (name, version, dependencies, extras, command lines, package data) is in
pyproject.toml. A package index shows the long description outside the repository, where
README.md's relative links would break: here they point at the repository instead (its
``Repository`` URL in pyproject.toml). The package list adds the serving kit, which lives in
``export/`` and ships as ``bahdanau_tf._serving_kit``.
"""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
# a Markdown link or image target: ](target) or ](target "title")
_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+)")


def repository_url() -> str:
    """pyproject.toml's ``Repository = "..."`` URL (the one line a publisher sets)."""
    text = (HERE / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^Repository = "([^"]+)"', text, re.M)
    if match is None:
        raise ValueError('pyproject.toml has no [project.urls] Repository = "https://..." line')
    return match.group(1).rstrip("/")


def long_description() -> str:
    """README.md with every relative link made an absolute URL of the repository's main branch."""
    base = repository_url()

    def absolute(match):
        path = match.group(1).removeprefix("./")
        kind = "tree" if (HERE / path.split("#")[0]).is_dir() else "blob"
        return f"]({base}/{kind}/main/{path}"

    return _LINK.sub(absolute, (HERE / "README.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    setup(
        long_description=long_description(),
        long_description_content_type="text/markdown",
        packages=find_packages(include=["bahdanau_tf", "bahdanau_tf.*"])
        + ["bahdanau_tf._serving_kit"],
    )
