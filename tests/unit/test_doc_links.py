"""Every relative link of README.md and docs/*.md leads somewhere: the file exists and, for ``page.md#anchor``
(or ``#anchor`` within the page), the page has a heading whose GitHub anchor that is. A section moved from the
README to docs/ (or renamed) fails here with the link to change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> list[str]:
    """The lines of a Markdown page outside its fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens, -1 on a repeat."""
    found: set[str] = set()
    for line in prose(page.read_text()):
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
            candidate, repeat = slug, 0
            while candidate in found:
                repeat += 1
                candidate = f"{slug}-{repeat}"
            found.add(candidate)
    return found


def links(page: Path) -> list[tuple[str, str]]:
    """(where, target) of every relative link of a page (a link's text may span lines; code spans are skipped)."""
    text = re.sub(r"`[^`]*`", lambda code: "\n" * code.group().count("\n"), "\n".join(prose(page.read_text())))
    return [(f"{page.relative_to(ROOT)}:{target}", target) for target in LINK.findall(text)
            if not re.match(r"[a-z]+:", target)]


LINKS = [(page, where, target) for page in PAGES for where, target in links(page)]


def test_the_pages_have_links_to_check() -> None:
    assert len(LINKS) > 50 and any("#" in t for _, _, t in LINKS)
    assert {"quick-start", "performance", "module-map"} <= anchors(ROOT / "README.md")


@pytest.mark.parametrize(("page", "where", "target"), LINKS, ids=[w for _, w, _ in LINKS])
def test_the_link_leads_to_a_file_and_heading(page: Path, where: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{where}: {path} does not exist (moved? change the link)"
    if anchor:
        assert dest.suffix == ".md", f"{where}: an anchor into a non-Markdown file"
        assert anchor in anchors(dest), (
            f"{where}: {dest.relative_to(ROOT)} has no heading #{anchor} (renamed or moved? change the link)")
