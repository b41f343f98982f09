"""Benchmark data: typed items with stable ids, and seeded splits.

The files ship with the package (:data:`PACKAGED_DATA_DIR`); ``$LEMON_DATA_DIR`` overrides them.

See :mod:`lemon.data.splits` for the split rule. Nothing here downloads anything.
"""

from lemon.data.catalog import OFFICIAL_SOURCES, Entry, catalog
from lemon.data.items import Benchmark, ChoiceItem, CodeItem, Item, NumericItem, answer_kind
from lemon.data.loaders import load_items, mmlu_subjects
from lemon.data.paths import (
    DATA_DIR_ENV,
    PACKAGED_DATA_DIR,
    DataError,
    DataLocation,
    PublishedSplit,
    data_dir,
    layout,
    locate_data,
    source_path,
    verify_checksums,
)
from lemon.data.splits import (
    Split,
    SplitConfig,
    is_held_in,
    normalise_question,
    question_template,
    split_items,
)

__all__ = [
    "DATA_DIR_ENV",
    "OFFICIAL_SOURCES",
    "PACKAGED_DATA_DIR",
    "Benchmark",
    "ChoiceItem",
    "CodeItem",
    "DataError",
    "DataLocation",
    "Entry",
    "Item",
    "NumericItem",
    "PublishedSplit",
    "Split",
    "SplitConfig",
    "answer_kind",
    "catalog",
    "data_dir",
    "is_held_in",
    "layout",
    "load_items",
    "locate_data",
    "mmlu_subjects",
    "normalise_question",
    "question_template",
    "source_path",
    "split_items",
    "verify_checksums",
]
