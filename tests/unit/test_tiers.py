"""The test tiers fail, never skip, when something they need is missing."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, require_extra

# Skips the suite allows, each for a reason no install can fix (file, reason text).
ALLOWED_SKIPS = {
    ("tests/model/test_cpu_linear.py", "fbgemm needs an x86 CPU with AVX2"),
}
_SKIP = re.compile(r"importorskip|pytest\.skip\(|mark\.skip|skipif|xfail")


def test_no_test_skips_for_a_missing_part() -> None:
    found = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "tests/unit/test_tiers.py":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if _SKIP.search(line):
                reason = re.search(r"\"([^\"]*)\"", line)
                found.add((relative, reason.group(1) if reason else line.strip()))
    assert found == ALLOWED_SKIPS


def test_a_missing_extra_fails_naming_it() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"the `train` extra \(no_such_module_"):
        require_extra("train", "json", "no_such_module_lemon")
    require_extra("train", "json")  # present: nothing happens
