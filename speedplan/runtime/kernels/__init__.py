"""Optional compute paths of the runtime: the Q4_1 CPU matmul, CUDA graphs."""
