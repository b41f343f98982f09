"""``lemon eval``: run a method over benchmark items, score, and write resumable results.

A run directory holds ``items.jsonl`` (one line per finished item, appended and flushed as
items finish: id, method, spec, answer, extracted, correct, tokens, calls, wall_s, status,
error) and ``summary.json`` (accuracy with a 95% Wilson interval, mean worker tokens per item,
calls, failures, the settings). Rerunning the same command resumes: items already in
``items.jsonl`` are not run again. Items run concurrently (``concurrency``) on one set of
backends, so the in-process model batches agents across items.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon.backends.base import Backend, Decoding
from lemon.data.items import ChoiceItem, CodeItem, Item, NumericItem
from lemon.engine.executor import ExecutionOptions, execute
from lemon.evals.baselines import BASELINES, baseline_spec
from lemon.policy.inference import SpecPolicy
from lemon.spec.models import Capacity, Spec

__all__ = ["EvalSettings", "ItemRecord", "evaluate", "summarize", "task_text"]

SC_TEMPERATURE = 0.7


def task_text(item: Item) -> str:
    """The task an item poses, as the agents see it."""
    if isinstance(item, ChoiceItem):
        options = "\n".join(
            f"({letter}) {text}" for letter, text in zip(item.letters, item.options, strict=True)
        )
        return f"{item.question}\n\nAnswer Choices:\n{options}"
    if isinstance(item, CodeItem):
        return f"Complete this Python function:\n\n```python\n{item.prompt}```"
    return item.question


@dataclass(frozen=True, slots=True)
class EvalSettings:
    method: str
    """``baseline:NAME``, ``spec:PATH`` or ``policy:PATH`` (a learned policy writes each spec)."""
    max_tokens: int = 256
    concurrency: int = 4
    budget: int = 2000
    """Token budget per item for ``sc-budget``."""
    deadline_s: float = 900.0
    specs_only: bool = False
    """Only write (and validate) each item's spec; run no worker (policy validity checks)."""
    tier: Capacity | None = None
    """Run every agent of every spec on this tier (calibrating the tiers one by one)."""


@dataclass(slots=True)
class ItemRecord:
    id: str
    method: str
    spec: str
    answer: str | None
    extracted: float | str | None = None
    correct: bool = False
    tokens: int = 0
    calls: int = 0
    wall_s: float = 0.0
    status: str = "succeeded"
    error: str | None = None
    samples: list[str | None] = field(default_factory=list)
    policy: dict[str, Any] | None = None
    """For ``policy:`` methods: validity of the first attempt, fallback, attempts, tokens."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "spec": self.spec,
            "answer": self.answer,
            "extracted": self.extracted,
            "correct": self.correct,
            "tokens": self.tokens,
            "calls": self.calls,
            "wall_s": round(self.wall_s, 3),
            "status": self.status,
            "error": self.error,
            **({"samples": self.samples} if self.samples else {}),
            **({"policy": self.policy} if self.policy is not None else {}),
        }


def _prefill(item: Item) -> dict[str, str]:
    from lemon.policy.template import TaskKind, prefills

    return prefills(TaskKind.MATH) if isinstance(item, NumericItem) else {}


def _extract(item: Item, text: str) -> tuple[float | str | None, bool]:
    from lemon.scoring.scorer import score_item

    if isinstance(item, CodeItem):
        return None, False  # scored in the sandbox, in one batch at the end
    score = score_item(item, text)
    return score.extracted, score.correct


async def _run_item(
    item: Item,
    *,
    spec: Spec,
    samples: int,
    settings: EvalSettings,
    backends: Mapping[Capacity, Backend],
) -> ItemRecord:
    from lemon.spec.formatting import format_spec

    started = time.perf_counter()
    task = task_text(item)
    record = ItemRecord(item.id, settings.method, format_spec(spec), None)
    answers: list[tuple[str, float | str | None]] = []
    for k in range(samples):
        decoding = (
            Decoding(max_tokens=settings.max_tokens)
            if samples == 1
            else Decoding(max_tokens=settings.max_tokens, temperature=SC_TEMPERATURE, seed=k)
        )
        options = ExecutionOptions(
            decoding=decoding, deadline_s=settings.deadline_s, prefill=_prefill(item)
        )
        result = await execute(spec, task=task, backends=backends, options=options)
        record.tokens += result.tokens()["total"]
        record.calls += result.calls
        if result.answer is None:
            record.error = result.error
            continue
        extracted, _ = _extract(item, result.answer)
        answers.append((result.answer, extracted))
        if samples > 1 and settings.method.endswith("sc-budget"):
            per_sample = record.tokens / (k + 1)
            if record.tokens + per_sample > settings.budget:
                break
    record.wall_s = time.perf_counter() - started
    if not answers:
        record.status = "failed"
        return record
    record.samples = [str(e) if e is not None else None for _, e in answers] if samples > 1 else []
    votes = Counter(e for _, e in answers if e is not None)
    if votes:
        winner = votes.most_common(1)[0][0]
        record.answer = next(text for text, e in answers if e == winner)
    else:
        record.answer = answers[0][0]
    record.extracted, record.correct = _extract(item, record.answer)
    return record


def _fixed_spec(settings: EvalSettings) -> Spec | None:
    """The spec every item runs, for ``spec:PATH`` methods (read once per evaluation)."""
    kind, _, value = settings.method.partition(":")
    if kind != "spec":
        return None
    from lemon.spec.validation import load_spec

    return load_spec(value).spec


def _method_spec(settings: EvalSettings, item: Item, fixed: Spec | None) -> tuple[Spec, int]:
    if fixed is not None:
        return fixed, 1
    value = settings.method.partition(":")[2]
    baseline = BASELINES[value]
    samples = baseline.samples
    if samples == "budget":
        samples = 64  # stopped by the budget inside _run_item
    return baseline_spec(value, task_text(item)), samples


def drop_torn_tail(path: Path) -> None:
    """Cut a last line that an interrupted writer left without its newline, so that appended
    records start on a line of their own (the torn record's item simply runs again)."""
    if not path.is_file():
        return
    with path.open("rb+") as handle:
        size = handle.seek(0, 2)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)


def _read_done(path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by an interruption: that item runs again
        done[record["id"]] = record
    return done


def summarize(
    records: Sequence[Mapping[str, Any]], *, settings: Mapping[str, Any]
) -> dict[str, Any]:
    from lemon.scoring.stats import wilson_interval

    n = len(records)
    correct = sum(bool(r["correct"]) for r in records)
    tokens = sum(int(r["tokens"]) for r in records)
    policy = [r["policy"] for r in records if r.get("policy") is not None]
    extra: dict[str, Any] = {}
    if policy:
        extra = {
            "policy_valid_rate": sum(p["first_valid"] for p in policy) / len(policy),
            "policy_valid_any_rate": sum(not p["fallback"] for p in policy) / len(policy),
            "policy_fallback_rate": sum(p["fallback"] for p in policy) / len(policy),
            "policy_mean_tokens": sum(p["tokens"] for p in policy) / len(policy),
        }
    return {
        **settings,
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "ci95": list(wilson_interval(correct, n)),
        "mean_tokens": tokens / n if n else 0.0,
        "total_tokens": tokens,
        "calls": sum(int(r["calls"]) for r in records),
        "failed_runs": sum(r["status"] not in ("succeeded", "spec_only") for r in records),
        "mean_wall_s": sum(float(r["wall_s"]) for r in records) / n if n else 0.0,
        **extra,
    }


async def evaluate(
    items: Sequence[Item],
    *,
    settings: EvalSettings,
    backends: Mapping[Capacity, Backend],
    out_dir: Path,
    meta: Mapping[str, Any],
    progress: Callable[[int, int, int], None] | None = None,
    policy: SpecPolicy | None = None,
) -> dict[str, Any]:
    """Run, score and record every item not already done; returns the summary.

    With ``policy`` (a ``policy:`` method), the policy writes each item's spec first; a spec it
    fails to write validly falls back to the template policy's, and the record says so."""
    out_dir.mkdir(parents=True, exist_ok=True)
    items_path = out_dir / "items.jsonl"
    drop_torn_tail(items_path)
    done = _read_done(items_path)
    todo = [item for item in items if item.id not in done]
    by_id = {item.id: item for item in items}
    semaphore = asyncio.Semaphore(settings.concurrency)
    finished = len(items) - len(todo)
    correct = sum(bool(done[i]["correct"]) for i in done if i in by_id)
    lock = asyncio.Lock()
    fixed = _fixed_spec(settings)

    with items_path.open("a", encoding="utf-8") as sink:

        async def one(item: Item) -> None:
            nonlocal finished, correct
            async with semaphore:
                decision = None
                if policy is not None:
                    decision = await policy.write_spec(task_text(item))
                    spec, samples = decision.spec, 1
                else:
                    spec, samples = _method_spec(settings, item, fixed)
                if settings.tier is not None:
                    from lemon.evals.selection import on_tier

                    spec = on_tier(spec, settings.tier)
                if settings.specs_only:
                    from lemon.spec.formatting import format_spec

                    record = ItemRecord(item.id, settings.method, format_spec(spec), None)
                    record.status = "spec_only"
                else:
                    record = await _run_item(
                        item, spec=spec, samples=samples, settings=settings, backends=backends
                    )
                if decision is not None:
                    record.policy = {
                        "first_valid": bool(decision.attempts and decision.attempts[0].valid),
                        "fallback": decision.fallback,
                        "attempts": len(decision.attempts),
                        "tokens": decision.policy_tokens,
                        "errors": [list(a.errors) for a in decision.attempts],
                    }
            if (
                isinstance(item, CodeItem)
                and record.answer is not None
                and record.status != "spec_only"
            ):
                from lemon.scoring.code import score_code

                (run,) = await asyncio.to_thread(score_code, [item], [record.answer])
                record.correct, record.extracted = run.passed, run.status.value
            async with lock:
                sink.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
                sink.flush()
                finished += 1
                correct += record.correct
                if progress is not None:
                    progress(finished, len(items), correct)

        await asyncio.gather(*(one(item) for item in todo))

    records = [r for i, r in _read_done(items_path).items() if i in by_id]
    summary = summarize(
        records,
        settings={
            **meta,
            "method": settings.method,
            "max_tokens": settings.max_tokens,
            **({"tier": settings.tier.value} if settings.tier is not None else {}),
        },
    )
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def print_progress(done: int, total: int, correct: int) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    bar = "#" * filled + "-" * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total}  correct {correct}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
