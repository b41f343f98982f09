"""Generated files are fresh: regenerating them changes nothing."""

from __future__ import annotations

import pytest

from lemon.generate import GENERATED, render_all
from tests.conftest import ROOT


@pytest.mark.parametrize("relative", sorted(GENERATED))
def test_generated_file_is_fresh(relative: str) -> None:
    path = ROOT / relative
    assert path.is_file(), f"{relative} is missing; run python -m lemon.generate"
    assert path.read_text(encoding="utf-8") == render_all()[relative], (
        f"{relative} is stale; run python -m lemon.generate"
    )
