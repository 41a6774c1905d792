"""The README stays a guide (issue 40): at most 200 lines, everything else in docs/; and every relative
link in README.md and docs/**/*.md (Markdown `[text](target)` and HTML `src=` / `href=`) points at a
file or folder that exists, resolved from the page it is in."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_README_LINES = 200

_MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_LINK = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r"`[^`]*`", "", line)


def relative_links(page: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in _prose_lines(page.read_text(encoding="utf-8")):
        for pattern in (_MD_LINK, _HTML_LINK):
            for target in pattern.findall(line):
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")):
                    continue  # a URL (http:, mailto:), an anchor on the same page, or an absolute path
                found.append((number, target))
    return found


def broken_links(pages: list[Path]) -> list[str]:
    broken = []
    for page in pages:
        for number, target in relative_links(page):
            path = target.split("#", 1)[0].split("?", 1)[0]
            if not path:
                continue
            resolved = (page.parent / path).resolve()
            if not resolved.is_relative_to(REPO):
                continue  # outside the repository (../shared/DESIGN.md): the workspace's, not ours to check
            if not resolved.exists():
                broken.append(f"{page.relative_to(REPO)}:{number}: {target}")
    return broken


def test_the_readme_is_at_most_200_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move the detail to a docs/ page")


def test_every_relative_link_in_readme_and_docs_resolves():
    assert broken_links(_pages()) == []


def test_the_link_check_catches_a_missing_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md#x) <img src=\"gone.png\"> [web](https://x.org)\n"
                    "`[code](not-a-link.md)`\n```\n[fenced](nope.md)\n```\n")
    assert relative_links(page) == [(1, "page.md"), (1, "missing.md#x"), (1, "gone.png")]


def test_docs_index_lists_every_docs_page():
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {(REPO / "docs" / target.split("#", 1)[0]).resolve()
              for _, target in relative_links(REPO / "docs" / "README.md")}
    pages = {p.resolve() for p in (REPO / "docs").rglob("*.md")} - {(REPO / "docs" / "README.md").resolve()}
    missing = sorted(str(p.relative_to(REPO)) for p in pages - linked)
    assert index and missing == [], f"docs/README.md does not list: {missing}"
