"""Which fenced blocks of a documentation page run, and how: the rules of "Examples that cannot
rot", read from the Markdown alone (no process is started here).

Every fenced block is classified by its info string and an optional HTML comment on the line just
before its fence:

- ```` ```python ````: run; a page's python blocks run in order in one interpreter;
- any language with ``title="relative/path"``: written to that file in the page's directory
  before the page's blocks run, not run itself;
- ```` ```bash ````: run with ``bash -euo pipefail`` in the page's directory, in order with the
  python blocks;
- ``<!-- example: background -->`` before a bash block: started in the background, its process
  group stopped when the page ends;
- ``<!-- example: skip REASON -->`` before a block: not run (nor written); the reason is required;
- every other block (``text``, ``console``, ``yaml``, no language, ...) is shown, not run.

A marker without a reason, an unknown marker, a marker not directly before a fence, a background
marker on a block that is not bash, a ``title`` outside the page's directory or written twice is
an ``ExampleSyntaxError`` naming the page and line, raised while the tests are collected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = [
    "Block",
    "ExampleSyntaxError",
    "Page",
    "extras_named",
    "parse_page",
]

#: How a block is treated: run as python, run as bash, started in the background, written to
#: its title's path, skipped (with a reason), or only shown.
KINDS = ("python", "bash", "background", "write", "skip", "show")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^<!--\s*example:(?P<body>.*?)-->$")
_TITLE = re.compile(r"""\btitle=(?:"(?P<double>[^"]*)"|'(?P<single>[^']*)')""")
_EXTRA = re.compile(r"parallel-scheduler\[(?P<extras>[^\]\n]*)\]")


class ExampleSyntaxError(ValueError):
    """A page breaks the examples' conventions; the message starts with ``page:line:``."""


@dataclass(frozen=True)
class Block:
    page: str  # the page's path from the repository root, as shown in messages
    line: int  # the line of the opening fence, counted from 1
    language: str  # the info string's first word, "" for none
    kind: str  # one of KINDS
    text: str  # the content, without the fences and the fence's indentation
    title: str | None = None  # the relative path of a title= block
    reason: str | None = None  # why a skipped block is not run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def first_content_line(self) -> int:
        return self.line + 1


@dataclass(frozen=True)
class Page:
    path: str
    text: str
    blocks: tuple[Block, ...]

    @property
    def runnable(self) -> tuple[Block, ...]:
        """The blocks that run, in page order."""
        return tuple(b for b in self.blocks if b.kind in ("python", "bash", "background"))

    @property
    def written(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.kind == "write")

    @property
    def skip_reasons(self) -> tuple[str, ...]:
        return tuple(b.reason or "" for b in self.blocks if b.kind == "skip")


def _marker(line: str, where: str) -> tuple[str, str | None] | None:
    """``("background", None)`` or ``("skip", reason)`` for a marker line, ``None`` otherwise."""
    match = _MARKER.match(line.strip())
    if match is None:
        return None
    words = match.group("body").strip().split(None, 1)
    directive = words[0] if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    if directive == "background":
        if rest:
            raise ExampleSyntaxError(f"{where}: `example: background` takes no words ({rest!r})")
        return "background", None
    if directive == "skip":
        if not rest:
            raise ExampleSyntaxError(
                f"{where}: `<!-- example: skip -->` needs a reason: "
                "`<!-- example: skip REASON -->` (say why this block cannot run here)"
            )
        return "skip", rest
    raise ExampleSyntaxError(
        f"{where}: unknown example marker {line.strip()!r}: the markers are "
        "`<!-- example: background -->` and `<!-- example: skip REASON -->`"
    )


def _title(info: str, where: str) -> str | None:
    match = _TITLE.search(info)
    if match is None:
        return None
    title = match.group("double") if match.group("double") is not None else match.group("single")
    path = PurePosixPath(title)
    if not title or path.is_absolute() or ".." in path.parts or "\\" in title:
        raise ExampleSyntaxError(
            f"{where}: title={title!r} must be a relative path inside the page's directory"
        )
    return str(path)


def _dedent(line: str, indent: str) -> str:
    """``line`` without the opening fence's indentation (as much of it as it has)."""
    cut = 0
    while cut < len(indent) and cut < len(line) and line[cut] in " \t":
        cut += 1
    return line[cut:]


def _classify(language: str, title: str | None, marker: tuple[str, str | None] | None,
              where: str) -> tuple[str, str | None]:  # fmt: skip
    if marker is not None and marker[0] == "skip":
        return "skip", marker[1]
    if marker is not None:  # background
        if language != "bash" or title is not None:
            raise ExampleSyntaxError(
                f"{where}: `<!-- example: background -->` goes before a ```bash block "
                f"(this one is ```{language}{' with a title' if title else ''})"
            )
        return "background", None
    if title is not None:
        return "write", None
    if language in ("python", "bash"):
        return language, None
    return "show", None


def parse_page(text: str, page: str) -> Page:
    """Every fenced block of ``text`` (the page at ``page``), classified."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        number = index + 1
        opening = _FENCE.match(line)
        marker = _marker(line, f"{page}:{number}")
        if marker is not None:
            following = _FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
            if following is None:
                raise ExampleSyntaxError(
                    f"{page}:{number}: an example marker must stand on the line just before a "
                    "fenced block's opening fence"
                )
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), opening.group("indent")
        info = opening.group("info").strip()
        if fence[0] == "`" and "`" in info:  # an inline code span such as ```x```, not a fence
            index += 1
            continue
        where = f"{page}:{number}"
        language = info.split(None, 1)[0].lstrip("{.").rstrip("}") if info else ""
        title = _title(info, where)
        before = _marker(lines[index - 1], where) if index > 0 else None
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise ExampleSyntaxError(f"{where}: the fenced block opened here is never closed")
        content = "\n".join(_dedent(body, indent) for body in lines[index + 1 : end])
        kind, reason = _classify(language, title, before, where)
        blocks.append(Block(page, number, language, kind, content + "\n", title, reason))
        index = end + 1
    seen: dict[str, Block] = {}
    for block in blocks:
        if block.kind != "write" or block.title is None:
            continue
        if block.title in seen:
            raise ExampleSyntaxError(
                f"{block.where}: title={block.title!r} is also written at line "
                f"{seen[block.title].line}: the files are written before the page runs, so only "
                "one version can exist; give each version its own path"
            )
        seen[block.title] = block
    return Page(page, text, tuple(blocks))


def extras_named(text: str) -> list[tuple[int, str]]:
    """Every ``parallel-scheduler[extra,...]`` extra named in ``text``: ``(line, extra)``; an
    ellipsis (``...``, ``…``) stands for "your extras" and names none."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in _EXTRA.finditer(line):
            extras = (extra.strip() for extra in match.group("extras").split(","))
            found.extend((number, extra) for extra in extras if extra not in ("...", "…"))
    return found
