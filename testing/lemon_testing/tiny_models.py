"""Tiny models for the tests, the benchmarks and the experiments (never shipped).

- :func:`tiny_test_model`: a tiny random Llama with the packaged SmolLM2 tokenizer (real chat
  template and vocabulary; trains in seconds on a CPU).
- :func:`tiny_policy_model`: a tiny Llama with a small byte-level BPE tokenizer trained for the
  simulators' prompts and specs, described below.

A tiny policy for the simulators on CPU: a small byte-level BPE tokenizer and a tiny Llama.

SmolLM2's 49k-token vocabulary makes the output layer (and TRL's per-token entropy over it)
dominate a tiny model's step on a shared CPU, and a tiny model spelling ``capacity: large``
in five sub-word tokens often wrote a value that did not match its key. For the simulators
(:mod:`lemon.learning.simulator`, :mod:`lemon.learning.simulator_v2`), a byte-level BPE is
trained on their own prompts and specs. Its pre-tokenizer decides what one token may hold:

- a line break ends a piece (merged into the piece before it);
- a key and its value are separate pieces: ``    capacity: `` | ``large\n``, ``  - name: `` |
  ``math\n``, so one token never stands for two choices (a key token is the decision that the
  field exists, a value token the decision of its value);
- flow-list punctuation stands alone: ``[`` | ``math`` | ``,`` | `` code`` | ``]``, so each
  ``depends_on`` entry is its own token and ``,`` (another entry follows) its own decision;
- words of a task stay separate tokens (a space after a letter starts a new piece).

Merges never cross pieces, and any byte sequence still decodes exactly, so span → token mapping
works as with any tokenizer. Same chat roles and ``<|im_end|>`` end of turn as SmolLM2.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "save_tiny_llama",
    "synthetic_corpus",
    "tiny_policy_model",
    "tiny_test_model",
    "train_tokenizer",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def synthetic_corpus(count: int = 2000, *, seed: int = 0) -> list[str]:
    """Prompts and specs of both simulators (what the policy reads and writes)."""
    from lemon.learning import simulator_v2
    from lemon.learning.simulator import canonical_specs, make_tasks, synthetic_messages
    from lemon.policy.prompt import system_prompt
    from lemon.spec.formatting import format_spec

    rng = random.Random(seed)
    texts = [system_prompt()]
    for task in make_tasks(count, seed=seed):
        texts.append(synthetic_messages(task)[0]["content"])
        texts.append(format_spec(rng.choice(canonical_specs(task))))
    for task_v2 in simulator_v2.make_tasks(count, seed=seed):
        texts.append(synthetic_messages(task_v2.text)[0]["content"])
        texts.append(simulator_v2.teacher_spec(task_v2, rng))
        texts.append(format_spec(simulator_v2.optimal(task_v2)[0]))
    return texts


def train_tokenizer(vocab_size: int = 1024, *, seed: int = 0) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on :func:`synthetic_corpus`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n", behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r": "), behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r"[\[\],]"), behavior="isolated"),
            pre_tokenizers.Split(Regex(r"(?<=[A-Za-z;.]) "), behavior="merged_with_next"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(synthetic_corpus(seed=seed), trainer=trainer)
    fast: Any = PreTrainedTokenizerFast  # its constructor is untyped
    tokenizer = fast(
        tokenizer_object=core,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_policy_model(
    directory: str | os.PathLike[str],
    *,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int = 1024,
    seed: int = 0,
) -> Path:
    """A tiny random Llama with :func:`train_tokenizer`'s tokenizer, saved as an HF directory.

    Idempotent (an existing ``config.json`` is kept); written to a temporary sibling and
    renamed into place, like :func:`tiny_test_model`.
    """
    target = Path(directory)
    if (target / "config.json").is_file():
        return target
    tokenizer = train_tokenizer(vocab_size, seed=seed)
    return save_tiny_llama(
        target, tokenizer, hidden_size=hidden_size, layers=layers, max_positions=1024, seed=seed
    )


def tiny_test_model(
    directory: str | os.PathLike[str],
    *,
    hidden_size: int = 32,
    layers: int = 2,
    seed: int = 0,
    tie_embeddings: bool = True,
) -> Path:
    """A tiny random Llama (float32) with the packaged SmolLM2 tokenizer, saved as an HF
    directory: real chat template and vocabulary, a model that trains in seconds on CPU.

    ``tie_embeddings=False`` gives the output layer weights of its own: a tied random model
    greedily echoes its last input token (newlines after a chat prompt), an untied one writes
    words, which tests of what a backend returns need.

    Idempotent: an existing directory with ``config.json`` is returned as it is; otherwise the
    model is written to a temporary sibling and renamed into place.
    """
    from transformers import AutoTokenizer

    from lemon.backends.converting import converted_packaged_model

    target = Path(directory)
    if (target / "config.json").is_file():
        return target
    tokenizer = AutoTokenizer.from_pretrained(str(converted_packaged_model("bfloat16")))
    return save_tiny_llama(
        target,
        tokenizer,
        hidden_size=hidden_size,
        layers=layers,
        max_positions=4096,
        seed=seed,
        tie_embeddings=tie_embeddings,
    )


def save_tiny_llama(
    target: Path,
    tokenizer: Any,
    *,
    hidden_size: int,
    layers: int,
    max_positions: int,
    seed: int,
    tie_embeddings: bool = True,
) -> Path:
    """A random Llama sized for ``tokenizer``, written with it to a temporary sibling of
    ``target`` and renamed into place (a concurrent writer that wins the race is kept)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from lemon import atomic

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tie_embeddings,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with atomic.staged_directory(target, marker="config.json") as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    return target
