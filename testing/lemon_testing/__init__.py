"""LEMON's shared test doubles and fixtures, for the tests, the ``lemon bench`` harnesses and the
experiments; never shipped and never imported by a product package (an import-linter contract
in pyproject.toml says so).

- :mod:`lemon_testing.fake_kube`: the operator's Kubernetes client in memory.
- :mod:`lemon_testing.tiny_models`: tiny random models and tokenizers.
- :mod:`lemon_testing.otlp_receiver`: a real OTLP/HTTP trace receiver on loopback.
- :mod:`lemon_testing.watching`: following every object of a kind on a real API server.
- :mod:`lemon_testing.tools`: grpcurl and ghz, built through the Go module proxy.

The real control plane (kube-apiserver + etcd) is :mod:`lemon_cluster.controlplane`, which
``lemon cluster up`` starts too.
"""
