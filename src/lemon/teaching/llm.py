"""The LLM teacher: few-shot a model behind an OpenAI-compatible endpoint (template specs for a
sample task of each kind as the examples) and keep only the specs that validate."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lemon.backends.base import Backend, Decoding, GenerationRequest, Message
from lemon.data.items import Item
from lemon.policy.inference import extract_spec_text
from lemon.policy.prompt import policy_messages
from lemon.policy.template import template_spec
from lemon.spec.issues import SpecError
from lemon.spec.validation import parse_spec
from lemon.tasks import task_text
from lemon.teaching.rows import Progress, TeacherStats, sft_row, write_rows

__all__ = ["FEW_SHOT_TASKS", "llm_teacher"]

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
    progress: Progress | None = None,
) -> TeacherStats:
    """Ask ``backend`` (few-shot) for each item's spec; append only the valid ones."""
    semaphore = asyncio.Semaphore(concurrency)

    async def row(item: Item, stats: TeacherStats) -> dict[str, Any] | None:
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
            reason = exc.issues[0].message if exc.issues else str(exc)
            stats.details.append({"id": item.id, "rejected": reason})
            return None
        provenance = {
            "teacher": "llm",
            "benchmark": item.benchmark.value,
            "model": backend.model_id,
            "shots": len(FEW_SHOT_TASKS),
        }
        return sft_row(item.id, task, parsed.spec, provenance)

    return await write_rows(items, out=out, row=row, progress=progress)
