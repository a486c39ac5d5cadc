"""dartflow's Python side of the VLM policy: a tiny Qwen2-VL built offline, token scoring, training."""
