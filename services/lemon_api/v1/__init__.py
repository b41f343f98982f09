"""Generated gRPC stubs of ``services/proto/lemon/v1/orchestrator.proto``.

Regenerate with ``python -m lemon.generate``; ``tests/unit/test_generated.py`` checks they are
fresh. Never edited by hand.
"""
