"""Self-attention on 2D grids: positional encodings, the multi-head layer, encoder stacks (incl. HA).

``layer`` holds the weights, ``ops`` computes it (fast paths and their dispatch), ``reference`` is the plain
formulation every path equals.
"""

from .encodings import Learned2DEncoding, QuadraticEncoding, RelativeEncoding, relative_shifts
from .layer import MultiHeadSelfAttention2d
from .stack import Encoder, EncoderBlock

__all__ = [
    "Encoder",
    "EncoderBlock",
    "Learned2DEncoding",
    "MultiHeadSelfAttention2d",
    "QuadraticEncoding",
    "RelativeEncoding",
    "relative_shifts",
]
