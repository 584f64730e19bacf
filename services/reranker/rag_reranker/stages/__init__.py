"""The rerank chain's stages. The NumPy algorithms (graph_diffusion, gmmr) know nothing of
requests; the ``*_stage`` modules adapt them (and the cross-encoder) to the chain."""
