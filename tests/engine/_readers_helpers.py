"""A vLLM bench serve result and an SGLang bench_speculative line for the reader tests (test_readers*.py)."""

VLLM_RUN = {"date": "20261201-101010", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "max_concurrency": 16,
            "num_prompts": 320, "output_throughput": 2210.5, "mean_tpot_ms": 6.9, "median_tpot_ms": 6.8,
            "spec_decode_acceptance_length": 2.71, "spec_decode_num_drafts": 1000,
            "mechanism": "eagle3", "draft_len": 3, "context": 1500}
SGLANG = {"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.6, "step_time": 0.0093}
