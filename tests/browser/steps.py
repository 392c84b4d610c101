"""Browser steps the tests share."""

from __future__ import annotations

from typing import Any


def follow(page: Any, target: Any) -> Any:
    """Click ``target`` (a selector or a locator) and wait until the page it leads to has
    loaded, so the next read sees the new page, never the old one. Returns the response."""
    clickable = page.locator(target) if isinstance(target, str) else target
    with page.expect_navigation() as navigation:
        clickable.click()
    return navigation.value
