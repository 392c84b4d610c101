"""The profile's options: parsed and checked up front, so a bad one costs no sweep.

Output files are never overwritten: a profile is a record, and silently replacing yesterday's
figures with today's is how comparisons go wrong. Both paths are checked before anything runs.
"""

from __future__ import annotations

import argparse
import importlib.util
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from parallel_scheduler.profiling.errors import ProfileError
from parallel_scheduler.settings import RELEASE_MODES, ReleaseMode, Settings

__all__ = ["DEFAULT_BATCH_SIZES", "DEFAULT_PARALLELISM", "ProfileOptions", "add_arguments"]

DEFAULT_BATCH_SIZES = (100, 1000, 5000)
DEFAULT_PARALLELISM = (1, 2, 3, 5, 10, 20, 50, 100)


def _int_list(raw: str) -> tuple[int, ...]:
    try:
        values = sorted({int(part) for part in raw.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{raw!r}: expected integers separated by commas"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return tuple(values)


def _positive_ms(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of milliseconds") from None
    if not 0 < value <= 10_000:
        raise argparse.ArgumentTypeError(f"{raw!r} must be more than 0 and at most 10000 ms")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``profile`` subcommand's options (``cli.py`` calls this on its subparser)."""
    parser.add_argument(
        "--storage-url",
        dest="profile_storage_url",
        metavar="URL",
        help="postgresql://… or redis://… (default: SQLite in a temporary directory)",
    )
    parser.add_argument(
        "--broker",
        default="none",
        metavar="none|URL",
        help="none: an in-process counting dispatcher (scheduler + storage alone); "
        "or a broker URL (amqp://…, redis://…) sent to through Celery on a queue of its own",
    )
    parser.add_argument("--release-mode", choices=RELEASE_MODES, default="per_job")
    parser.add_argument(
        "--batch-sizes", type=_int_list, default=DEFAULT_BATCH_SIZES, metavar="N,N,…"
    )
    parser.add_argument(
        "--parallelism", type=_int_list, default=DEFAULT_PARALLELISM, metavar="P,P,…"
    )
    parser.add_argument("--repetitions", type=int, default=3, metavar="N")
    parser.add_argument("--warmup", type=int, default=1, metavar="N", help="unrecorded passes")
    parser.add_argument(
        "--latency-ms",
        type=_positive_ms,
        metavar="MS",
        help="delay each direction between scheduler and database by MS, through a local proxy",
    )
    parser.add_argument("--out", type=Path, metavar="FILE.json", help="never overwritten")
    parser.add_argument("--png", type=Path, metavar="FILE.png", help="never overwritten")
    parser.add_argument("--no-png", action="store_true", help="skip the plot")
    parser.add_argument("--seed", type=int, default=0, help="job ids and payloads derive from it")


@dataclass(frozen=True)
class ProfileOptions:
    """One profile run. ``storage_url`` ``None``: SQLite in a temporary directory."""

    storage_url: str | None = None
    broker: str = "none"
    release_mode: ReleaseMode = "per_job"
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    parallelism: tuple[int, ...] = DEFAULT_PARALLELISM
    repetitions: int = 3
    warmup: int = 1
    latency_ms: float | None = None
    out: Path = field(default_factory=lambda: Path(f"profile-{_stamp()}.json"))
    png: Path | None = None
    seed: int = 0

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> ProfileOptions:
        out = ns.out or Path(f"profile-{_stamp()}.json")
        png = None if ns.no_png else (ns.png or out.with_suffix(".png"))
        return cls(
            storage_url=ns.profile_storage_url or ns.storage_url,
            broker=ns.broker,
            release_mode=ns.release_mode,
            batch_sizes=tuple(ns.batch_sizes),
            parallelism=tuple(ns.parallelism),
            repetitions=ns.repetitions,
            warmup=ns.warmup,
            latency_ms=ns.latency_ms,
            out=out,
            png=png,
            seed=ns.seed,
        )

    @property
    def uses_broker(self) -> bool:
        return self.broker.strip().lower() != "none"

    def check(self) -> None:
        """Refuse, before anything runs, what would fail later or overwrite a file."""
        if self.repetitions < 1 or self.warmup < 0:
            raise ProfileError("--repetitions must be >= 1 and --warmup >= 0")
        for size in self.batch_sizes:
            Settings(batch_size=size)  # the scheduler's own limits, with its own messages
        for degree in self.parallelism:
            Settings(max_degree_of_parallelism=degree)
        outputs = [self.out] if self.png is None else [self.out, self.png]
        if self.png is not None and self.png.resolve() == self.out.resolve():
            raise ProfileError("--out and --png name the same file")
        for path in outputs:
            if path.exists():
                raise ProfileError(f"{path} exists; the profile never overwrites a result")
            if not path.resolve().parent.is_dir():
                raise ProfileError(f"{path}: directory {path.resolve().parent} does not exist")
        if self.png is not None and importlib.util.find_spec("matplotlib") is None:
            raise ProfileError(
                "drawing the PNG needs matplotlib: pip install 'parallel-scheduler[bench]' "
                "(or pass --no-png)"
            )


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
