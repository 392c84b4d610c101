"""The CLI on PostgreSQL and Redis: a read-only command on a prefix with no store creates no
table or key and says so, and a command of another shard count writes nothing (issue 19, 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import storage_adapters
from parallel_scheduler.cli import main
from tests.conftest import storage_url, unique_prefix
from tests.shard_stores import assert_nothing_written, exists


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--log-level", "WARNING", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["status"], ["recurring", "list"]])
@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("postgresql", marks=pytest.mark.postgresql),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_read_only_commands_create_no_table_or_key(
    kind: str, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = storage_url(kind, tmp_path)
    prefix = unique_prefix()
    try:
        code, out, err = run_cli(["--storage-url", server, "--prefix", prefix, *command], capsys)
        assert (code, out) == (2, "")
        assert f"no store under prefix {prefix!r}" in err
        assert not exists(server, prefix)
    finally:  # whatever a failing run created
        leftover = storage_adapters.from_url(server, prefix=prefix)
        leftover.drop()
        leftover.close()


def test_schedule_with_another_shard_count_writes_nothing(
    adapter_url: str, four_shards: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--storage-url", adapter_url, "--prefix", four_shards, "--shards", "8"]
    code, out, err = run_cli([*args, "schedule", "t.add", "--countdown", "60"], capsys)
    assert (code, out) == (2, "")
    assert "split into 4 shard(s)" in err
    assert_nothing_written(adapter_url, four_shards)
