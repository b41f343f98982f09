"""LEMON: learned orchestration of teams of LLM agents (the core package).

The core knows nothing of Kubernetes, gRPC or training frameworks; the operator, service and
training packages build on it.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
