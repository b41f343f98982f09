"""Outcome tables: every candidate team's outcome on every item of a benchmark split.

- :mod:`lemon.tables.columns`: the candidate teams (the table's columns);
- :mod:`lemon.tables.store`: the files (``table.json``, ``cells.jsonl``, ``calls.jsonl``);
- :mod:`lemon.tables.build`: choosing the items and filling the missing cells;
- :mod:`lemon.tables.summary`: ``summary.json`` and the consistency checks.
"""
