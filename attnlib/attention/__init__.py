"""Self-attention on 2D grids: positional encodings, the multi-head layer, encoder stacks (incl. HA)."""

from .encodings import Learned2DEncoding, QuadraticEncoding, relative_shifts
from .layer import MultiHeadSelfAttention2d
from .stack import Encoder, EncoderBlock

__all__ = [
    "Encoder",
    "EncoderBlock",
    "Learned2DEncoding",
    "MultiHeadSelfAttention2d",
    "QuadraticEncoding",
    "relative_shifts",
]
