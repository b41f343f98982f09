"""LEMON's Kubernetes operator (kopf): ``LemonSpec``, ``LemonCapacityProfile``, ``LemonTraining``,
``LemonPolicy`` and ``LemonRun``.

Start it with ``lemon-operator`` (or ``kopf run -m lemon_operator.main --all-namespaces``).
``main`` holds every kopf decorator and unpacks kopf's arguments once; ``specs``,
``capacity_profiles``, ``trainings``, ``policies`` and ``lemon_runs`` are the typed handlers,
one module per kind; ``reconciling`` is their kit (the object as read under its lock through
``locking``, conditions stamped once, owned objects converged by server-side apply);
``manifests`` builds the objects the operator owns (pure functions); ``statuses`` computes
conditions; ``run_plans`` and ``run_results`` are a run's pure parts; ``kube`` is the one module
that talks to the API server (``lemon_testing.fake_kube``, for tests, is the same in memory) and
``service`` the one that talks to the orchestration service (through ``lemon_api``); ``rbac``
holds the ClusterRole the operator needs. Built on the core package ``lemon``; it never imports
the service or training packages.
"""

__all__: list[str] = []
