"""Multi-head self-attention on a (B, H, W, D) grid of tokens with relative positional scores.

Score of head h between query q and key k (Cordonnier et al., eq. (8), the terms the code uses):

    A^(h)_{q,k} = X_q W_qry^(h) (X_k W_key^(h))ᵀ / √d_h   (content, optional)
                + s^(h)(δ = k − q)                          (positional scores of the encoding, optional)
                + u^(h)(q_h, δ)                             (query-positional term of the encoding, optional)

    MHSA(X) = concat_h[softmax(A^(h)) V^(h)] W_out + b_out

(which terms an encoding adds is declared by its ``RelativeEncoding`` interface). What V is:

- ``values="input"`` (the paper's official code): no per-head value projection, every head averages the
  layer's input, V^(h) = X; the concatenation (heads·D) goes through ``out = Linear(heads·D, D_out)``.
  That equals Σ_h softmax(A^(h)) (X W_out^(h)) with W_out^(h) the h-th (D, D_out) slice of W_outᵀ
  (Lemma 1's per-head filter).
- ``values="projected"`` (ViT, the [Re] 16-head models): V^(h) = X W_val^(h) with
  ``value = Linear(D, heads·d_v)``, then ``out = Linear(heads·d_v, D_out)``.

The module holds the weights; ``attnlib.attention.ops.attention`` computes it, on the path it picks from
the inputs (positional-only, explicit, SDPA, bilinear), and ``attnlib.attention.reference`` is the plain
formulation every path equals (``tests/test_attention_paths.py``).

Hierarchical Attention: ``forward(x, keys=...)`` uses the given keys (B, heads, N, d_h), e.g. the first
application's ``compute_keys``, instead of X W_key.

``score_layout``: "intended" (the score above) or "re", the [Re] learned-2D-with-content code, which reads the
(B, H, W, ·) queries and keys as (B, W, H, ·) and permutes the scores back: A_re[q, k] = Ã[σq, σk], σ the
transposition of the H x W grid, Ã the score of the tokens laid on a W x H grid (``ops`` docstring). On a
square grid the query at (i, j) attends with the score of (j, i) against the transposed key, while the
values stay where they are.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnlib.checks import check_choice, check_probability
from attnlib.errors import ConfigError

from . import ops
from .encodings import RelativeEncoding

VALUES = ("input", "projected")
SCORE_LAYOUTS = ("intended", "re")  # "re": the [Re] code's (B, W, H) read of queries / keys


class MultiHeadSelfAttention2d(nn.Module):
    """Multi-head self-attention over an H x W token grid.

    Args:
        dim: input features D.
        heads: number of heads N_h.
        encoding: a ``RelativeEncoding`` (``QuadraticEncoding``, ``Learned2DEncoding``) or None.
        content: add the content term q·k/√d_h (``query`` / ``key`` projections).
        head_dim: d_h of queries/keys (and d_v of projected values); default D (the official code's
            per-head size equals the hidden size, which is why 400 hidden / 9 heads is fine).
        attn_dropout: dropout on the attention probabilities.
        values: what V^(h) is: "input" (X) or "projected" (X W_val^(h)); module docstring.
        out_dim: output features D_out (default D).
        qkv_bias: biases of query / key / value projections (official paper code: True; [Re]: False).
        score_layout: "intended" or "re" (module docstring); "re" needs content and no input-independent
            encoding scores (the [Re] code permutes only the query-based terms).

    Shapes: x (B, H, W, D) -> out (B, H, W, D_out), and with ``return_attention=True`` also the
    probabilities (B, heads, N, N), N = H·W row-major, each row summing to one.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        encoding: RelativeEncoding | None = None,
        content: bool = True,
        head_dim: int | None = None,
        attn_dropout: float = 0.1,
        values: str = "input",
        out_dim: int | None = None,
        qkv_bias: bool = True,
        score_layout: str = "intended",
    ):
        super().__init__()
        check_choice("values", values, VALUES)
        check_choice("score_layout", score_layout, SCORE_LAYOUTS)
        if score_layout == "re" and (not content or (encoding is not None and encoding.has_scores)):
            raise ConfigError(
                "score_layout",
                score_layout,
                "'intended' (the [Re] layout needs content and no head-key scores)",
            )
        if encoding is not None and not isinstance(encoding, RelativeEncoding):
            raise ConfigError("encoding", type(encoding).__name__, "a RelativeEncoding or None")
        if not content and encoding is None:
            raise ConfigError("encoding", None, "an encoding module when content=False")
        if not content and not encoding.has_scores:
            raise ConfigError("content", content, f"True ({encoding!r} scores only with the queries)")
        if encoding is not None and encoding.heads != heads:
            raise ConfigError("encoding.heads", encoding.heads, f"equal to heads={heads}")
        check_probability("attn_dropout", attn_dropout)
        self.dim, self.heads, self.content, self.values = dim, heads, content, values
        self.head_dim = dim if head_dim is None else head_dim
        self.out_dim = dim if out_dim is None else out_dim
        self.attn_dropout, self.score_layout = attn_dropout, score_layout
        self.encoding = encoding
        if content:
            self.query = nn.Linear(dim, heads * self.head_dim, bias=qkv_bias)
            self.key = nn.Linear(dim, heads * self.head_dim, bias=qkv_bias)
        v_dim = dim if values == "input" else self.head_dim
        if values == "projected":
            self.value = nn.Linear(dim, heads * v_dim, bias=qkv_bias)
        self.out = nn.Linear(heads * v_dim, self.out_dim)

    def compute_keys(self, x: Tensor) -> Tensor | None:
        """Keys X W_key: x (B, H, W, D) -> (B, heads, N, d_h); None without content (no keys)."""
        if not self.content:
            return None
        b, h, w, _ = x.shape
        return self.key(x).reshape(b, h * w, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, keys: Tensor | None = None, return_attention: bool = False):
        """x (B, H, W, D) -> out (B, H, W, D_out); with ``return_attention`` (out, probabilities).

        ``keys`` (B, heads, N, d_h): use these keys instead of X W_key (Hierarchical Attention)."""
        out, probs = ops.attention(self, x, keys, return_attention)
        return (out, probs) if return_attention else out

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, heads={self.heads}, head_dim={self.head_dim}, content={self.content}, "
            f"values={self.values!r}, out_dim={self.out_dim}"
            + (f", score_layout={self.score_layout!r}" if self.score_layout != "intended" else "")
        )
