"""LEMON's gRPC orchestration service (``lemon.v1.Orchestrator``).

Built on the core package ``lemon``; it never imports the operator or training packages.
The server and its generated stubs arrive with their issue; this package exists now so the
layering contracts cover it from the start.
"""
