"""Teachers: where the policy's SFT data comes from (``lemon teacher``).

- :mod:`~lemon.teaching.search`: execute candidate specs per training item, keep the best by
  R_orch;
- :mod:`~lemon.teaching.llm`: few-shot a strong model behind an OpenAI-compatible endpoint;
- :mod:`~lemon.teaching.rows`: the SFT row format and the resumable loop both write through;
- :mod:`~lemon.teaching.summary`: what a search's rows say about the teams it tried.
"""

from lemon.teaching.llm import FEW_SHOT_TASKS, llm_teacher
from lemon.teaching.rows import TeacherStats, sft_row
from lemon.teaching.search import Candidate, SearchSettings, candidate_specs, search_teacher
from lemon.teaching.summary import SearchSummary, summarize_search

__all__ = [
    "FEW_SHOT_TASKS",
    "Candidate",
    "SearchSettings",
    "SearchSummary",
    "TeacherStats",
    "candidate_specs",
    "llm_teacher",
    "search_teacher",
    "sft_row",
    "summarize_search",
]
