"""``lemon eval``: run a method over benchmark items, score, and write resumable results.

A run directory holds ``items.jsonl`` (one line per finished item, appended and flushed as
items finish: id, method, spec, answer, extracted, correct, tokens, calls, wall_s, status,
error; an :class:`ItemRecord`, the projection of the item's
:class:`~lemon.orchestration.ItemOutcome`) and ``summary.json`` (accuracy with a 95% Wilson
interval, mean worker tokens per item, calls, failures, the settings). Rerunning the same
command resumes: items already in ``items.jsonl`` are not run again. Items run concurrently
(``concurrency``) on one set of backends, so the in-process model batches agents across items.
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

from lemon import atomic
from lemon.backends.base import Backend
from lemon.data.items import CodeItem, Item
from lemon.engine.results import FailureKind
from lemon.evals.baselines import BASELINES, baseline_spec
from lemon.jsonl import RecordFile, read_records
from lemon.orchestration import ItemOutcome, ItemSettings, item_outcome, run_item
from lemon.policy.inference import SpecPolicy
from lemon.policy.teams import on_tier
from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.spec.formatting import format_spec
from lemon.spec.models import Capacity, Spec
from lemon.tasks import TaskKind, classify_task, task_text

__all__ = ["EvalSettings", "ItemRecord", "RunMismatch", "check_resume", "evaluate", "summarize"]

SC_TEMPERATURE = 0.7


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
    prices: TierPrices = DEFAULT_TIER_PRICES
    """Tier prices for the tier-priced cost (the profile's, else the defaults)."""
    tier: Capacity | None = None
    """Run every agent of every spec on this tier (calibrating the tiers one by one)."""
    policy_price: float = 0.0
    """What one of the policy's tokens costs, in medium-tier tokens
    (:func:`lemon.pricing.policy_price`); its prompt and spec count in the item's full cost."""


@dataclass(slots=True)
class ItemRecord:
    """One item's line of ``items.jsonl``: the evaluation's projection of the item's runs
    (:meth:`of`, from their :class:`~lemon.orchestration.ItemOutcome`), or a spec only written
    (``status`` ``spec_only``). The fields carry the record's names; the file keeps its own
    keys (``correct`` for ``success``, ``tokens`` for ``worker_tokens``)."""

    id: str
    method: str
    spec: str
    answer: str | None
    extracted: float | str | None = None
    success: bool = False
    """The chosen answer is right (its run's success is 1)."""
    worker_tokens: int = 0
    priced_tokens: float = 0.0
    """Worker tokens weighed by their tier's price (:mod:`lemon.pricing`)."""
    policy_priced_tokens: float = 0.0
    """The policy's own tokens (prompt and spec) at its price; 0 when no policy wrote it."""
    calls: int = 0
    cache_hits: int = 0
    """Worker calls answered from the persistent call cache."""
    wall_s: float = 0.0
    status: str = "succeeded"
    error: str | None = None
    failure: FailureKind | None = None
    """Why the run failed (:class:`lemon.engine.results.FailureKind`)."""
    samples: list[str | None] = field(default_factory=list)
    policy: dict[str, Any] | None = None
    """For ``policy:`` methods: validity of the first attempt, fallback, attempts, tokens."""

    @classmethod
    def of(
        cls,
        runs: Sequence[ItemOutcome],
        *,
        item: str,
        method: str,
        spec: str,
        wall_s: float,
        vote: bool = True,
        sampled: bool = False,
    ) -> ItemRecord:
        """The record of ``runs``, one spec's runs on one item (one, or the samples of
        self-consistency): their costs summed, the error and failure kind of the last run
        without an answer, and the answer, value and success of the first run whose extracted
        value the most runs share (``vote=False``: the first answer, for code, whose sandbox
        status would vote with the hidden tests). ``sampled`` keeps every answered run's value
        as ``samples``."""
        record = cls(item, method, spec, None, wall_s=wall_s)
        answered: list[ItemOutcome] = []
        for run in runs:
            record.worker_tokens += run.worker_tokens
            record.priced_tokens += run.priced_tokens or 0.0
            record.calls += run.calls
            record.cache_hits += run.cache_hits
            if run.answer is None:
                record.error, record.failure = run.error, run.failure
            else:
                answered.append(run)
        if not answered:
            record.status = "failed"
            return record
        if sampled:
            record.samples = [
                str(a.extracted) if a.extracted is not None else None for a in answered
            ]
        votes = Counter(a.extracted for a in answered if a.extracted is not None and vote)
        winner = votes.most_common(1)[0][0] if votes else answered[0].extracted
        chosen = next(a for a in answered if a.extracted == winner)
        record.answer, record.extracted = chosen.answer, chosen.extracted
        record.success = chosen.success >= 1.0
        return record

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "spec": self.spec,
            "answer": self.answer,
            "extracted": self.extracted,
            "correct": self.success,
            "tokens": self.worker_tokens,
            "priced_tokens": round(self.priced_tokens, 3),
            "policy_priced_tokens": round(self.policy_priced_tokens, 3),
            "full_cost": round(self.priced_tokens + self.policy_priced_tokens, 3),
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "wall_s": round(self.wall_s, 3),
            "status": self.status,
            "error": self.error,
            **({"failure": self.failure.value} if self.failure is not None else {}),
            **({"samples": self.samples} if self.samples else {}),
            **({"policy": self.policy} if self.policy is not None else {}),
        }


def _sample_settings(settings: EvalSettings, k: int, samples: int) -> ItemSettings:
    """One item run's settings: greedy, or the k-th seeded sample of self-consistency."""
    if samples == 1:
        return ItemSettings(worker_max_tokens=settings.max_tokens, deadline_s=settings.deadline_s)
    return ItemSettings(
        worker_max_tokens=settings.max_tokens,
        deadline_s=settings.deadline_s,
        temperature=SC_TEMPERATURE,
        seed=k,
    )


async def _run_item(
    item: Item,
    *,
    spec: Spec,
    samples: int,
    settings: EvalSettings,
    backends: Mapping[Capacity, Backend],
) -> ItemRecord:
    """Run ``spec`` on ``item`` (``samples`` times for self-consistency, majority vote over the
    extracted answers) through :func:`lemon.orchestration.run_item`, scored by
    :func:`lemon.orchestration.item_outcome`; ``sc-budget`` stops sampling once one more
    sample at the mean so far would pass the budget."""
    started = time.perf_counter()
    text = format_spec(spec)
    runs: list[ItemOutcome] = []
    spent = 0
    for k in range(samples):
        result = await run_item(
            item,
            spec,
            backends=backends,
            settings=_sample_settings(settings, k, samples),
            spec_text=text,
        )
        outcome = await item_outcome(item, result, spec=spec, prices=settings.prices)
        runs.append(outcome)
        spent += outcome.worker_tokens
        if outcome.answer is None:
            continue
        if samples > 1 and settings.method.endswith("sc-budget"):
            per_sample = spent / (k + 1)
            if spent + per_sample > settings.budget:
                break
    return ItemRecord.of(
        runs,
        item=item.id,
        method=settings.method,
        spec=text,
        wall_s=time.perf_counter() - started,
        vote=not isinstance(item, CodeItem),
        sampled=samples > 1,
    )


def _fixed_spec(settings: EvalSettings) -> Spec | None:
    """The spec every item runs, for ``spec:PATH`` methods (read once per evaluation)."""
    kind, _, value = settings.method.partition(":")
    if kind != "spec":
        return None
    from lemon.spec.validation import load_spec

    return load_spec(value).spec


def _method_spec(
    settings: EvalSettings, task: str, kind: TaskKind, fixed: Spec | None
) -> tuple[Spec, int]:
    if fixed is not None:
        return fixed, 1
    value = settings.method.partition(":")[2]
    baseline = BASELINES[value]
    samples = baseline.samples
    if samples == "budget":
        samples = 64  # stopped by the budget inside _run_item
    return baseline_spec(value, task, kind=kind), samples


def summarize(
    records: Sequence[Mapping[str, Any]], *, settings: Mapping[str, Any]
) -> dict[str, Any]:
    from lemon.scoring.stats import wilson_interval

    n = len(records)
    correct = sum(bool(r["correct"]) for r in records)
    tokens = sum(int(r["tokens"]) for r in records)
    priced = sum(float(r.get("priced_tokens", r["tokens"])) for r in records)
    policy_priced = sum(float(r.get("policy_priced_tokens", 0.0)) for r in records)
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
        "mean_priced_tokens": priced / n if n else 0.0,
        "mean_policy_priced_tokens": policy_priced / n if n else 0.0,
        "mean_full_cost": (priced + policy_priced) / n if n else 0.0,
        "calls": sum(int(r["calls"]) for r in records),
        "cache_hits": sum(int(r.get("cache_hits", 0)) for r in records),
        "failed_runs": sum(r["status"] not in ("succeeded", "spec_only") for r in records),
        "failures": dict(Counter(str(r["failure"]) for r in records if r.get("failure"))),
        "mean_wall_s": sum(float(r["wall_s"]) for r in records) / n if n else 0.0,
        **extra,
    }


async def _record(
    item: Item,
    *,
    settings: EvalSettings,
    backends: Mapping[Capacity, Backend],
    fixed: Spec | None,
    policy: SpecPolicy | None,
) -> ItemRecord:
    """One item's record: its spec (the method's, or the one the policy writes), run and
    scored, or only written (``specs_only``)."""
    task = task_text(item)
    kind = classify_task(task)
    decision = None
    if policy is not None:
        decision = await policy.write_spec(task, kind=kind)
        spec, samples = decision.spec, 1
    else:
        spec, samples = _method_spec(settings, task, kind, fixed)
    if settings.tier is not None:
        spec = on_tier(spec, settings.tier)
    if settings.specs_only:
        text = decision.text if decision is not None else format_spec(spec)
        record = ItemRecord(item.id, settings.method, text, None)
        record.status = "spec_only"
    else:
        record = await _run_item(
            item, spec=spec, samples=samples, settings=settings, backends=backends
        )
    if decision is not None:
        record.policy_priced_tokens = decision.policy_tokens * settings.policy_price
        record.policy = {
            "first_valid": bool(decision.attempts and decision.attempts[0].valid),
            "fallback": decision.fallback,
            "attempts": len(decision.attempts),
            "tokens": decision.policy_tokens,
            "errors": [list(a.errors) for a in decision.attempts],
        }
    return record


RESUME_FREE = frozenset({"run", "offset", "limit", "stratified"})
"""Settings a resumed run may change: which items it covers (records are keyed by item id)."""


class RunMismatch(ValueError):
    """A run directory holds results made another way than the run asked to resume it."""


def check_resume(out_dir: Path, settings: Mapping[str, Any]) -> None:
    """Refuse to add to ``out_dir``'s records when its ``summary.json`` was made with other
    settings (another policy version, method, token budget, prices, models, table...): the
    finished items would be kept and reported as the new run's."""
    summary_path = out_dir / "summary.json"
    if not (out_dir / "items.jsonl").is_file() or not summary_path.is_file():
        return
    try:
        old = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunMismatch(f"{summary_path}: cannot read the run's settings: {exc}") from None
    for key in sorted(set(settings) - RESUME_FREE):
        if key in old and old[key] != settings[key]:
            raise RunMismatch(
                f"{out_dir}: holds a run made with {key} = {old[key]!r}; this one has "
                f"{settings[key]!r}. Resuming would report the old items as this run's: give "
                "another --name (or --out), or delete the directory"
            )


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
    fails to write validly falls back to the template policy's, and the record says so. Its
    own tokens join the item's full cost at ``settings.policy_price``."""
    run_settings = {
        **meta,
        "method": settings.method,
        "max_tokens": settings.max_tokens,
        "tier_prices": settings.prices.to_json(),
        **({"policy_price": settings.policy_price} if policy is not None else {}),
        **({"tier": settings.tier.value} if settings.tier is not None else {}),
    }
    check_resume(out_dir, run_settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    items_path = out_dir / "items.jsonl"
    by_id = {item.id: item for item in items}
    semaphore = asyncio.Semaphore(settings.concurrency)
    fixed = _fixed_spec(settings)
    records_file = RecordFile(items_path)
    done = records_file.done
    finished = sum(1 for item in items if item.id in done)
    correct = sum(bool(done[i]["correct"]) for i in done if i in by_id)

    async def one(item: Item) -> dict[str, Any]:
        async with semaphore:
            record = await _record(
                item, settings=settings, backends=backends, fixed=fixed, policy=policy
            )
        return record.to_json()

    def count(item: Item, record: dict[str, Any] | None) -> None:
        nonlocal finished, correct
        finished += 1
        correct += bool(record and record["correct"])
        if progress is not None:
            progress(finished, len(items), correct)

    await records_file.append_each(items, key=lambda item: item.id, work=one, on_record=count)
    records = [r for i, r in read_records(items_path).items() if i in by_id]
    summary = summarize(
        records,
        settings=run_settings,
    )
    atomic.write_json(out_dir / "summary.json", summary)
    return summary


def print_progress(done: int, total: int, correct: int) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    bar = "#" * filled + "-" * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total}  correct {correct}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
