"""LEMON's gRPC orchestration service (``lemon serve``, ``lemon.v1.Orchestrator``).

A thin adapter over the core: ``servicer`` converts a request (``convert``), admits it and runs
it on the server's tiers or a run's own (``dispatch``, which calls
:func:`lemon.orchestration.run_task`), keeps runs by id (``run_store``) and maps failures to
status codes in one table (``status_codes``). Built on the core package ``lemon`` and the
protocol package ``lemon_api``; it never imports the operator or training packages.
"""
