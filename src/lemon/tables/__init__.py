"""Outcome tables: every candidate team's outcome on every item of a benchmark split.

- :mod:`lemon.policy.columns`: the candidate teams (the table's columns);
- :mod:`lemon.tables.store`: the files (``table.json``, ``cells.jsonl``, ``calls.jsonl``);
- :mod:`lemon.tables.build`: choosing the items and filling the missing cells;
- :mod:`lemon.tables.digest`: ``summary.json`` and the consistency checks;
- :mod:`lemon.tables.replay`: a table as backends, for a fresh clone with no model;
- :mod:`lemon.tables.choice`: the best fixed team per task kind (``fixed_teams.json``).
"""
