"""The examples runner's own rules, on small Markdown strings: which blocks run and how, what
fails collection, how the server URLs are rewritten, and what a failing example reports.

The running tests start real processes (an interpreter, bash) in ``tmp_path`` and need no
server.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.example_runner import ExampleFailure, example_environment, run_page
from tests.docs.example_servers import PageServers, stray_server_urls, uses
from tests.docs.markdown_examples import ExampleSyntaxError, extras_named, parse_page

PAGE = """\
# A page

```python title="proj/settings.py"
VALUE = 41
```

```python
from proj.settings import VALUE
answer = VALUE + 1
```

<!-- example: background -->
```bash
sleep 300
```

Some prose.

<!-- example: skip needs a Kubernetes cluster -->
```bash
kubectl apply -f deploy.yaml
```

```bash
pip install "parallel-scheduler[redis,postgresql]"
```

```console
$ parallel-scheduler status
```

1. A step in a list:

    ````markdown
    ```python
    this is shown inside a Markdown example, never run
    ```
    ````

    ```python
    assert answer == 42
    ```

~~~yaml
key: value
~~~

```
no language at all
```
"""


def test_blocks_are_classified_by_info_string_and_marker() -> None:
    page = parse_page(PAGE, "docs/page.md")
    shown = [(b.line, b.language, b.kind, b.title, b.reason) for b in page.blocks]
    assert shown == [
        (3, "python", "write", "proj/settings.py", None),
        (7, "python", "python", None, None),
        (13, "bash", "background", None, None),
        (20, "bash", "skip", None, "needs a Kubernetes cluster"),
        (24, "bash", "bash", None, None),
        (28, "console", "show", None, None),
        (34, "markdown", "show", None, None),
        (40, "python", "python", None, None),
        (44, "yaml", "show", None, None),
        (48, "", "show", None, None),
    ]
    assert [b.line for b in page.runnable] == [7, 13, 24, 40]
    assert page.skip_reasons == ("needs a Kubernetes cluster",)
    assert page.blocks[7].text == "assert answer == 42\n"  # the list's indentation is gone
    assert "this is shown" in page.blocks[6].text


@pytest.mark.parametrize(
    ("markdown", "message"),
    [
        ("<!-- example: skip -->\n```bash\nls\n```\n", "needs a reason"),
        ("<!-- example: skip   -->\n```bash\nls\n```\n", "needs a reason"),
        ("<!-- example: later -->\n```bash\nls\n```\n", "unknown example marker"),
        ("<!-- example: background -->\n\n```bash\nls\n```\n", "just before a fenced block"),
        ("<!-- example: background -->\n```python\npass\n```\n", "goes before a ```bash block"),
        ('```text title="/etc/passwd"\nx\n```\n', "relative path inside"),
        ('```text title="../up.txt"\nx\n```\n', "relative path inside"),
        ('```text title="a.txt"\nx\n```\n\n```text title="a.txt"\ny\n```\n', "also written"),
        ("```python\nprint(1)\n", "never closed"),
    ],
)
def test_a_page_breaking_the_conventions_fails_with_its_line(markdown: str, message: str) -> None:
    with pytest.raises(ExampleSyntaxError, match=message) as raised:
        parse_page("# Title\n\n" + markdown, "docs/bad.md")
    assert str(raised.value).startswith("docs/bad.md:")


def test_the_skip_marker_line_is_named() -> None:
    with pytest.raises(ExampleSyntaxError, match=r"^docs/bad.md:5: "):
        parse_page("# T\n\ntext\n\n<!-- example: skip -->\n```bash\nls\n```\n", "docs/bad.md")


def test_extras_named_on_a_page_are_found_for_the_check() -> None:
    text = (
        'pip install "parallel-scheduler[redis, postgresql]"\nand parallel-scheduler[nope]\n'
        "parallel-scheduler[...] or parallel-scheduler[redis,…]\n"
    )
    assert extras_named(text) == [(1, "redis"), (1, "postgresql"), (2, "nope"), (3, "redis")]


def test_only_the_three_example_urls_are_rewritten() -> None:
    servers = PageServers(
        postgresql="postgres@10.0.0.1:5433/docs_examples_1_1",
        redis="redis://10.0.0.1:6380/9",
        rabbitmq="amqp://guest:guest@10.0.0.1:5673/docs_examples_1_1",
    )
    text = (
        'a = "postgresql://postgres@127.0.0.1:5432/test"\n'
        'b = "postgresql+psycopg://postgres@127.0.0.1:5432/test"\n'
        'c = "redis://127.0.0.1:6379/0"\n'
        'd = "amqp://guest:guest@127.0.0.1:5672//"\n'
        'e = "sqlite:///jobs.db"\n'
        'f = "redis://127.0.0.1:6379/01"\n'
    )
    assert servers.rewrite(text) == (
        'a = "postgresql://postgres@10.0.0.1:5433/docs_examples_1_1"\n'
        'b = "postgresql+psycopg://postgres@10.0.0.1:5433/docs_examples_1_1"\n'
        'c = "redis://10.0.0.1:6380/9"\n'
        'd = "amqp://guest:guest@10.0.0.1:5673/docs_examples_1_1"\n'
        'e = "sqlite:///jobs.db"\n'
        'f = "redis://127.0.0.1:6379/01"\n'
    )
    assert uses(text) == {"postgresql", "redis", "rabbitmq"}
    assert stray_server_urls(text) == [(6, "127.0.0.1:6379")]
    assert stray_server_urls("redis://localhost:6379/0\nredis://127.0.0.1:6379/0") == [
        (1, "localhost:6379")
    ]


# -- running -----------------------------------------------------------------------------------


def _run(markdown: str, tmp_path: Path, timeout: float = 60.0) -> Path:
    workdir, logs = tmp_path / "page", tmp_path / "logs"
    workdir.mkdir()
    logs.mkdir()
    page = parse_page(markdown, "docs/run.md")
    run_page(page, workdir, logs, example_environment(), timeout=timeout)
    return workdir


def test_a_page_runs_in_order_in_one_interpreter_and_stops_its_background(
    tmp_path: Path,
) -> None:
    markdown = PAGE.replace("sleep 300", "echo $$ > ../background.pid; exec sleep 300")
    markdown = markdown.replace(
        'pip install "parallel-scheduler[redis,postgresql]"',
        "test -f proj/settings.py && command -v parallel-scheduler > where.txt",
    )
    workdir = _run(markdown, tmp_path)
    assert (workdir / "proj" / "settings.py").read_text() == "VALUE = 41\n"
    where = (workdir / "where.txt").read_text().strip()
    assert Path(where).parent == Path(example_environment()["PATH"].split(os.pathsep)[0])
    pid = int((tmp_path / "background.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the background block's process {pid} outlived its page")


@pytest.mark.parametrize(
    ("markdown", "first", "only_this_block", "named"),
    [
        pytest.param(
            "# T\n\n```python\nprint('before')\n```\n\n"
            "```python\nx = 1\nprint('said')\nraise RuntimeError('boom')\n```\n",
            "docs/run.md:7: ```python block raised an exception",
            lambda message: "said" in message and "before" not in message,
            # the page's own line, and its text
            ['File "docs/run.md", line 10', "raise RuntimeError('boom')", "RuntimeError: boom"],
            id="python",
        ),
        pytest.param(
            "# T\n\n<!-- example: background -->\n```bash\necho serving; sleep 300\n```\n\n"
            "```bash\necho one\nsleep 1\nfalse\necho never\n```\n",
            "docs/run.md:8: ```bash block failed with exit status 1",
            lambda message: (
                "one" in message and "never" not in message.split("--- its output ---")[1]
            ),
            ["--- background block docs/run.md:4 (still running) ---\nserving"],
            id="bash",
        ),
    ],
)
def test_a_failing_block_names_its_page_line_and_output(
    markdown: str,
    first: str,
    only_this_block: Callable[[str], bool],
    named: list[str],
    tmp_path: Path,
) -> None:
    with pytest.raises(ExampleFailure) as failed:
        _run(markdown, tmp_path)
    message = str(failed.value)
    assert message.startswith(first), message
    assert only_this_block(message), message  # this block's output, no other block's
    for words in named:
        assert words in message, message


def test_a_background_block_that_dies_fails_the_page(tmp_path: Path) -> None:
    markdown = (
        "# T\n\n<!-- example: background -->\n```bash\necho no such app; exit 3\n```\n\n"
        "```bash\nsleep 1\n```\n"
    )
    with pytest.raises(ExampleFailure, match=r"^docs/run.md:4: .*exited with status 3"):
        _run(markdown, tmp_path)


def test_a_block_past_its_deadline_fails(tmp_path: Path) -> None:
    markdown = "# T\n\n```python\nimport time\nprint('waiting')\ntime.sleep(60)\n```\n"
    started = time.monotonic()
    with pytest.raises(ExampleFailure, match=r"^docs/run.md:3: ```python block timed out"):
        _run(markdown, tmp_path, timeout=2)
    assert time.monotonic() - started < 30
