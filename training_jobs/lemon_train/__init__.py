"""LEMON's training entry points (SFT and counterfactual GRPO), run locally and in PyTorchJobs.

The only place torch/transformers/trl training code lives. Built on the core package
``lemon``; it never imports the operator or service packages. ``cli`` is ``lemon train`` (and
``python -m lemon_train``), ``common`` loads bases and publishes policy versions, ``sft`` and
``grpo`` are the two stages, ``distributed`` joins a torchrun/PyTorchJob process group.
"""
