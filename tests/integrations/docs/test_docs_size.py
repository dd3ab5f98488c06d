"""The user pages stay a read, not a reference dump: docs/*.md but the contributors' page (development.md) and the
generated figures (results.md) hold at most 120 KB together."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"
NOT_USER_PAGES = {"development.md", "results.md"}
BUDGET = 120_000  # bytes


def user_pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if p.name not in NOT_USER_PAGES)


def test_the_user_pages_fit_their_budget():
    sizes = {p.name: p.stat().st_size for p in user_pages()}
    total = sum(sizes.values())
    largest = ", ".join(f"{name} {size:,}" for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
    assert total <= BUDGET, f"the user pages are {total:,} bytes, over {BUDGET:,}: shorten them (largest: {largest})"
