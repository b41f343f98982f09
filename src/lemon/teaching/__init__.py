"""Teachers: where the policy's SFT data comes from."""

from lemon.teaching.search import (
    FEW_SHOT_TASKS,
    Candidate,
    SearchSettings,
    TeacherStats,
    candidate_specs,
    llm_teacher,
    search_teacher,
    sft_row,
)

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
