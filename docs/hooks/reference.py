"""The reference pages' generated parts, made from the code at every build (a mkdocs hook).

A reference page holds hand-written prose and, on a line of its own, a marker such as
``<!-- reference: settings -->``, which this hook replaces with Markdown built from the code:

- ``settings``: every field of ``parallel_scheduler.settings.Settings`` with its type, default,
  valid values, command-line option, environment variable, Celery key and description;
- ``cli``: every command and option of the argparse parser (``parallel_scheduler.cli``);
- ``metrics``: every Prometheus metric a scheduler process serves, with its type and labels;
- ``errors``: the exception tree under ``ParallelSchedulerError``, with the docstrings;
- ``api MODULE``: a mkdocstrings ``::: MODULE`` directive listing the module's ``__all__``;
- ``contract``: mkdocstrings directives for ``storage_adapters.base`` and every module of
  ``storage_adapters/contract/``.

Nothing is copied by hand, so nothing can go stale; what the code does not say fails the build
with a message (a setting without a description, a marker nobody knows, a marker left out).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import re
import tempfile
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- reference: (?P<kind>[a-z-]+)(?: (?P<arg>[\w.]+))? -->[ \t]*$", re.M)


def _cell(text: str) -> str:
    """``text`` fit for one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


# -- settings ----------------------------------------------------------------------------------


def _docstring_paragraphs(doc: str) -> dict[str, str]:
    """``Settings``'s docstring paragraphs that begin with a field name in double backticks."""
    found: dict[str, str] = {}
    for paragraph in inspect.cleandoc(doc).split("\n\n"):
        match = re.match(r"``(\w+)``", paragraph)
        if match and match.group(1) not in found:
            found[match.group(1)] = " ".join(paragraph.split())
    return found


def _param_fields(doc: str) -> dict[str, str]:
    """``Settings``'s ``:param name: text`` fields, continuation lines joined; a field that only
    says "see above" defers to the paragraph and is left out."""
    found: dict[str, str] = {}
    fields = re.finditer(r"^:param (\w+): (.*(?:\n {2,}.*)*)", inspect.cleandoc(doc), re.M)
    for match in fields:
        text = " ".join(match.group(2).split())
        if not text.lower().startswith("see above"):
            found[match.group(1)] = text
    return found


def _comment_descriptions(source: str, class_name: str) -> dict[str, str]:
    """``#:`` comment lines right above a field of ``class_name`` (Sphinx's attribute docs)."""
    found: dict[str, str] = {}
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                comments: list[str] = []
                row = item.lineno - 2
                while row >= 0 and lines[row].strip().startswith("#:"):
                    comments.insert(0, lines[row].strip()[2:].strip())
                    row -= 1
                if comments:
                    found[item.target.id] = " ".join(comments)
    return found


def _valid_values(source: str, namespace: dict[str, Any]) -> dict[str, str]:
    """What ``Settings.__post_init__`` accepts, read from its ``_check_int``/``_check_seconds``
    calls: ``{"batch_size": "1 to 100000"}``."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.FunctionDef) and node.name == "__post_init__"):
            continue
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            if call.func.id not in ("_check_int", "_check_seconds") or len(call.args) != 4:
                continue
            name = call.args[0]
            if not isinstance(name, ast.Constant) or not isinstance(name.value, str):
                continue
            low, high = (eval(compile(ast.Expression(a), "<settings>", "eval"), namespace)
                         for a in call.args[2:])  # fmt: skip
            unit = " seconds" if call.func.id == "_check_seconds" else ""
            found[name.value] = f"{low:g} to {high:g}{unit}"
    return found


def _setting_options() -> dict[str, list[str]]:
    """Per setting, where the command line takes it: ``["parallel-scheduler --prefix TEXT"]``.
    An option belongs to a setting when ``add_setting_options`` made it (its help names the
    setting's environment variable)."""
    from parallel_scheduler.cli import build_parser
    from parallel_scheduler.settings import SETTING_KINDS

    kinds = {kind.name: kind for kind in SETTING_KINDS}
    where: dict[str, list[str]] = {name: [] for name in kinds}
    for command, parser in _commands(build_parser()):
        for action in parser._actions:
            kind = kinds.get(action.dest)
            if kind is None or action.help in (None, argparse.SUPPRESS):
                continue
            if kind.env_var not in str(action.help):
                continue
            value = (
                ""
                if action.nargs == 0
                else " " + str(action.metavar or "{" + ",".join(action.choices or ()) + "}")
            )
            shown = f"{command} {' / '.join(action.option_strings)}{value}"
            where[kind.name].append(
                shown + (" COMMAND" if parser.prog == command and " " not in command else "")
            )
    return where


def settings_markdown() -> str:
    import parallel_scheduler.settings as settings_module
    from parallel_scheduler.settings import SETTING_KINDS, Settings

    source = inspect.getsource(settings_module)
    described = _param_fields(Settings.__doc__ or "")
    described.update(_docstring_paragraphs(Settings.__doc__ or ""))
    described.update(_comment_descriptions(source, "Settings"))
    names = {kind.name for kind in SETTING_KINDS}
    missing = sorted(names - set(described))
    if missing:
        raise PluginError(
            "reference: setting(s) without a description: "
            f"{', '.join(missing)}. Describe each in Settings' docstring (a paragraph beginning "
            "with ``name``) or in a `#:` comment above the field in parallel_scheduler/settings.py."
        )
    ranges = _valid_values(source, vars(settings_module))
    options = _setting_options()
    out = ["| Setting | Default | Environment variable |", "| --- | --- | --- |"]
    out.extend(
        f"| [`{kind.name}`](#{kind.name}) | {_cell(_code(repr(kind.default)))} | `{kind.env_var}` |"
        for kind in SETTING_KINDS
    )
    for kind in SETTING_KINDS:
        if not options[kind.name]:
            raise PluginError(f"reference: setting {kind.name} has no command-line option")
        value = kind.label + (" or unset (`None`)" if kind.optional else "")
        if kind.name in ranges:
            value += f"; {ranges[kind.name]}"
        out += [
            "",
            f"## `{kind.name}` {{#{kind.name}}}",
            "",
            "| | |",
            "| --- | --- |",
            f"| Value | {_cell(value)} |",
            f"| Default | {_cell(_code(repr(kind.default)))} |",
            f"| Command line | {_cell(', '.join(_code(o) for o in options[kind.name]))} |",
            f"| Environment variable | `{kind.env_var}` |",
            f"| Celery configuration | `app.conf.{kind.celery_key}` |",
        ]
        if kind.name in described:
            text = re.sub(rf"^``{kind.name}``:\s*", "", described[kind.name])
            out += ["", text[:1].upper() + text[1:]]
    return "\n".join(out)


# -- command line ------------------------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(command line, parser)`` for the parser and every subcommand, depth first."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)


def _subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    helps: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest] = choice.help or ""
    return helps


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=90)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _default(action: argparse.Action, setting: bool) -> str:
    if setting:
        return "the setting's"
    if isinstance(action, argparse._StoreTrueAction):
        return "off"
    if action.default in (None, argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return _code(str(action.default))


def cli_markdown() -> str:
    from parallel_scheduler.cli import build_parser
    from parallel_scheduler.settings import SETTING_KINDS

    kinds = {kind.name: kind for kind in SETTING_KINDS}
    root = build_parser()
    helps: dict[str, str] = {}
    out: list[str] = []
    for command, parser in _commands(root):
        helps.update({f"{command} {name}": text for name, text in _subcommand_help(parser).items()})
        anchor = "-".join(command.split()[1:]) or "global-options"
        out += ["", f"## `{command}` {{#{anchor}}}", ""]
        if helps.get(command):
            out += [helps[command][:1].upper() + helps[command][1:] + ".", ""]
        if parser.description:
            out += [parser.description, ""]
        out += ["```text", _usage(parser), "```", ""]
        formatter = parser._get_formatter()
        rows = []
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            kind = kinds.get(action.dest)
            setting = kind is not None and kind.env_var in str(action.help)
            if not action.option_strings:  # a positional argument
                shown = _code(formatter._format_args(action, action.dest))
            elif action.nargs == 0:
                shown = _code(", ".join(action.option_strings))
            else:
                value = formatter._format_args(action, action.dest.upper())
                shown = _code(f"{', '.join(action.option_strings)} {value}")
            help_text = formatter._expand_help(action) if action.help else ""
            if setting:
                help_text += f" ([setting](settings.md#{action.dest}))"
            rows.append(f"| {_cell(shown)} | {_cell(_default(action, setting))} | "
                        f"{_cell(help_text)} |")  # fmt: skip
        if rows:
            out += ["| Option | Default | Description |", "| --- | --- | --- |", *rows]
    return "\n".join([*out, "", _celery_command_markdown()]).strip()


def _celery_command_markdown() -> str:
    """The ``celery -A proj parallel-scheduler`` command (click, the ``celery.commands`` entry
    point)."""
    import click

    from parallel_scheduler.celery.command import parallel_scheduler

    out = [
        "## `celery -A proj parallel-scheduler` {#celery-command}",
        "",
        inspect.cleandoc(parallel_scheduler.help or "").split("\n\n")[0],
        "",
        "| Option | Default | Description |",
        "| --- | --- | --- |",
    ]
    for param in parallel_scheduler.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        if param.is_flag:
            default = "on" if param.default is True else "off"
        else:
            default = _code(str(param.default))
        out.append(
            f"| {_cell(', '.join(_code(o) for o in param.opts))} | {_cell(default)} | "
            f"{_cell(param.help or '')} |"
        )
    return "\n".join(out)


# -- metrics -----------------------------------------------------------------------------------


def metrics_markdown() -> str:
    """The scheduler process's metrics, from the registry it serves."""
    import storage_adapters
    from parallel_scheduler.process.metrics import MetricsServer

    with tempfile.TemporaryDirectory() as folder:
        store = storage_adapters.from_url(f"sqlite:///{folder}/metrics.db")
        try:
            store.setup()
            families = list(MetricsServer(store, "127.0.0.1", 0).registry.collect())
        finally:
            store.close()
    return _metrics_table(families)


def storage_metrics_markdown() -> str:
    """The storage-side metrics the dashboard's ``/metrics`` and the exporter serve, from the
    registry they serve."""
    from parallel_scheduler import Client
    from parallel_scheduler.process.storage_metrics import storage_registry

    with (
        tempfile.TemporaryDirectory() as folder,
        Client(storage_url=f"sqlite:///{folder}/metrics.db") as client,
    ):
        client.setup()
        families = list(storage_registry(client).collect())
    return _metrics_table(families)


def _metrics_table(families: list[Any]) -> str:
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    out = ["| Metric | Type | Labels | Description |", "| --- | --- | --- | --- |"]
    details: list[str] = []
    for family in sorted(families, key=lambda f: f.name):
        exposed = [family.name + s for s in suffixes.get(family.type, ("",))]
        labels: dict[str, set[str]] = {}
        buckets: set[float] = set()
        for sample in family.samples:
            for label, value in sample.labels.items():
                if label == "le":
                    buckets.add(float(value))
                else:
                    labels.setdefault(label, set()).add(value)
        label_text = ", ".join(
            f"`{label}` ({', '.join(_code(v) for v in sorted(values))})"
            for label, values in sorted(labels.items())
        )
        out.append(
            f"| {_cell('<br>'.join(_code(name) for name in exposed))} | {family.type} | "
            f"{_cell(label_text)} | {_cell(family.documentation)} |"
        )
        if buckets:
            shown = ", ".join(f"{b:g}" for b in sorted(buckets) if b != float("inf"))
            details.append(f"- `{family.name}`: {shown} seconds, and `+Inf`")
    if details:
        out += ["", "Histogram buckets (`le`):", "", *details]
    return "\n".join(out)


# -- errors ------------------------------------------------------------------------------------


def _configure_django() -> None:
    """The Django app's modules (its model, admin, migrations) import only in a configured
    Django: a minimal one, so their exceptions are listed too."""
    try:
        import django
        from django.conf import settings
    except ImportError:
        return
    if not settings.configured:
        apps = ["admin", "auth", "contenttypes", "sessions", "messages"]
        settings.configure(
            INSTALLED_APPS=[
                *(f"django.contrib.{app}" for app in apps),
                "parallel_scheduler.contrib.django",
            ],
            USE_TZ=True,
        )
        django.setup()


def _import_everything(package: str) -> None:
    """Import every module of ``package`` so every exception class exists (not ``__main__``s,
    which run a command)."""
    _configure_django()
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if module.name.rsplit(".", 1)[-1] != "__main__":
            importlib.import_module(module.name)


def _public_path(cls: type) -> str:
    import parallel_scheduler
    import storage_adapters

    for package in (parallel_scheduler, storage_adapters):
        exported = cls.__name__ in getattr(package, "__all__", ())
        if exported and getattr(package, cls.__name__) is cls:
            return f"{package.__name__}.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def errors_markdown() -> str:
    from storage_adapters.errors import ParallelSchedulerError

    _import_everything("storage_adapters")
    _import_everything("parallel_scheduler")
    ours = ("parallel_scheduler", "storage_adapters")
    tree: list[str] = []
    sections: list[str] = []

    def visit(cls: type, depth: int) -> None:
        path = _public_path(cls)
        anchor = cls.__name__
        tree.append(f"{'    ' * depth}- [`{cls.__name__}`](#{anchor})")
        others = [b for b in cls.__bases__ if not b.__module__.startswith(ours)]
        builtins = "`, `".join(b.__name__ for b in others if b is not Exception)
        also = f" Also a built-in `{builtins}`." if builtins else ""
        parents = [b.__name__ for b in cls.__bases__ if b.__module__.startswith(ours)]
        under = f"Subclass of {', '.join(f'[`{p}`](#{p})' for p in parents)}." if parents else ""
        doc = inspect.cleandoc(cls.__doc__ or "")
        if not doc:
            raise PluginError(f"reference: exception {path} has no docstring")
        sections.extend(["", f"## `{cls.__name__}` {{#{anchor}}}", "", f"`{path}`", ""])
        if under or also:
            sections.extend([(under + also).strip(), ""])
        sections.append(doc)
        children = {c for c in cls.__subclasses__() if _first_ours(c) == [cls]}
        for child in sorted(children, key=lambda c: c.__name__):
            visit(child, depth + 1)

    def _first_ours(cls: type) -> list[type]:
        return [b for b in cls.__bases__ if b.__module__.startswith(ours)][:1]

    visit(ParallelSchedulerError, 0)
    return "\n".join(["The tree (a class appears under its first parent of ours):", "", *tree,
                      *sections])  # fmt: skip


# -- mkdocstrings directives -------------------------------------------------------------------


def _directive(module: ModuleType, members: list[str], heading_level: int = 2) -> str:
    listed = ", ".join(f'"{m}"' for m in members)
    return (
        f"::: {module.__name__}\n"
        "    options:\n"
        f"      members: [{listed}]\n"
        f"      heading_level: {heading_level}\n"
    )


def api_markdown(name: str) -> str:
    module = importlib.import_module(name)
    members = list(getattr(module, "__all__", []))
    if not members:
        raise PluginError(f"reference: {name} has no __all__ to document")
    return _directive(module, members)


def contract_markdown() -> str:
    import storage_adapters.base as base
    import storage_adapters.contract as contract

    own = [n for n in base.__all__ if getattr(base, n).__module__ == base.__name__]
    parts = [_directive(base, own)]
    for info in sorted(pkgutil.iter_modules(contract.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{contract.__name__}.{info.name}")
        parts.append(_directive(module, list(getattr(module, "__all__", []))))
    return "\n".join(parts)


GENERATORS: dict[str, Callable[..., str]] = {
    "settings": settings_markdown,
    "cli": cli_markdown,
    "metrics": metrics_markdown,
    "storage-metrics": storage_metrics_markdown,
    "errors": errors_markdown,
    "api": api_markdown,
    "contract": contract_markdown,
}
#: Which page must carry which marker: a marker dropped from a page fails the build too.
EXPECTED = {
    "reference/settings.md": {"settings"},
    "reference/cli.md": {"cli"},
    "reference/metrics.md": {"metrics", "storage-metrics"},
    "reference/errors.md": {"errors"},
    "reference/api.md": {"api"},
    "reference/storage-contract.md": {"contract"},
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: replace every marker of the page with its generated Markdown."""
    src = page.file.src_uri
    found: set[str] = set()

    def generate(match: re.Match[str]) -> str:
        kind, arg = match.group("kind"), match.group("arg")
        generator = GENERATORS.get(kind)
        if generator is None:
            raise PluginError(f"reference: {src}: unknown marker {match.group(0)!r}")
        found.add(kind)
        try:
            return generator(arg) if arg else generator()
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"reference: {src}: {kind} failed: {exc!r}") from exc

    markdown = MARKER.sub(generate, markdown)
    missing = EXPECTED.get(src, set()) - found
    if missing:
        raise PluginError(f"reference: {src} lost its marker(s) for {', '.join(sorted(missing))}")
    return markdown
