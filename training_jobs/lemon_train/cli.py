"""``lemon train sft|grpo --config FILE``: the command both stages share.

Registered with ``lemon`` through the ``lemon.commands`` entry-point group, and runnable as
``python -m lemon_train sft --config FILE`` (also under ``torchrun``, which is how a PyTorchJob
runs it). Importing this module is cheap: torch and TRL load only when a command runs.

Exit codes: 0 the version was published (its path printed on stdout by rank 0); 2 a bad config,
data file or base model (one located message per problem on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lemon.cli.options import EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_OK", "EXIT_USAGE", "add_arguments", "cmd_train", "register"]

STAGES = ("sft", "grpo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stage", choices=STAGES, help="sft (warm start) or grpo (counterfactual)")
    parser.add_argument(
        "--config", required=True, help="training config file (YAML/JSON; TrainingConfig)"
    )
    parser.add_argument("--output-dir", help="where the policy version is published")
    parser.add_argument("--data", help="training data (JSONL, or synthetic:<N> for grpo)")
    parser.add_argument("--base-model", help="'packaged', an HF id, a model or policy directory")
    parser.add_argument("--max-steps", type=int, help="optimiser steps (overrides epochs)")
    parser.add_argument(
        "--checkpoint",
        type=int,
        metavar="N",
        help="train nothing: publish the run's checkpoint-N as a version of its own (at "
        "--output-dir, default <output_dir>-atN; labelled --version, default <version>-atN)",
    )
    parser.add_argument("--version", help="with --checkpoint: the published version's label")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train the orchestration policy (SFT or counterfactual GRPO)",
        description="Train the orchestration policy and publish a policy version.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=cmd_train)


def load(args: argparse.Namespace) -> Any:
    """The TrainingConfig the arguments describe (raises ConfigError, located)."""
    from lemon.learning.training_config import ConfigError, TrainingConfig, load_config

    overrides = {  # with --checkpoint, --output-dir is where the step is published, not the run
        "output_dir": None if args.checkpoint is not None else args.output_dir,
        "data": args.data,
        "base_model": args.base_model,
    }
    config = load_config(args.config, **overrides)
    if config.stage != args.stage:
        raise ConfigError(
            f"{args.config}: stage: the file says {config.stage!r}, "
            f"the command is `train {args.stage}`"
        )
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise ConfigError(f"--max-steps: {args.max_steps}: must be at least 1")
        data = config.model_dump()
        data["hyperparameters"]["max_steps"] = args.max_steps
        config = TrainingConfig.model_validate(data)
    return config


def cmd_train(args: argparse.Namespace) -> int:
    from lemon.learning.training_config import ConfigError

    try:
        config = load(args)
    except ConfigError as exc:
        print(f"lemon train: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from lemon_train.distributed import DistributedError, current
    from lemon_train.errors import TrainingError

    if args.version is not None and args.checkpoint is None:
        print("lemon train: --version needs --checkpoint", file=sys.stderr)
        return EXIT_USAGE
    if args.checkpoint is not None:
        from lemon_train.from_checkpoint import publish_checkpoint

        try:
            print(
                publish_checkpoint(
                    config, args.checkpoint, output_dir=args.output_dir, version=args.version
                )
            )
        except TrainingError as exc:
            print(f"lemon train: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK
    try:
        if config.stage == "sft":
            from lemon_train.sft import run
        else:
            try:
                from lemon_train.grpo import run
            except ModuleNotFoundError as exc:
                if exc.name != "lemon_train.grpo":
                    raise
                print("lemon train: grpo: lemon_train.grpo is not installed", file=sys.stderr)
                return EXIT_USAGE
        version = run(config)
    except (TrainingError, DistributedError) as exc:
        print(f"lemon train: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if current().is_main:
        print(version)
    return EXIT_OK
