"""LEMON's training entry points (SFT and counterfactual GRPO), run locally and in PyTorchJobs.

The only place torch/transformers/trl training code lives. Built on the core package
``lemon``; it never imports the operator or service packages. The trainers arrive with their
issue; this package exists now so the layering contracts cover it from the start.
"""
