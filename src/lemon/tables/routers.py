"""Routers on the task text, trained on a train table, routing a test table's items.

They sit with the tables, below both of their users: the reports (:mod:`lemon.evals`) route
with them and the router teacher (:mod:`lemon.teaching.from_tables`) distils them.

Both predict, for each candidate team, the probability that it succeeds on a task, from the
task's text alone (TF-IDF of word 1-2-grams, fitted on the train tasks):

- :class:`KnnRouter`: the mean success of each team on the ``k`` nearest train tasks (cosine),
  smoothed towards the team's train accuracy; published comparisons (arXiv 2505.12601) find
  kNN as good as learned routers;
- :class:`LogisticRouter`: one L2-regularised logistic regression per team.

A router routes with a price λ on cost: per item, the team maximising p(success) − λ · cost
(each team's mean train cost); sweeping λ gives its cost–accuracy curve (:func:`route_curve`).
:func:`shuffled` gives the control: the same router trained on the train outcomes paired with
the wrong tasks (a random permutation of items), which can only learn the teams' averages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["KnnRouter", "LogisticRouter", "Router", "auroc", "route", "route_curve", "shuffled"]

Array = npt.NDArray[np.float64]


class Router(Protocol):
    name: str

    def fit(self, tasks: Sequence[str], success: Array, cost: Array) -> Router: ...

    def predict(self, tasks: Sequence[str]) -> Array:
        """P(success) per task (rows) and team (columns)."""
        ...

    @property
    def mean_cost(self) -> Array: ...


def _vectorizer() -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)


@dataclass
class KnnRouter:
    k: int = 10
    prior: float = 2.0
    """Pseudo-counts of the team's train accuracy mixed into each neighbourhood's mean."""
    name: str = "knn"

    def fit(self, tasks: Sequence[str], success: Array, cost: Array) -> KnnRouter:
        self._vectorizer = _vectorizer()
        self._train = self._vectorizer.fit_transform(list(tasks))
        self._success = success
        self._mean_cost = cost.mean(axis=0)
        return self

    def predict(self, tasks: Sequence[str]) -> Array:
        test = self._vectorizer.transform(list(tasks))
        similarity = (test @ self._train.T).toarray()
        k = min(self.k, similarity.shape[1])
        nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
        local = self._success[nearest].sum(axis=1)  # items × teams
        base = self._success.mean(axis=0)
        return np.asarray((local + self.prior * base) / (k + self.prior), dtype=np.float64)

    @property
    def mean_cost(self) -> Array:
        return np.asarray(self._mean_cost, dtype=np.float64)


@dataclass
class LogisticRouter:
    c: float = 1.0
    """Inverse regularisation strength (scikit-learn's ``C``)."""
    name: str = "logistic"

    def fit(self, tasks: Sequence[str], success: Array, cost: Array) -> LogisticRouter:
        from sklearn.linear_model import LogisticRegression

        self._vectorizer = _vectorizer()
        features = self._vectorizer.fit_transform(list(tasks))
        self._models: list[Any] = []
        for j in range(success.shape[1]):
            labels = success[:, j] >= 0.5
            if labels.all() or not labels.any():  # one class: its rate is the prediction
                self._models.append(float(labels.mean()))
                continue
            model = LogisticRegression(C=self.c, max_iter=2000)
            self._models.append(model.fit(features, labels))
        self._mean_cost = cost.mean(axis=0)
        return self

    def predict(self, tasks: Sequence[str]) -> Array:
        features = self._vectorizer.transform(list(tasks))
        columns = [
            np.full(features.shape[0], m)
            if isinstance(m, float)
            else m.predict_proba(features)[:, 1]
            for m in self._models
        ]
        return np.asarray(np.stack(columns, axis=1), dtype=np.float64)

    @property
    def mean_cost(self) -> Array:
        return np.asarray(self._mean_cost, dtype=np.float64)


def route(probabilities: Array, mean_cost: Array, price: float) -> npt.NDArray[np.int64]:
    """Per item, the team maximising p(success) − price · its mean cost (ties: cheaper)."""
    utility = probabilities - price * mean_cost[None, :]
    best = utility.max(axis=1, keepdims=True)
    ties = np.where(np.isclose(utility, best), mean_cost[None, :], np.inf)
    return np.asarray(ties.argmin(axis=1), dtype=np.int64)


def route_curve(
    probabilities: Array, mean_cost: Array, success: Array, cost: Array, *, prices: int = 120
) -> list[tuple[float, float, npt.NDArray[np.int64]]]:
    """(mean cost, accuracy, choices) on the test items for each price of a sweep."""
    rows = np.arange(success.shape[0])
    spread = float(mean_cost.max() - mean_cost.min()) or 1.0
    out = []
    for price in [0.0, *np.geomspace(1e-5, 5.0 / spread, prices)]:
        pick = route(probabilities, mean_cost, float(price))
        out.append((float(cost[rows, pick].mean()), float(success[rows, pick].mean()), pick))
    return out


def auroc(scores: Array, labels: npt.NDArray[np.bool_]) -> float | None:
    """The area under the ROC curve of ``scores`` for ``labels`` (ties count one half);
    None when one class is empty."""
    positives, negatives = scores[labels], scores[~labels]
    if not len(positives) or not len(negatives):
        return None
    greater = (positives[:, None] > negatives[None, :]).sum()
    ties = (positives[:, None] == negatives[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(positives) * len(negatives)))


def shuffled(
    router: Router,
    tasks: Sequence[str],
    success: Array,
    cost: Array,
    *,
    seed: int,
) -> Router:
    """``router`` trained on the train outcomes of a random permutation of the items: the
    task text no longer says anything about the outcome (the control)."""
    order = np.random.default_rng(seed).permutation(len(tasks))
    return router.fit(tasks, success[order], cost[order])
