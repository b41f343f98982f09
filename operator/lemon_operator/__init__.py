"""LEMON's Kubernetes operator (kopf): ``LemonSpec``, ``LemonCapacityProfile``, ``LemonTraining``
and ``LemonPolicy``.

Start it with ``lemon-operator`` (or ``kopf run -m lemon_operator.main --all-namespaces``).
``main`` holds every kopf decorator and unpacks kopf's arguments once; ``specs``,
``capacity_profiles``, ``trainings`` and ``policies`` are the typed handlers, one module per
kind, each reading its object through ``locking``; ``manifests`` builds the objects the operator
owns (pure functions); ``statuses`` computes conditions; ``kube`` is the one module that talks to
the API server (``fake_kube`` is the same interface in memory, for unit tests); ``rbac`` holds
the ClusterRole the operator needs. Built on the core package ``lemon``; it never imports the
service or training packages.
"""

__all__: list[str] = []
