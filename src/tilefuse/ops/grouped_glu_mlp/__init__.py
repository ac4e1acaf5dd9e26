"""grouped_glu_mlp: the mixture-of-experts expert MLP (grouped GEMM + GLU + router probs)."""
