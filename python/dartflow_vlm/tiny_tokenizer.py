"""A byte-level BPE tokenizer for the tiny Qwen2-VL, trained locally (no hub) on dartflow's corpus.

Byte-level: any text, in any language, encodes without unknown tokens, as with Qwen's own tokenizer.
Qwen2-VL's special tokens keep their names (the chat template, the processor and vLLM look them up by
name), though not their ids.
"""

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from . import corpus

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"
IMAGE_PAD = "<|image_pad|>"
VIDEO_PAD = "<|video_pad|>"

# Qwen2-VL's special tokens, in Qwen's order.
SPECIAL_TOKENS = [
    ENDOFTEXT,
    IM_START,
    IM_END,
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    VISION_START,
    VISION_END,
    "<|vision_pad|>",
    IMAGE_PAD,
    VIDEO_PAD,
]

VOCAB_SIZE = 512


def train_tokenizer(vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Trains the BPE on the fixed corpus; the result depends on nothing else (no seed)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus.lines(), trainer=trainer)
    return tok
