"""What the ``lemon`` commands share: exit codes, the usage error, and each option that more than
one command takes, with the code that turns it into a core object.

Edge packages (``lemon serve``, ``lemon train``) import this module and no other part of the
core's CLI. Cheap to import: everything heavy is imported where an option is turned into an
object.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from lemon.spec.validation import DEFAULT_MAX_AGENTS

if TYPE_CHECKING:
    from lemon.backends.callcache import PersistentCallCache
    from lemon.capacity import CapacityProfile
    from lemon.data.items import Item, NumericItem
    from lemon.policy.inference import LearnedPolicy, PolicyEngine
    from lemon.spec.validation import ParsedSpec, ValidationOptions

__all__ = [
    "DATA_DIR_HELP",
    "DEFAULT_POLICY_TOKENS",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_USAGE",
    "SAMPLE_ID",
    "UsageError",
    "add_call_cache_option",
    "add_data_dir_option",
    "add_item_options",
    "add_json_option",
    "add_policy_options",
    "add_profile_options",
    "add_roles_option",
    "add_spec_options",
    "open_call_cache",
    "open_policy",
    "parse_spec_file",
    "print_warnings",
    "read_spec_text",
    "resolve_profile_option",
    "sample_item",
    "select_items",
    "single_spec",
    "validation_options",
]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
"""0 success; 1 invalid input (a spec, a prediction file) or a failed run; 2 usage errors and
unreadable files."""


class UsageError(Exception):
    """Reported as ``lemon: message`` with exit code 2."""


def add_json_option(
    parser: argparse.ArgumentParser, *, help_text: str = "print one JSON object"
) -> None:
    parser.add_argument("--json", action="store_true", help=help_text)


# ── spec files and the role library ──────────────────────────────────────────────────────


def add_roles_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--roles",
        action="append",
        default=[],
        metavar="FILE",
        help="extra role file (repeatable; also $LEMON_ROLES)",
    )


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    """``--roles`` and ``--max-agents``: what validating a spec file depends on."""
    add_roles_option(parser)
    parser.add_argument(
        "--max-agents",
        type=int,
        default=DEFAULT_MAX_AGENTS,
        metavar="N",
        help=f"largest team allowed (default {DEFAULT_MAX_AGENTS})",
    )


def validation_options(args: argparse.Namespace) -> ValidationOptions:
    from lemon.spec.roles import default_roles
    from lemon.spec.validation import ValidationOptions

    if args.max_agents < 1:
        raise UsageError("--max-agents must be at least 1")
    try:
        roles = default_roles(args.roles)
    except OSError as exc:
        raise UsageError(f"cannot read role file: {exc}") from None
    return ValidationOptions(max_agents=args.max_agents, roles=roles)


def read_spec_text(path: str) -> str:
    """The text of a spec file (``-`` is stdin); unreadable files are usage errors."""
    from lemon.spec.validation import read_text

    if path == "-":
        return sys.stdin.read()
    try:
        return read_text(path)
    except IsADirectoryError:
        raise UsageError(f"cannot read {path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_spec_file(path: str, options: ValidationOptions) -> ParsedSpec:
    from lemon.spec.validation import parse_spec

    return parse_spec(read_spec_text(path), source=path, options=options)


def print_warnings(parsed: ParsedSpec) -> None:
    for warning in parsed.warnings:
        print(warning.render(parsed.source), file=sys.stderr)


def single_spec(args: argparse.Namespace) -> ParsedSpec:
    """Parse the one spec (``args.path``) a command works on, or print its errors and exit 1."""
    from lemon.spec.issues import SpecError

    try:
        parsed = parse_spec_file(args.path, validation_options(args))
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(EXIT_INVALID) from None
    print_warnings(parsed)
    return parsed


# ── capacity profiles ────────────────────────────────────────────────────────────────────


def add_profile_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile", default="embedded", help="capacity profile (default: embedded)"
    )
    parser.add_argument(
        "--profiles",
        action="append",
        default=[],
        metavar="FILE",
        help="profile file (repeatable; also $LEMON_PROFILES)",
    )


def resolve_profile_option(args: argparse.Namespace) -> CapacityProfile:
    """The profile ``--profile`` names (a bad profile file raises its located ``SpecError``)."""
    from lemon.capacity import resolve_profile

    try:
        return resolve_profile(args.profile, files=args.profiles)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    except OSError as exc:
        raise UsageError(f"cannot read profile file: {exc}") from None


# ── benchmark items ──────────────────────────────────────────────────────────────────────

DATA_DIR_HELP = "default: $LEMON_DATA_DIR if set, else the copy shipped with lemon"


def add_data_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=None, metavar="DIR", help=DATA_DIR_HELP)


def add_item_options(
    parser: argparse.ArgumentParser,
    *,
    splits: tuple[str, ...],
    split_help: str | None = None,
    stratified: bool = False,
    benchmark_required: bool = True,
) -> None:
    """``--benchmark``, ``--split`` (the first of ``splits`` is the default), ``--limit``,
    ``--offset`` and ``--data-dir`` (and ``--stratified`` when asked): which benchmark items a
    command works on."""
    parser.add_argument("--benchmark", required=benchmark_required)
    parser.add_argument("--limit", type=int, default=0, help="first N items (0: all)")
    parser.add_argument("--offset", type=int, default=0)
    if stratified:
        parser.add_argument(
            "--stratified",
            action="store_true",
            help="interleave the items across subjects (MMLU) before --offset and --limit",
        )
    parser.add_argument("--split", choices=splits, default=splits[0], help=split_help)
    add_data_dir_option(parser)


def select_items(args: argparse.Namespace) -> list[Item]:
    """The items :func:`add_item_options` selects (none is a usage error)."""
    from lemon.data import Benchmark, DataError, split_items

    try:
        benchmark = Benchmark(args.benchmark)
    except ValueError:
        known = ", ".join(b.value for b in Benchmark)
        raise UsageError(f"unknown benchmark {args.benchmark!r} (known: {known})") from None
    try:
        items = split_items(benchmark, split=args.split, directory=args.data_dir)
    except DataError as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "stratified", False):
        from lemon.evals.selection import stratified

        items = stratified(items)
    items = items[args.offset : args.offset + args.limit if args.limit else None]
    if not items:
        raise UsageError("no items selected")
    return items


# ── the learned policy ───────────────────────────────────────────────────────────────────

DEFAULT_POLICY_TOKENS = 384


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        metavar="PATH|URL|learned",
        help="a trained policy version directory, an OpenAI-compatible URL serving one, or "
        "'learned' (the version shipped with the package, its files' hashes checked)",
    )
    parser.add_argument("--policy-model", default=None, help="served model name (with a URL)")
    parser.add_argument(
        "--policy-attempts",
        type=int,
        default=2,
        help="tries before falling back to the template policy (default 2)",
    )
    parser.add_argument(
        "--policy-max-tokens",
        type=int,
        default=DEFAULT_POLICY_TOKENS,
        help=f"longest spec the policy may write, in tokens (default {DEFAULT_POLICY_TOKENS})",
    )
    parser.add_argument(
        "--policy-constrained",
        action="store_true",
        help="decode the policy under the spec grammar (names unique, depends_on only on "
        "earlier agents, closes within --policy-max-tokens): every spec is valid",
    )
    parser.add_argument(
        "--policy-cost-weight",
        type=float,
        default=None,
        metavar="W",
        help="the cost weight the policy's prompt states (R_orch's cost per 1,000 tier-priced "
        "tokens), for a policy trained on the cost prompt (lemon-policy-prompt/v3): one such "
        "policy traces accuracy against cost as W moves (default: the prompt's own, 0.02)",
    )
    parser.add_argument(
        "--policy-grammar",
        choices=["vllm", "guided", "llamacpp"],
        default="vllm",
        help="with --policy URL --policy-constrained: how the server takes a grammar "
        "(vllm: structured_outputs.grammar; guided: guided_grammar; llamacpp: grammar with "
        "%%llguidance, which needs a llama.cpp built with LLGUIDANCE)",
    )


def open_policy(args: argparse.Namespace, *, engine: PolicyEngine | None = None) -> LearnedPolicy:
    """The learned policy named by ``--policy`` (a version directory or an endpoint URL), on
    ``engine`` (None: :func:`lemon.policy.inference.load_policy`'s default)."""
    from lemon.policy.inference import DEFAULT_DECODING, load_policy
    from lemon.policy.version import PolicyVersionError

    if args.policy_attempts < 1 or args.policy_max_tokens < 1:
        raise UsageError("--policy-attempts and --policy-max-tokens must be at least 1")
    decoding = replace(DEFAULT_DECODING, max_tokens=args.policy_max_tokens)
    if args.policy_constrained:
        from lemon.spec.grammar import SpecGrammar, SpecGrammarError

        try:
            SpecGrammar.build(budget=args.policy_max_tokens)
        except SpecGrammarError as exc:
            raise UsageError(f"--policy-constrained: {exc}") from None
    try:
        return load_policy(
            args.policy,
            model=args.policy_model,
            max_attempts=args.policy_attempts,
            decoding=decoding,
            constrained=args.policy_constrained,
            grammar_dialect=args.policy_grammar,
            engine=engine,
            cost_weight=args.policy_cost_weight,
        )
    except PolicyVersionError as exc:
        raise UsageError(f"--policy: {exc}") from None
    except ValueError as exc:
        if args.policy_cost_weight is None:
            raise
        raise UsageError(f"--policy-cost-weight: {exc}") from None


# ── the persistent call cache ────────────────────────────────────────────────────────────


def add_part_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str) -> None:
    """``--part all|fit|validation``: a train table's items, or its fit or validation part by
    template or sibling (:meth:`lemon.tables.store.Table.part`); ``what`` ends the help."""
    parser.add_argument(
        "--part",
        choices=["all", "fit", "validation"],  # lemon.tables.store.PARTS
        default="all",
        help="a train table's items: all, the fit part, or the validation part (by template "
        f"or sibling: lemon.data.splits.validation_ids){what}",
    )


def add_call_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-call-cache",
        action="store_true",
        help="do not read or write the persistent call cache ($LEMON_CALL_CACHE; lemon cache)",
    )


def open_call_cache(args: argparse.Namespace) -> PersistentCallCache | None:
    """The persistent call cache the workers go through (None with ``--no-call-cache`` or
    ``$LEMON_CALL_CACHE=off``)."""
    from lemon.backends.callcache import open_default_cache

    return None if args.no_call_cache else open_default_cache()


# ── the sample task ──────────────────────────────────────────────────────────────────────

SAMPLE_ID = "gsm8k-train:0"
"""The task ``lemon run`` (and ``lemon client``) solves when given none: GSM8K's first training
item, read from the shipped data so the id, text and expected answer all come from the file."""


def sample_item() -> NumericItem:
    from lemon.data import Benchmark, DataError, NumericItem, PublishedSplit, load_items

    try:
        items = load_items(Benchmark.GSM8K, source=PublishedSplit.TRAIN)
    except DataError as exc:
        raise UsageError(f"no --task given and the sample task cannot be read: {exc}") from None
    (item,) = (item for item in items if item.id == SAMPLE_ID)
    assert isinstance(item, NumericItem)
    return item
