"""Teachers: where SFT data comes from (``lemon teacher``).

Both write the SFT rows the policy learns from, one JSON object per line::

    {"id": ..., "prompt": [system, user messages], "completion": [{"role": "assistant",
     "content": CANONICAL_SPEC_YAML}], "provenance": {...}}

(TRL's conversational prompt-completion format; the prompt is :func:`policy_messages`.)

- The **search teacher** samples candidate specs for a training item — the template policy's
  team, its compute variant, fixed topologies, and every single-field mutant of the template —
  executes each with the configured capacity profile (one reuse cache per item, so mutants
  re-run only what changed), scores the answer, and keeps the candidate with the highest R_orch
  (ties: the first candidate, so the order is part of the method). Its provenance records every
  candidate's reward.
- The **LLM teacher** asks a model behind an OpenAI-compatible endpoint, with few-shot
  examples (template specs for sample tasks of each kind), and keeps only specs that validate.

Rows are appended as items finish and items already in the output are skipped, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon.backends.base import Backend, Decoding, GenerationRequest, Message
from lemon.data.items import CodeItem, Item, NumericItem
from lemon.engine.executor import CallCache, ExecutionOptions, execute
from lemon.policy.inference import extract_spec_text
from lemon.policy.prompt import policy_messages, spec_completion
from lemon.policy.template import TaskKind, prefills, template_spec
from lemon.pricing import TierPrices, resolve_prices
from lemon.reward import RewardConfig, orchestration_reward
from lemon.spec.errors import SpecError
from lemon.spec.models import Capacity, Spec
from lemon.spec.mutations import mutations
from lemon.spec.validation import parse_spec

__all__ = [
    "FEW_SHOT_TASKS",
    "Candidate",
    "SearchSettings",
    "TeacherStats",
    "candidate_specs",
    "llm_teacher",
    "search_teacher",
    "sft_row",
]

_TOPOLOGIES = ("single", "pot", "chain", "plan-pot", "star")


@dataclass(frozen=True, slots=True)
class Candidate:
    origin: str
    spec: Spec


def candidate_specs(task: str, limit: int) -> list[Candidate]:
    """Up to ``limit`` distinct candidate specs for ``task``, in a fixed order: the template,
    its compute variant, fixed topologies, then the template's single-field mutants."""
    from lemon.evals.baselines import baseline_spec

    kind, spec, text = template_spec(task)
    found: list[Candidate] = [Candidate("template", spec)]
    if kind is TaskKind.MATH:
        found.append(Candidate("template:compute", template_spec(task, variant="compute")[1]))
    found += [Candidate(f"topology:{name}", baseline_spec(name, task)) for name in _TOPOLOGIES]
    parsed = parse_spec(text)
    found += [
        Candidate(f"mutant:{m.kind.value}:{m.agent}:{m.target}", m.spec) for m in mutations(parsed)
    ]
    unique: list[Candidate] = []
    seen: set[str] = set()
    for candidate in found:
        key = spec_completion(candidate.spec, candidate.spec.output)
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique[:limit]


def sft_row(item_id: str, task: str, spec: Spec, provenance: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": item_id,
        "prompt": policy_messages(task),
        "completion": [{"role": "assistant", "content": spec_completion(spec, spec.output)}],
        "provenance": dict(provenance),
    }


@dataclass(frozen=True, slots=True)
class SearchSettings:
    candidates: int = 6
    max_tokens: int = 128
    concurrency: int = 2
    rewards: RewardConfig = field(default_factory=RewardConfig)
    deadline_s: float = 900.0
    prices: TierPrices | None = None
    """Tier prices of the workers' profile (None: ``rewards.tier_prices``, else the defaults);
    ``rewards.tier_prices``, when set, wins over these."""


@dataclass(slots=True)
class TeacherStats:
    items: int = 0
    written: int = 0
    skipped_done: int = 0
    rejected: int = 0
    executions: int = 0
    reused_calls: int = 0
    cache_hits: int = 0
    """Calls answered from the persistent call cache."""
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "written": self.written,
            "skipped_done": self.skipped_done,
            "rejected": self.rejected,
            "executions": self.executions,
            "reused_calls": self.reused_calls,
            "cache_hits": self.cache_hits,
        }


def _done_ids(path: Path) -> set[str]:
    from lemon.evals.runner import drop_torn_tail

    drop_torn_tail(path)
    if not path.is_file():
        return set()
    done = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done.add(json.loads(line)["id"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a torn last line: that item runs again
    return done


def _success(item: Item, answer: str | None) -> float:
    if answer is None:
        return 0.0
    if isinstance(item, CodeItem):
        from lemon.scoring.code import score_code

        return float(score_code([item], [answer])[0].passed)
    from lemon.scoring.scorer import score_item

    return float(score_item(item, answer).correct)


async def search_teacher(
    items: Sequence[Item],
    *,
    backends: Mapping[Capacity, Backend],
    out: Path,
    settings: SearchSettings = SearchSettings(),
    progress: Callable[[int, int], None] | None = None,
) -> TeacherStats:
    """Execute candidate specs per item and append the best (by R_orch) as an SFT row."""
    from lemon.evals.runner import task_text

    stats = TeacherStats(items=len(items))
    done = _done_ids(out)
    todo = [item for item in items if item.id not in done]
    stats.skipped_done = len(items) - len(todo)
    out.parent.mkdir(parents=True, exist_ok=True)
    semaphore = asyncio.Semaphore(settings.concurrency)
    lock = asyncio.Lock()
    finished = stats.skipped_done
    prices = settings.rewards.tier_prices or settings.prices or resolve_prices()

    async def one(item: Item, sink: Any) -> None:
        nonlocal finished
        task = task_text(item)
        options = ExecutionOptions(
            decoding=Decoding(max_tokens=settings.max_tokens),
            deadline_s=settings.deadline_s,
            prefill=prefills(TaskKind.MATH) if isinstance(item, NumericItem) else {},
        )
        cache = CallCache()
        scored: list[dict[str, Any]] = []
        best: tuple[float, Candidate] | None = None
        async with semaphore:
            for candidate in candidate_specs(task, settings.candidates):
                result = await execute(
                    candidate.spec, task=task, backends=backends, options=options, cache=cache
                )
                stats.executions += 1
                stats.reused_calls += result.reused_calls
                stats.cache_hits += result.cache_hits
                success = _success(item, result.answer) if result.status == "succeeded" else 0.0
                tokens = result.tokens()["total"]
                priced = prices.priced(result.tokens_by_tier())
                reward = orchestration_reward(
                    success,
                    worker_tokens=tokens,
                    priced_tokens=priced,
                    agents=len(candidate.spec.agents),
                    edges=sum(len(a.depends_on) for a in candidate.spec.agents),
                    valid=result.status == "succeeded",
                    config=settings.rewards,
                )
                scored.append(
                    {
                        "origin": candidate.origin,
                        "reward": round(reward, 6),
                        "success": success,
                        "worker_tokens": tokens,
                        "priced_tokens": round(priced, 3),
                        "status": result.status,
                    }
                )
                if best is None or reward > best[0]:
                    best = (reward, candidate)
        async with lock:
            if best is None:
                stats.rejected += 1
            else:
                chosen = next(s for s in scored if s["origin"] == best[1].origin)
                provenance = {
                    "teacher": "search",
                    "benchmark": item.benchmark.value,
                    "chosen": best[1].origin,
                    **{
                        k: chosen[k]
                        for k in ("reward", "success", "worker_tokens", "priced_tokens")
                    },
                    "tier_prices": prices.to_json(),
                    "workers": sorted({b.label for b in backends.values()}),
                    "candidates": scored,
                }
                sink.write(json.dumps(sft_row(item.id, task, best[1].spec, provenance)) + "\n")
                sink.flush()
                stats.written += 1
                stats.details.append(provenance)
            finished += 1
            if progress is not None:
                progress(finished, len(items))

    with out.open("a", encoding="utf-8") as sink:
        await asyncio.gather(*(one(item, sink) for item in todo))
    return stats


FEW_SHOT_TASKS: tuple[str, ...] = (
    "A baker makes 24 muffins and sells them in boxes of 4. Each box costs $3. How much money "
    "does the baker make?",
    "Which gas do plants absorb from the air? (A) Oxygen (B) Nitrogen (C) Carbon dioxide "
    "(D) Helium",
    "Write a Python function `is_palindrome(s)` that returns True when s reads the same backwards.",
)


def _few_shot(task: str) -> list[Message]:
    messages = policy_messages(task)
    shots: list[Message] = [Message("system", messages[0]["content"])]
    for example in FEW_SHOT_TASKS:
        text = template_spec(example)[2]
        shots.append(Message("user", policy_messages(example)[1]["content"]))
        shots.append(Message("assistant", text))
    shots.append(Message("user", messages[1]["content"]))
    return shots


async def llm_teacher(
    items: Sequence[Item],
    *,
    backend: Backend,
    out: Path,
    max_tokens: int = 384,
    concurrency: int = 4,
    progress: Callable[[int, int], None] | None = None,
) -> TeacherStats:
    """Ask ``backend`` (few-shot) for each item's spec; append only the valid ones."""
    from lemon.evals.runner import task_text

    stats = TeacherStats(items=len(items))
    done = _done_ids(out)
    todo = [item for item in items if item.id not in done]
    stats.skipped_done = len(items) - len(todo)
    out.parent.mkdir(parents=True, exist_ok=True)
    semaphore = asyncio.Semaphore(concurrency)
    lock = asyncio.Lock()
    finished = stats.skipped_done

    async def one(item: Item, sink: Any) -> None:
        nonlocal finished
        task = task_text(item)
        request = GenerationRequest(
            messages=tuple(_few_shot(task)), decoding=Decoding(max_tokens=max_tokens)
        )
        async with semaphore:
            generation = await backend.generate(request)
        text = extract_spec_text(generation.text)
        try:
            parsed = parse_spec(text, source=f"<teacher:{item.id}>")
        except SpecError as exc:
            parsed, reason = None, exc.issues[0].message if exc.issues else str(exc)
        async with lock:
            if parsed is None:
                stats.rejected += 1
                stats.details.append({"id": item.id, "rejected": reason})
            else:
                provenance = {
                    "teacher": "llm",
                    "benchmark": item.benchmark.value,
                    "model": backend.model_id,
                    "shots": len(FEW_SHOT_TASKS),
                }
                sink.write(json.dumps(sft_row(item.id, task, parsed.spec, provenance)) + "\n")
                sink.flush()
                stats.written += 1
            finished += 1
            if progress is not None:
                progress(finished, len(items))

    with out.open("a", encoding="utf-8") as sink:
        await asyncio.gather(*(one(item, sink) for item in todo))
    return stats
