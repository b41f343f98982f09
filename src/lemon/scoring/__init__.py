"""Scoring model outputs: numbers, option letters, HumanEval programs; accuracy with a 95% CI."""

from lemon.scoring.letters import extract_letter
from lemon.scoring.numbers import ExtractedNumber, extract_number, numbers_equal
from lemon.scoring.predictions import Prediction, PredictionError, read_predictions
from lemon.scoring.scorer import (
    ItemScore,
    ScoreReport,
    item_index,
    item_success,
    score_item,
    score_predictions,
)
from lemon.scoring.stats import mean_difference_ci, paired_bootstrap, wilson_interval

__all__ = [
    "ExtractedNumber",
    "ItemScore",
    "Prediction",
    "PredictionError",
    "ScoreReport",
    "extract_letter",
    "extract_number",
    "item_index",
    "item_success",
    "mean_difference_ci",
    "numbers_equal",
    "paired_bootstrap",
    "read_predictions",
    "score_item",
    "score_predictions",
    "wilson_interval",
]
