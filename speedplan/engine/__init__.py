"""The engine step model: what one step costs in a serving engine (vLLM, SGLang, TensorRT-LLM,
the reference runtime) on top of the op cost model, engine profiles, and their calibration."""
