"""``lemon cluster up|status|down``: Kubernetes on one machine.

A real kube-apiserver and etcd (:mod:`lemon_cluster.controlplane`, the binaries the ``k8s``
test tier runs on), LEMON's CRDs installed with the real ``helm`` and the pinned KServe and
Kubeflow CRDs beside them, the operator (``lemon-operator``) and the orchestration service
(``lemon serve``) as local processes, and two local stand-ins, named as such everywhere:

- for KServe (:mod:`lemon_cluster.serving`): each InferenceService whose model this machine
  has (the embedded tiers' models, a policy version's checkpoint) is served by a
  ``lemon serve-model`` process on a loopback port and marked Ready at its URL; one whose model
  it lacks gets a not-ready condition saying so, never a substitute;
- for the Kubeflow training operator and the kubelet (:mod:`lemon_cluster.training`): a
  PyTorchJob's Master runs as a local process from the job's own command, and its end is
  recorded as the Master pod and the job's conditions, so the operator publishes the version.

:mod:`lemon_cluster.launching` starts and stops it all; the state lives under one directory
(:mod:`lemon_cluster.state`); :mod:`lemon_cluster.kube` is the one module that talks to the API
server. The operator and the service are launched through their command lines, never imported
(edge packages do not import each other).
"""
