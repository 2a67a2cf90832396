"""LLM inference on Trainium: the serving simulation (:mod:`tlm.inference.serving`)."""
