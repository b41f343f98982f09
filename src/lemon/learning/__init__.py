"""What training needs from the core, without torch: the typed training configuration shared by
``lemon train`` (``lemon_train``) and the ``LemonTraining`` resource (the operator renders its
spec into this file for the PyTorchJob), and the orchestration simulator that measures whether
training learns."""
