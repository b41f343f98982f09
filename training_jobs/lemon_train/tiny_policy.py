"""A tiny policy for the simulators on CPU: a small byte-level BPE tokenizer and a tiny Llama.

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

__all__ = ["CHAT_TEMPLATE", "synthetic_corpus", "tiny_policy_model", "train_tokenizer"]

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
    renamed into place, like :func:`lemon_train.common.tiny_test_model`.
    """
    from lemon_train.common import save_tiny_llama

    target = Path(directory)
    if (target / "config.json").is_file():
        return target
    tokenizer = train_tokenizer(vocab_size, seed=seed)
    return save_tiny_llama(
        target, tokenizer, hidden_size=hidden_size, layers=layers, max_positions=1024, seed=seed
    )
