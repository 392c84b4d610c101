"""The profile's own errors: each one stops the run before any figure is printed."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from parallel_scheduler.errors import ParallelSchedulerError

__all__ = ["ProfileError", "VerificationError", "scrub"]


class ProfileError(ParallelSchedulerError):
    """The profile cannot run as asked (bad option, unreachable server, existing output file)."""


class VerificationError(ProfileError):
    """A repetition lost or duplicated a job: its timing would describe a broken scheduler."""


def scrub(text: object, url: str) -> str:
    """``text`` with the password of ``url`` (if any) replaced by ``***``."""
    message = str(text)
    try:
        password = urlsplit(url).password
    except ValueError:
        return message
    for secret in {password, unquote(password)} if password else ():
        message = message.replace(secret, "***")
    return message
