"""LEMON's Kubernetes operator (kopf).

Built on the core package ``lemon``; it never imports the service or training packages.
The reconcilers for LemonSpec, LemonCapacityProfile, LemonTraining and LemonPolicy arrive with
their issues; this package exists now so the layering contracts cover it from the start.
"""
