"""What training needs from the core, without torch: the typed training configuration shared by
``lemon train`` (``lemon_train``), the ``LemonTraining`` resource (the operator turns its spec into
this file for the PyTorchJob) and the policy-version format."""
