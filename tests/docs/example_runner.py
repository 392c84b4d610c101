"""Running one documentation page's examples (``markdown_examples`` says which blocks run).

The page's ``title=`` blocks are written into its directory first; then its python and bash
blocks run in page order: the python blocks in ONE interpreter (the namespace carries over, and
a traceback names the page and its line), each bash block with ``bash -euo pipefail``, the
background ones started and left running. When the page ends, every process group it started is
stopped (SIGTERM, then SIGKILL). A block that fails, or a background block that exits with an
error on its own, fails the page with ``ExampleFailure``: the block's page and line, its output,
and the tail of every background block's output.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devtools.processes import clean_environment
from tests.docs.markdown_examples import Block, Page

__all__ = ["BLOCK_TIMEOUT", "ExampleFailure", "example_environment", "run_page"]

#: Seconds one block may run (a background block: until the page ends).
BLOCK_TIMEOUT = 180.0
#: Seconds a stopped process group gets between SIGTERM and SIGKILL.
STOP_GRACE = 10.0
#: Lines of a block's output shown when it fails (the end of it).
SHOWN_LINES = 120

# The interpreter the page's python blocks share: it reads one JSON request per line from the
# file descriptor in argv[1], runs it in one namespace, and answers {"ok": ...} on argv[2].
# Each block is compiled under the page's path with its lines where they are on the page, and
# the page's text is in linecache, so a traceback shows the page's own lines.
_INTERPRETER = """
import json, linecache, os, sys, traceback
requests = os.fdopen(int(sys.argv[1]), "r")
answers = os.fdopen(int(sys.argv[2]), "w")
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
for request in requests:
    request = json.loads(request)
    name = request["filename"]
    if "page" in request:
        lines = request["page"].splitlines(True)
        linecache.cache[name] = (len(request["page"]), None, lines, name)
        continue
    ok = True
    try:
        exec(compile("\\n" * (request["line"] - 1) + request["code"], name, "exec"), namespace)
    except SystemExit as exc:
        ok = exc.code in (None, 0)
        if not ok:
            print(f"SystemExit: {exc.code!r}", file=sys.stderr)
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        ok = False
    sys.stdout.flush()
    sys.stderr.flush()
    answers.write(json.dumps({"ok": ok}) + "\\n")
    answers.flush()
"""


class ExampleFailure(AssertionError):
    """An example of a page failed; the message says where, and what it printed."""


def example_environment() -> dict[str, str]:
    """The environment examples run in: this one without ``PARALLEL_SCHEDULER_*`` variables
    (a page must say what it sets), with this virtualenv's ``bin`` first on ``PATH``, so
    ``parallel-scheduler`` and ``celery`` are the ones under test."""
    bin_dir = str(Path(sys.executable).parent)
    return clean_environment(
        PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]), PYTHONUNBUFFERED="1"
    )


def _tail(path: Path, start: int = 0) -> str:
    try:
        with path.open("rb") as log:
            log.seek(start)
            text = log.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    lines = text.splitlines()
    if len(lines) > SHOWN_LINES:
        lines = [f"[... {len(lines) - SHOWN_LINES} lines before ...]", *lines[-SHOWN_LINES:]]
    return "\n".join(lines)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process``'s process group (it leads one of its own, ``start_new_session``):
    SIGTERM, then SIGKILL for whatever is left of the group after ``STOP_GRACE`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while True:
        process.poll()  # reap the leader, so only live members keep the group
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_GRACE)


@dataclass
class _Background:
    block: Block
    process: subprocess.Popen[bytes]
    log: Path


class _PageRun:
    def __init__(self, page: Page, workdir: Path, logs: Path, env: dict[str, str],
                 rewrite: Callable[[str], str], timeout: float) -> None:  # fmt: skip
        self.page, self.workdir, self.logs, self.env = page, workdir, logs, env
        self.rewrite, self.timeout = rewrite, timeout
        self.background: list[_Background] = []
        self.interpreter: subprocess.Popen[bytes] | None = None
        self.requests: int | None = None
        self.answers: int | None = None
        self.python_log = logs / "python.log"

    # -- failing -----------------------------------------------------------------------------

    def fail(self, block: Block, what: str, output: str) -> ExampleFailure:
        parts = [
            f"{block.where}: ```{block.language} block {what}",
            "--- the block ---",
            block.text.rstrip(),
            "--- its output ---",
            output.rstrip() or "(none)",
        ]
        for running in self.background:
            state = running.process.poll()
            shown = "still running" if state is None else f"exited with status {state}"
            parts += [f"--- background block {running.block.where} ({shown}) ---",
                      _tail(running.log).rstrip() or "(no output)"]  # fmt: skip
        return ExampleFailure("\n".join(parts))

    def check_background(self, after: Block) -> None:
        """A background block that has exited with an error fails the page."""
        for running in self.background:
            status = running.process.poll()
            if status not in (None, 0):
                raise self.fail(
                    running.block,
                    f"(background) exited with status {status} (noticed after {after.where})",
                    _tail(running.log),
                )

    # -- the blocks --------------------------------------------------------------------------

    def write_files(self) -> None:
        for block in self.page.written:
            assert block.title is not None
            target = self.workdir / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.rewrite(block.text))

    def bash(self, block: Block, number: int) -> None:
        log = self.logs / f"block-{number}-line-{block.line}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", self.rewrite(block.text)],
                cwd=self.workdir, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        if block.kind == "background":
            self.background.append(_Background(block, process, log))
            return
        try:
            status = process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _stop_group(process)
            raise self.fail(block, f"timed out after {self.timeout:g} s", _tail(log)) from None
        _stop_group(process)  # whatever it left running in its group
        if status != 0:
            raise self.fail(block, f"failed with exit status {status}", _tail(log))

    def _start_interpreter(self) -> None:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        with self.python_log.open("wb") as out:
            self.interpreter = subprocess.Popen(
                [sys.executable, "-c", _INTERPRETER, str(requests_read), str(answers_write)],
                cwd=self.workdir, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, pass_fds=(requests_read, answers_write),
                start_new_session=True,
            )  # fmt: skip
        os.close(requests_read)
        os.close(answers_write)
        self.requests, self.answers = requests_write, answers_read
        self._send({"filename": self.page.path, "page": self.page.text})

    def _send(self, request: dict[str, object]) -> None:
        assert self.requests is not None
        os.write(self.requests, (json.dumps(request) + "\n").encode())

    def python(self, block: Block) -> None:
        if self.interpreter is None:
            self._start_interpreter()
        assert self.answers is not None and self.interpreter is not None
        start = self.python_log.stat().st_size
        code = self.rewrite(block.text)
        try:
            self._send({"filename": self.page.path, "line": block.first_content_line, "code": code})
        except BrokenPipeError:
            raise self.fail(block, "could not run: the interpreter has exited",
                            _tail(self.python_log)) from None  # fmt: skip
        ready, _, _ = select.select([self.answers], [], [], self.timeout)
        if not ready:
            _stop_group(self.interpreter)
            raise self.fail(block, f"timed out after {self.timeout:g} s",
                            _tail(self.python_log, start))  # fmt: skip
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = os.read(self.answers, 4096)
            if not chunk:
                break
            answer += chunk
        output = _tail(self.python_log, start)
        if not answer:
            status = self.interpreter.wait(timeout=STOP_GRACE)
            raise self.fail(block, f"ended the interpreter (exit status {status})", output)
        if not json.loads(answer)["ok"]:
            raise self.fail(block, "raised an exception", output)

    def close(self) -> None:
        if self.requests is not None:
            os.close(self.requests)  # the interpreter reads EOF and exits
        if self.interpreter is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.interpreter.wait(timeout=STOP_GRACE)
            _stop_group(self.interpreter)
        if self.answers is not None:
            os.close(self.answers)
        for running in reversed(self.background):
            _stop_group(running.process)


def run_page(page: Page, workdir: Path, logs: Path, env: dict[str, str],
             rewrite: Callable[[str], str] = lambda text: text,
             timeout: float = BLOCK_TIMEOUT) -> None:  # fmt: skip
    """Run ``page``'s examples in ``workdir`` (their logs in ``logs``); raises
    ``ExampleFailure`` for the first block that fails."""
    run = _PageRun(page, workdir, logs, env, rewrite, timeout)
    try:
        run.write_files()
        for number, block in enumerate(page.runnable, 1):
            if block.kind == "python":
                run.python(block)
            else:
                run.bash(block, number)
            run.check_background(block)
    finally:
        run.close()
