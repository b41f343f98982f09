"""R_orch as GRPO reward functions, with counterfactual span credit as a side output.

A reward function here is an async callable TRL's ``GRPOTrainer`` awaits once per generation
batch. For each completion it:

1. decodes the completion's own token ids (and their character offsets, :mod:`.credit`);
2. parses it with :func:`lemon.spec.validation.parse_spec`; invalid → ``invalid_reward``;
3. scores the valid spec: :class:`SyntheticReward` in closed form (the simulator,
   :mod:`lemon.learning.simulator`), :class:`EngineReward` by executing it with the configured
   profile's backends and one shared :class:`~lemon.engine.executor.CallCache`;
4. when counterfactual credit is on, picks fields of the spec at random (up to K mutants in
   all) and scores their mutants of the enabled kinds (with the same cache, so only the agents
   whose inputs changed re-run). With both ``upgrade_capacity`` and ``downgrade_capacity``
   enabled, a capacity field is scored at every other tier; the field's credit ``Δc`` follows
   :func:`lemon_train.credit.field_credits` and lands on the tokens of the mutation's
   ``credit_span`` (the tokens that create the field). Every rollout of the batch is scored
   before any mutant. With ``mutants: paid`` every mutant is scored tentatively and only the
   fields whose every mutant makes no worker call the run has not read already are kept
   (:meth:`SpecReward.paid_mutant`), then K are picked among those: credit at no new call.

The credits of the last call wait in :attr:`SpecReward.pending` for the trainer
(:class:`lemon_train.grpo.CounterfactualGRPOTrainer`), which adds ``λ_cf · Δc`` to those tokens'
advantages. Per-batch metrics (validity, worker tokens, Δc statistics, reward vs optimum) go
through TRL's ``log_metric``.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lemon.budget import WORKER_MAX_TOKENS
from lemon.data.items import Item
from lemon.learning.simulator import SyntheticTask, evaluate, optimal
from lemon.learning.training_config import CounterfactualConfig
from lemon.policy.inference import spec_region
from lemon.pricing import resolve_prices
from lemon.reward import Outcome, RewardConfig, orchestration_reward
from lemon.spec.issues import SpecError
from lemon.spec.models import Capacity, Spec
from lemon.spec.mutations import Mutation, MutationKind, capacity_mutation, mutations
from lemon.spec.roles import default_roles
from lemon.spec.spans import span_to_token_indices
from lemon.spec.validation import ParsedSpec, parse_spec
from lemon_train.credit import MutantScore, SpanCredit, field_credits, token_offsets

if TYPE_CHECKING:
    from lemon.backends.base import Backend
    from lemon.learning import simulator, simulator_v2
    from lemon.tables.replay import TableCalls

__all__ = [
    "BatchStats",
    "EngineReward",
    "SimulatorV2Reward",
    "SpecReward",
    "SyntheticReward",
    "call_keys",
]

Decode = Callable[[Sequence[int]], str]


@dataclass(slots=True)
class BatchStats:
    """What one reward call saw (also the source of the per-step metrics)."""

    rewards: list[float] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    worker_tokens: list[int] = field(default_factory=list)
    success: list[float] = field(default_factory=list)
    """Success of each valid spec's run."""
    deltas: list[float] = field(default_factory=list)
    deltas_by_kind: dict[str, list[float]] = field(default_factory=dict)
    optimum_ratio: list[float] = field(default_factory=list)
    mutant_runs: int = 0
    unpaid_mutants: int = 0
    """Mutants left out because a worker call of theirs was not read before (``paid``)."""
    worker_calls: int = 0
    """Agent executions a reuse cache living for this batch could not answer (simulators)."""

    def metrics(self) -> dict[str, float]:
        out = {
            "reward_mean": statistics.fmean(self.rewards) if self.rewards else 0.0,
            "validity": statistics.fmean(map(float, self.valid)) if self.valid else 0.0,
            "worker_tokens": statistics.fmean(self.worker_tokens) if self.worker_tokens else 0.0,
            "cf/mutants": float(self.mutant_runs),
        }
        if self.unpaid_mutants:
            out["cf/unpaid_mutants"] = float(self.unpaid_mutants)
        if self.success:
            out["success"] = statistics.fmean(self.success)
        if self.worker_calls:
            out["worker_calls"] = float(self.worker_calls)
        if self.deltas:
            out["cf/delta_mean"] = statistics.fmean(self.deltas)
            out["cf/delta_abs_mean"] = statistics.fmean(map(abs, self.deltas))
            out["cf/delta_max"] = max(self.deltas)
            out["cf/delta_min"] = min(self.deltas)
            for kind, values in sorted(self.deltas_by_kind.items()):
                out[f"cf/delta_{kind}"] = statistics.fmean(values)
        if self.optimum_ratio:
            out["optimum_ratio"] = statistics.fmean(self.optimum_ratio)
        return out


class SpecReward:
    """Base class: parse, score, mutate, and keep the span credits for the trainer."""

    __name__ = "r_orch"

    def __init__(
        self,
        decode: Decode,
        *,
        rewards: RewardConfig,
        counterfactual: CounterfactualConfig,
        seed: int = 0,
    ) -> None:
        self.decode = decode
        self.rewards = rewards
        self.counterfactual = counterfactual
        self.rng = random.Random(seed)
        self.token_bytes: Callable[[int], bytes] | None = None
        """Each token's bytes (:func:`lemon_train.credit.byte_level_pieces`): exact character
        offsets for the credit spans whatever the text's characters."""
        self.pending: list[list[SpanCredit]] | None = None
        self.last: BatchStats = BatchStats()
        self._calls: set[tuple[Any, ...]] = set()

    # -- what subclasses provide ------------------------------------------------------------
    async def score(self, index: int, parsed: ParsedSpec, row: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError

    async def score_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome:
        raise NotImplementedError

    def optimum(self, row: Mapping[str, Any]) -> float | None:
        """The task's optimal reward when known (the simulator), else None."""
        return None

    # -- the reward function ----------------------------------------------------------------
    def _reward(self, outcome: Outcome, row: Mapping[str, Any] | None = None) -> float:
        """R_orch of ``outcome``; a row that carries a ``cost_weight`` (its prompt states it)
        is scored with R_orch's ``token_cost`` set to that weight."""
        config = self.rewards
        weight = None if row is None else row.get("cost_weight")
        if weight is not None:
            config = config.model_copy(update={"token_cost": float(weight)})
        return orchestration_reward(
            outcome.success,
            worker_tokens=outcome.worker_tokens,
            priced_tokens=outcome.priced_tokens,
            agents=outcome.agents,
            edges=outcome.edges,
            valid=outcome.valid,
            config=config,
        )

    def _field_groups(self, parsed: ParsedSpec) -> list[list[Mutation]]:
        """Every mutant of the enabled kinds, one list per field, in the spec's order."""
        kinds = set(self.counterfactual.kinds)
        capacity = {MutationKind.UPGRADE_CAPACITY, MutationKind.DOWNGRADE_CAPACITY}
        sweep = capacity <= kinds
        fields: dict[tuple[str, str], list[Mutation]] = {}
        for mutation in mutations(parsed, kinds=kinds - capacity if sweep else kinds):
            fields.setdefault(mutation.field, []).append(mutation)
        if sweep:  # every other tier of each capacity field (tools have none)
            roles = default_roles()
            for agent in parsed.spec.agents:
                if agent.role in roles and roles[agent.role].is_tool:
                    continue
                fields[(agent.name, "capacity")] = [
                    capacity_mutation(parsed, agent.name, tier)
                    for tier in Capacity
                    if tier is not agent.capacity
                ]
        return list(fields.values())

    def _pick(self, groups: list[list[Mutation]]) -> list[list[Mutation]]:
        """Whole fields at random, up to K mutants in all, back in the spec's order."""
        groups = list(groups)
        self.rng.shuffle(groups)
        picked, budget = [], self.counterfactual.max_mutants
        for group in groups:
            if len(group) <= budget:
                picked.append(group)
                budget -= len(group)
        picked.sort(key=lambda group: group[0].span)
        return picked

    def _fields(self, parsed: ParsedSpec) -> list[list[Mutation]]:
        """The spec's mutants of the enabled kinds, one list per field, up to K mutants."""
        return self._pick(self._field_groups(parsed))

    async def _rollout(
        self, index: int, ids: Sequence[int], row: Mapping[str, Any], stats: BatchStats
    ) -> tuple[float, tuple[int, ParsedSpec] | None]:
        """The completion's reward, and (its spec's offset in the text, the parsed spec) when
        its mutants are to be scored."""
        raw = self.decode(ids)
        # the text evaluation reads: cut at the policy's stop, the YAML extracted
        start, end = spec_region(raw)
        text = raw[start:end]
        try:
            parsed = parse_spec(text, source=f"<completion {index}>")
        except SpecError:
            stats.valid[index] = False
            best = self.optimum(row)
            if best:
                stats.optimum_ratio.append(self.rewards.invalid_reward / best)
            return self.rewards.invalid_reward, None
        outcome = await self.score(index, parsed, row)
        self.count_calls(parsed.spec, row, stats)
        reward = self._reward(outcome, row)
        stats.worker_tokens.append(outcome.worker_tokens)
        stats.success.append(outcome.success)
        best = self.optimum(row)
        if best:
            stats.optimum_ratio.append(reward / best)
        if not (self.counterfactual.enabled and outcome.valid):
            return reward, None
        return reward, (start, parsed)

    async def _mutants(
        self, index: int, parsed: ParsedSpec, row: Mapping[str, Any], stats: BatchStats
    ) -> list[tuple[Mutation, Outcome]]:
        """The chosen mutants and their outcomes. ``mutants: paid`` scores every mutant
        tentatively and keeps only whole fields whose every mutant is paid for (its calls
        read before), then picks among those: credit that costs no new worker call."""
        if self.counterfactual.mutants == "all":
            chosen = [mutation for group in self._fields(parsed) for mutation in group]
            outcomes = await asyncio.gather(
                *(self.score_mutant(index, m, parsed, row) for m in chosen)
            )
            return list(zip(chosen, outcomes, strict=True))
        groups = self._field_groups(parsed)
        flat = [mutation for group in groups for mutation in group]
        tried = await asyncio.gather(*(self.paid_mutant(index, m, parsed, row) for m in flat))
        outcome_of = {id(m): o for m, o in zip(flat, tried, strict=True)}
        paid = [g for g in groups if all(outcome_of[id(m)] is not None for m in g)]
        stats.unpaid_mutants += sum(len(g) for g in groups) - sum(len(g) for g in paid)
        picked = [mutation for group in self._pick(paid) for mutation in group]
        return [(m, o) for m in picked if (o := outcome_of[id(m)]) is not None]

    async def _credit(
        self,
        index: int,
        ids: Sequence[int],
        row: Mapping[str, Any],
        reward: float,
        start: int,
        parsed: ParsedSpec,
        stats: BatchStats,
    ) -> list[SpanCredit]:
        scored = await self._mutants(index, parsed, row, stats)
        if not scored:
            return []
        offsets = token_offsets(self.decode, ids, token_bytes=self.token_bytes)  # in ``raw``
        scores = []
        for mutation, mutant in scored:
            self.count_calls(mutation.spec, row, stats)
            stats.mutant_runs += 1
            first, last = mutation.credit_span
            tokens = tuple(span_to_token_indices((first + start, last + start), offsets))
            scores.append(
                MutantScore(
                    mutation.field,
                    mutation.kind.value,
                    self._reward(mutant, row),
                    tokens,
                    value_edit=mutation.kind.field == "capacity",
                )
            )
        kinds = set(self.counterfactual.kinds)
        credits = field_credits(
            reward,
            scores,
            all_values={MutationKind.UPGRADE_CAPACITY, MutationKind.DOWNGRADE_CAPACITY} <= kinds,
        )
        for credit in credits:
            stats.deltas.append(credit.delta)
            stats.deltas_by_kind.setdefault(credit.kind, []).append(credit.delta)
        return credits

    async def paid_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome | None:
        """The mutant's outcome if every worker call it makes was read before in this run,
        else None (``mutants: paid``); a reward that cannot tell refuses."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot tell which mutants are paid for: "
            "counterfactual.mutants paid needs an outcome table or a simulator"
        )

    def count_calls(self, spec: Spec, row: Mapping[str, Any], stats: BatchStats) -> None:
        """Count the worker calls of executing ``spec`` (simulators; the engine has its own)."""

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        **kwargs: Any,
    ) -> list[float]:
        count = len(completion_ids)
        rows = [
            {key: value[i] for key, value in kwargs.items() if isinstance(value, list)}
            for i in range(count)
        ]
        stats = BatchStats(valid=[True] * count)
        self._calls = set()
        # every rollout first, then the mutants: a mutant that repeats a sibling's calls finds
        # them already read (paid mutants, the engine's in-batch reuse cache)
        results = await asyncio.gather(
            *(self._rollout(i, ids, rows[i], stats) for i, ids in enumerate(completion_ids))
        )
        rewards = [reward for reward, _ in results]

        async def credit(i: int) -> list[SpanCredit]:
            reward, mutate = results[i]
            if mutate is None:
                return []
            start, parsed = mutate
            return await self._credit(i, completion_ids[i], rows[i], reward, start, parsed, stats)

        credits = await asyncio.gather(*(credit(i) for i in range(count)))
        stats.rewards = rewards
        self.pending = list(credits)
        self.last = stats
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for name, value in stats.metrics().items():
                if name != "reward_mean":
                    log_metric(name, value)
        return rewards

    def take_pending(self, count: int) -> list[list[SpanCredit]]:
        """The credits of the last call (``count`` rows; none when credit is off)."""
        pending, self.pending = self.pending, None
        if pending is None:
            return [[] for _ in range(count)]
        if len(pending) != count:
            raise RuntimeError(
                f"reward function scored {len(pending)} completions, the batch has {count}"
            )
        return pending


def call_keys(spec: Spec, task: str) -> list[tuple[Any, ...]]:
    """One key per agent of ``spec``, as the engine's reuse cache would see its call: the task,
    the agent's name, role, duties and tier, and (recursively) the calls whose answers it reads.
    Equal keys are one call; a mutant shares the keys of every agent it did not change."""
    by_name = {agent.name: agent for agent in spec.agents}
    keys: dict[str, tuple[Any, ...]] = {}

    def key(name: str) -> tuple[Any, ...]:
        if name not in keys:
            agent = by_name[name]
            inputs = tuple(key(dep) for dep in agent.depends_on)
            keys[name] = (task, name, agent.role, agent.duties, agent.capacity.value, inputs)
        return keys[name]

    return [key(agent.name) for agent in spec.agents]


class _CountedCalls:
    """Mixin for the simulators: worker calls counted against a cache living for one batch."""

    _calls: set[tuple[Any, ...]]

    async def paid_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome | None:
        keys = call_keys(mutation.spec, str(row.get("id", row.get("task", ""))))
        if not self._calls.issuperset(keys):
            return None
        outcome: Outcome = await self.score_mutant(index, mutation, parsed, row)  # type: ignore[attr-defined]
        return outcome

    def count_calls(self, spec: Spec, row: Mapping[str, Any], stats: BatchStats) -> None:
        for key in call_keys(spec, str(row.get("id", row.get("task", "")))):
            if key not in self._calls:
                self._calls.add(key)
                stats.worker_calls += 1


def simulated_outcome(result: simulator.Evaluation | simulator_v2.SimulatorV2Evaluation) -> Outcome:
    """The outcome of a simulator's evaluation (``simulator.Evaluation`` or
    ``simulator_v2.SimulatorV2Evaluation``)."""
    return Outcome(
        success=result.success,
        worker_tokens=result.worker_tokens,
        agents=result.agents,
        edges=result.edges,
    )


def task_from_row(row: Mapping[str, Any]) -> SyntheticTask:
    """The simulator task a dataset row describes (columns written by ``synthetic_dataset``)."""
    from lemon.learning.simulator import Domain
    from lemon.spec.models import Capacity

    try:
        return SyntheticTask(
            id=str(row["id"]),
            domain=Domain(row["domain"]),
            difficulty=Capacity(row["difficulty"]),
            tricky=bool(row["tricky"]),
            strict=bool(row["strict"]),
            text=str(row["task"]),
        )
    except KeyError as exc:
        raise ValueError(f"synthetic row lacks column {exc.args[0]!r}: {dict(row)!r}") from None


class SyntheticReward(_CountedCalls, SpecReward):
    """R_orch in closed form from the simulator (no execution; mutants cost nothing)."""

    async def score(self, index: int, parsed: ParsedSpec, row: Mapping[str, Any]) -> Outcome:
        result = evaluate(parsed.spec, parsed.output, task_from_row(row), config=self.rewards)
        return simulated_outcome(result)

    async def score_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome:
        output = mutation.spec.output or parsed.output
        result = evaluate(mutation.spec, output, task_from_row(row), config=self.rewards)
        return simulated_outcome(result)

    def optimum(self, row: Mapping[str, Any]) -> float | None:
        return optimal(task_from_row(row), config=self.rewards)[1]


class SimulatorV2Reward(_CountedCalls, SpecReward):
    """R_orch from simulator v2 (:mod:`lemon.learning.simulator_v2`): sampled success with
    the task's own draws, so a spec and its mutants share them (common random numbers)."""

    _tasks: dict[tuple[object, object, object], simulator_v2.Task] = {}  # noqa: RUF012 - replaced per instance, never mutated

    async def score(self, index: int, parsed: ParsedSpec, row: Mapping[str, Any]) -> Outcome:
        return self._outcome(parsed.spec, parsed.output, row)

    async def score_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome:
        return self._outcome(mutation.spec, mutation.spec.output or parsed.output, row)

    def _task(self, row: Mapping[str, Any]) -> simulator_v2.Task:
        from lemon.learning import simulator_v2

        key = (row.get("id"), row.get("needs"), row.get("draws"))
        if key not in self._tasks:
            self._tasks = {key: simulator_v2.task_from_row(row)}  # rows come task by task
        return self._tasks[key]

    def _outcome(self, spec: Spec, output: str, row: Mapping[str, Any]) -> Outcome:
        from lemon.learning import simulator_v2

        result = simulator_v2.evaluate(spec, output, self._task(row), config=self.rewards)
        return simulated_outcome(result)

    def optimum(self, row: Mapping[str, Any]) -> float | None:
        from lemon.learning import simulator_v2

        return simulator_v2.optimal(self._task(row), config=self.rewards)[1]


class EngineReward(SpecReward):
    """R_orch by executing each spec on the profile's backends (a reuse cache per batch, so a
    spec's mutants re-run only what changed, and that never grows with the run; over the
    persistent call cache unless ``call_cache`` is False or ``$LEMON_CALL_CACHE=off``)."""

    def __init__(
        self,
        decode: Decode,
        *,
        rewards: RewardConfig,
        counterfactual: CounterfactualConfig,
        profile: str,
        profiles_file: str | None = None,
        seed: int = 0,
        call_cache: bool = True,
        worker_max_tokens: int = WORKER_MAX_TOKENS,
    ) -> None:
        super().__init__(decode, rewards=rewards, counterfactual=counterfactual, seed=seed)
        self.call_cache = call_cache
        self.worker_max_tokens = worker_max_tokens
        self._items: dict[str, dict[str, Any]] = {}
        from lemon.capacity import resolve_profile
        from lemon.engine.executor import CallCache

        self.profile = resolve_profile(profile, files=[profiles_file] if profiles_file else [])
        self.cache = CallCache()
        self._backends: dict[Capacity, Backend] | None = None

    def _get_backends(self) -> dict[Capacity, Backend]:
        if self._backends is None:
            from lemon.backends.callcache import open_default_cache, wrap_backends
            from lemon.capacity import build_backends

            cache = open_default_cache() if self.call_cache else None
            self._backends = wrap_backends(build_backends(self.profile), cache)
        return self._backends

    def item(self, row: Mapping[str, Any]) -> Item:
        """The item a row poses: the shipped benchmark item it names (``benchmark`` and
        ``id``), else an item of the row's own ``task`` and gold ``answer``
        (:func:`lemon.data.items.gold_item`), so both are scored by one rule."""
        from lemon.data import Benchmark
        from lemon.data.items import gold_item
        from lemon.scoring import item_index

        try:
            benchmark = Benchmark(str(row.get("benchmark", "")))
        except ValueError:
            benchmark = None
        if benchmark is not None:
            if benchmark.value not in self._items:
                self._items[benchmark.value] = item_index(benchmark)
            found: Item | None = self._items[benchmark.value].get(str(row.get("id", "")))
            if found is not None:
                return found
        return gold_item(str(row.get("task", "")), row.get("answer"), id=str(row.get("id", "row")))

    async def _run(self, spec: Spec, output: str, row: Mapping[str, Any]) -> Outcome:
        from lemon.orchestration import ItemSettings, item_outcome, run_item

        item = self.item(row)
        result = await run_item(
            item,
            spec,
            backends=self._get_backends(),
            settings=ItemSettings(worker_max_tokens=self.worker_max_tokens),
            output=output,
            cache=self.cache,
        )
        prices = resolve_prices(self.rewards.tier_prices, profile=self.profile)
        return await item_outcome(item, result, spec=spec, prices=prices)

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        **kwargs: Any,
    ) -> list[float]:
        if self.cache is not None:  # reuse within one batch (a spec and its mutants) only:
            from lemon.engine.executor import CallCache  # the persistent cache is behind it

            self.cache = CallCache()
        return await super().__call__(prompts, completions, completion_ids, **kwargs)

    async def score(self, index: int, parsed: ParsedSpec, row: Mapping[str, Any]) -> Outcome:
        return await self._run(parsed.spec, parsed.output, row)

    async def score_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome:
        return await self._run(mutation.spec, mutation.spec.output or parsed.output, row)

    async def aclose(self) -> None:
        if self._backends is not None:
            from lemon.capacity import close_backends

            await close_backends(self._backends)
            self._backends = None


class TableReward(EngineReward):
    """R_orch answered from outcome tables (:mod:`lemon.tables`; ``table``: one directory or
    several joined by commas, read as one store of calls): a rollout or mutant whose every
    worker call the tables hold costs no model call; any other call runs live on the
    profile's tiers (``live``) and joins the run's calls, or, without ``live``, fails its agent
    ("not in the outcome table") and the spec scores as a failed run.

    Every worker call read is counted once per run, from the table or live, as if the run had
    started with an empty cache: :attr:`distinct_calls` (the run's cost in worker calls), and
    per batch the calls first read in it (``worker_calls``)."""

    def __init__(
        self,
        decode: Decode,
        *,
        rewards: RewardConfig,
        counterfactual: CounterfactualConfig,
        table: str,
        profile: str,
        profiles_file: str | None = None,
        seed: int = 0,
        live: bool = False,
        worker_max_tokens: int = WORKER_MAX_TOKENS,
    ) -> None:
        super().__init__(
            decode,
            rewards=rewards,
            counterfactual=counterfactual,
            profile=profile,
            profiles_file=profiles_file,
            seed=seed,
            call_cache=False,
            worker_max_tokens=worker_max_tokens,
        )
        from lemon.tables.store import Table

        self.tables = [Table.open(path) for path in table.split(",") if path]
        self.table = self.tables[0]
        """The first table: its tiers' identities key every table's calls (checked equal)."""
        for each in self.tables:
            if each.meta.worker_max_tokens != worker_max_tokens:
                raise ValueError(
                    f"{each.path} was built with {each.meta.worker_max_tokens} tokens per "
                    f"agent; hyperparameters.worker_max_tokens is {worker_max_tokens}: set them "
                    "equal"
                )
            identities = {t: m.identity for t, m in each.meta.models.items()}
            if identities != {t: m.identity for t, m in self.table.meta.models.items()}:
                raise ValueError(
                    f"{each.path} was built on other models than {self.table.path}: tables "
                    "read together must share their tiers"
                )
        self.live = live
        self.cache = None  # type: ignore[assignment]  # the table's call store dedups
        self._store: TableCalls | None = None
        self._counted = 0
        self.carried: tuple[int, int, float] = (0, 0, 0.0)
        """Distinct worker calls, raw and tier-priced tokens the run had read before it was
        resumed in this process (:meth:`carry_over`); added to the run's totals."""

    def _get_backends(self) -> dict[Capacity, Backend]:
        if self._backends is None:
            from lemon.capacity import build_backends
            from lemon.tables.replay import TableCalls, table_backends

            live = build_backends(self.profile) if self.live else None
            calls = TableCalls({k: v for t in self.tables for k, v in t.calls.items()})
            self._backends, self._store = table_backends(self.table, live=live, calls=calls)
        return self._backends

    def carry_over(self, calls: int, raw: int, priced: float) -> None:
        """Continue a resumed run's totals from what it had logged at its checkpoint. The calls
        read before the resume are not known one by one, so one read again counts again."""
        self.carried = (calls, raw, priced)
        self._counted = self.distinct_calls

    @property
    def distinct_calls(self) -> int:
        return self.carried[0] + (0 if self._store is None else len(self._store.read))

    @property
    def distinct_tokens(self) -> tuple[int, float]:
        """The worker tokens (prompt and completion) of every distinct call read in this run,
        from the table or live, and the same tokens tier-priced by the table's prices: the
        run's cost in worker tokens, each call counted once (a call the table lacks and no
        live model answered cost nothing)."""
        if self._store is None:
            return self.carried[1], self.carried[2]
        prices = self.table.meta.tier_prices
        # a table's calls name their tier; a live call its model's identity
        tier_of = {m.identity: t for t, m in self.table.meta.models.items()}
        raw, priced = 0, 0.0
        for key in self._store.read:
            call = self._store.calls.get(key) or self._store.added.get(key)
            if call is None:
                continue
            tier = call.tier if call.tier in prices else tier_of.get(call.tier)
            if tier not in prices:
                raise ValueError(
                    f"call {key}: tier {call.tier!r} has no price in {self.table.path}"
                )
            tokens = call.prompt_tokens + call.completion_tokens
            raw += tokens
            priced += tokens * prices[tier]
        return self.carried[1] + raw, self.carried[2] + priced

    async def paid_mutant(
        self, index: int, mutation: Mutation, parsed: ParsedSpec, row: Mapping[str, Any]
    ) -> Outcome | None:
        """Scored from the table with its reads set aside; kept only if every call it read was
        read before in this run (so it adds nothing to :attr:`distinct_calls`)."""
        if self.live:
            raise ValueError(
                "paid mutants need live calls off: a mutant the table lacks would run live"
            )
        self._get_backends()
        assert self._store is not None
        with self._store.tentative() as reads:
            outcome = await self.score_mutant(index, mutation, parsed, row)
        return outcome if reads <= self._store.read else None

    @property
    def live_calls(self) -> int:
        return 0 if self._store is None else len(self._store.added)

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        **kwargs: Any,
    ) -> list[float]:
        rewards = await super().__call__(prompts, completions, completion_ids, **kwargs)
        total = self.distinct_calls
        self.last.worker_calls = total - self._counted
        self._counted = total
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("worker_calls", float(self.last.worker_calls))
            log_metric("worker_calls_total", float(total))
            log_metric("live_calls_total", float(self.live_calls))
            raw, priced = self.distinct_tokens
            log_metric("worker_tokens_total", float(raw))
            log_metric("worker_priced_tokens_total", priced)
        return rewards
