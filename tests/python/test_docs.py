"""The README and the docs hold together: every relative link names a file that exists and, where it
names a heading, a heading of that file (GitHub's anchors); the README stays a first page (at most
220 lines) that lists every page of docs/; and its two commands, the demo and the tests, are the
scripts CI runs."""

from __future__ import annotations

import os
import re
import unicodedata

import pytest

from conftest import REPO

README = REPO / "README.md"
PAGES = [README, REPO / "examples" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (but - and _), spaces -> -."""
    text = heading.strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path) -> set[str]:
    found, seen = set(), {}
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not fenced:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path) -> list[str]:
    return [a or b for a, b in LINK.findall(prose(path.read_text()))]


def test_slug_is_githubs():
    assert slug("Loader swap (`stallscope run --loader`)") == "loader-swap-stallscope-run---loader"
    assert slug("Ranks (`ranks[]`, `slowest_rank`: multi-rank jobs)") == "ranks-ranks-slowest_rank-multi-rank-jobs"
    assert slug("Where a newcomer adds …") == "where-a-newcomer-adds-"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, REPO))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no {os.path.relpath(dest, REPO)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {os.path.relpath(dest, REPO)}")
    assert not broken, f"{os.path.relpath(page, REPO)}: " + "; ".join(broken)


def test_a_broken_link_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n## A `code` part\n[ok](#a-code-part) [bad](#nowhere) [file](missing.md)\n"
                    "```\n[not a link](nowhere.md)\n```\n")
    assert anchors(page) == {"title", "a-code-part"}
    assert links(page) == ["#a-code-part", "#nowhere", "missing.md"]


def test_readme_is_a_first_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 220, "README.md is over 220 lines: move the details to a page of docs/"
    # Every page of docs/ is in the README's table of the docs.
    table = text.split("## Documentation", 1)[1]
    listed = {os.path.normpath(t.partition("#")[0]) for t in LINK.findall(table) for t in t if t}
    pages = {os.path.join("docs", p.name) for p in (REPO / "docs").glob("*.md")}
    assert pages <= listed, f"not in the README's table of the docs: {sorted(pages - listed)}"


def test_readme_commands_are_the_scripts_ci_runs():
    text = README.read_text()
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert f"./{script}" in text, script
        assert os.access(REPO / script, os.X_OK), script
    assert "./scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    assert "examples/slow_getitem.py" in (REPO / "scripts" / "demo.sh").read_text()
