"""Relative positional attention scores, one map per head, on an H x W grid of tokens.

Every encoding is a ``RelativeEncoding``: it declares which terms it adds to the attention scores and
computes them; the attention layer (``ops``, ``reference``) reads only that interface. Scores are
(heads, N, N) maps with ``N = H * W`` tokens in row-major order (token ``i * W + j`` is pixel ``(i, j)``).
Entry ``[h, q, k]`` depends only on the shift ``δ = key − query = (k_i − q_i, k_j − q_j)`` (row shift
first, then column shift), as in the official code (``R[i, j, k, l] = grid[k, l] − grid[i, j]``), and on
the query for a query-positional term. The layer adds them to the content scores before the softmax.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.checks import check_choice, check_positive_int
from attnlib.errors import ConfigError


def relative_shifts(size: int, device=None, dtype=None) -> Tensor:
    """Shift ``δ[q, k] = k − q`` along one axis of length ``size``: shape (size, size)."""
    r = torch.arange(size, device=device)
    delta = r.view(1, -1) - r.view(-1, 1)
    return delta if dtype is None else delta.to(dtype)


def _grid_scores(row: Tensor, col: Tensor, cross: Tensor | None = None) -> Tensor:
    """Combine per-axis scores into a (heads, N, N) map.

    row (heads, H, H) indexed [q_i, k_i]; col (heads, W, W) indexed [q_j, k_j];
    cross (heads, H, W, H, W) or None. Returns s[h, (q_i, q_j), (k_i, k_j)] = row + col (+ cross).
    """
    heads, height, width = row.shape[0], row.shape[1], col.shape[1]
    s = row[:, :, None, :, None] + col[:, None, :, None, :]  # (heads, H, W, H, W)
    if cross is not None:
        s = s + cross
    return s.reshape(heads, height * width, height * width)


def axis_indicator(height: int, width: int, device=None, dtype=None) -> Tensor:
    """E (H + W, N), N = H·W: E[a, k] = 1 where a = k_i (row part) or a = H + k_j (column part) of key k.

    ``cat(row, col) @ E`` = row[..., k_i] + col[..., k_j] for every key k: the broadcast sum of a row term
    (…, H) and a column term (…, W) as one GEMM with K = H + W (each output is the exact row + col, one
    rounding as in the addition). On the CPU a broadcast add over an inner dimension of W = 8 and its
    backward (two reductions) run several times slower than this GEMM and the one of its backward."""
    k = torch.arange(height * width, device=device)
    e = torch.zeros(height + width, height * width, device=device, dtype=dtype)
    e[k // width, k] = 1
    e[height + k % width, k] = 1
    return e


def pair_sum(row: Tensor, col: Tensor) -> Tensor:
    """row (…, H) [k_i], col (…, W) [k_j] -> (…, H·W) with out[..., k_i·W + k_j] = row[..., k_i] + col[..., k_j]
    (``axis_indicator``: one GEMM instead of a broadcast add)."""
    e = axis_indicator(row.shape[-1], col.shape[-1], row.device, row.dtype)
    return torch.cat([row, col], -1) @ e


class RelativeEncoding(nn.Module):
    """What an encoding declares to the attention layer (``attnlib.attention.ops`` / ``reference``).

    Score of head h for the query at q and the key at k, δ = k − q, in a layer with content:

        A^(h)_{q,k} = q_h·k_h/√d_h  +  s^(h)(δ)  +  u^(h)(q_h, δ)
                       (content)     ``scores``   ``query_scores``

    - ``heads``: the number of heads it scores.
    - ``has_scores``: whether it has the input-independent term s^(h)(δ), ``scores(H, W)`` (heads, N, N).
      Without it the encoding scores only with the queries, so the layer needs content.
    - ``has_query_scores``: whether, with content, it adds the query-positional term u^(h)(q_h, δ),
      ``query_scores(q, H, W)`` (B, heads, N, N) for queries q (B, heads, N, d_h).

    The same terms in three forms, all with the same values:

    - ``plain_scores`` / ``plain_query_scores``: written as the published code writes them (explicit
      shifts, einsum), laid out (…, H, W, heads, H, W) [query i, j; head; key k, l]; the reference
      formulation (``attnlib.attention.reference``) adds these, so the fast paths are checked against an
      independent computation.
    - ``scores`` / ``query_scores``: the (heads, N, N) maps, N = H·W row-major (the positional-only path,
      plots, the theory chapter).
    - fused, in the layout of a fast path: ``content_bias`` (explicit and SDPA paths) and
      ``linear_query_bias`` (bilinear path).

    The defaults here derive each form from ``scores`` / ``query_scores``; an encoding may override any
    of them with a faster (or, for ``plain_*``, a more literal) computation of the same values.
    """

    heads: int
    has_scores: bool = True
    has_query_scores: bool = False

    def no_weight_decay(self) -> set[str]:
        """Names of this encoding's parameters that take no weight decay (timm's method; `make_optimizer`
        collects it from every module of a model)."""
        return set()

    def logged_state(self) -> dict[str, Tensor]:
        """Tensors that training logs after every epoch (`attnlib.models.logged_state`); none by default."""
        return {}

    def scores(self, height: int, width: int) -> Tensor:
        """Input-independent scores s^(h)(δ): (heads, N, N), N = height * width."""
        raise NotImplementedError(f"{type(self).__name__} has no input-independent scores")

    def query_scores(self, q: Tensor, height: int, width: int) -> Tensor:
        """Query-positional scores u^(h)(q_h, δ): q (B, heads, N, d_h) -> (B, heads, N, N)."""
        raise NotImplementedError(f"{type(self).__name__} has no query-positional scores")

    def plain_scores(self, height: int, width: int) -> Tensor:
        """``scores`` laid out (H, W, heads, H, W)."""
        return self.scores(height, width).view(-1, height, width, height, width).permute(1, 2, 0, 3, 4)

    def plain_query_scores(self, q: Tensor, height: int, width: int) -> Tensor:
        """``query_scores`` for queries q (B, H, W, heads, d_h), laid out (B, H, W, heads, H, W)."""
        b, _, _, heads, d = q.shape
        u = self.query_scores(q.reshape(b, height * width, heads, d).transpose(1, 2), height, width)
        return u.view(b, heads, height, width, height, width).permute(0, 2, 3, 1, 4, 5)

    def content_bias(self, q: Tensor, height: int, width: int) -> Tensor:
        """Everything the encoding adds to q·k/√d_h for queries q (B, heads, N, d_h), in q's dtype:
        the scores (heads, N, N), broadcast over the batch, or with a query term (B, heads, N, N)."""
        if not self.has_query_scores:
            return self.scores(height, width).to(q.dtype)
        bias = self.query_scores(q, height, width)
        return bias + self.scores(height, width).to(q.dtype) if self.has_scores else bias

    def linear_query_bias(
        self, xs: Tensor, w_query: Tensor, b_query: Tensor | None, height: int, width: int
    ) -> Tensor:
        """``content_bias`` for queries q_h = X W_hᵀ + b_h given by their weights, in the (query, head, key)
        layout of the layer's bilinear path: xs (B, N, D), w_query (heads, d_h, D), b_query (heads, d_h) or
        None -> (N·heads, N) (no query term: broadcast over the batch) or (B, N·heads, N)."""
        heads, d = w_query.shape[:2]
        if not self.has_query_scores:
            n = height * width
            return self.scores(height, width).transpose(0, 1).reshape(n * heads, n)
        b, n, _ = xs.shape
        bias = None if b_query is None else b_query.reshape(-1)
        q = F.linear(xs, w_query.reshape(heads * d, -1), bias).view(b, n, heads, d).transpose(1, 2)
        return self.content_bias(q, height, width).transpose(1, 2).reshape(b, n * heads, n)


class QuadraticEncoding(RelativeEncoding):
    """Quadratic (Gaussian) positional encoding of Cordonnier et al., eq. (9) and its generalisation.

    Score of head h for the shift δ (key − query):

        A^(h)_{q,k} = −½ (δ − Δ^(h))ᵀ Σ^(h)−1 (δ − Δ^(h))

    Parameters (both without weight decay, paper App. A: ``no_weight_decay``):

    - ``centers`` (heads, 2): Δ^(h) = (row shift, column shift); init N(0, 2²) (``gaussian_init_mu_std``).
    - ``spreads``: the official ``attention_spreads``.
        * isotropic: (heads,), s_h, with Σ^(h)−1 = s_h² I; init 1 + N(0, 0.01²). The score is then
          −α_h ‖δ − Δ^(h)‖² with **α_h = s_h² / 2** (the paper's eq. (9) width; see ``alpha()``).
        * non-isotropic: (heads, 2, 2), S_h = Σ^(h)−1/2 with Σ^(h)−1 = S_h S_hᵀ (einsum ``hij,hkj->hik``
          in the official code), which keeps Σ−1 positive semi-definite; init I + N(0, 0.01²).

    The official ``GaussianSelfAttention`` computes the same score through the target vector
    u_h = −½(−2(aΔ₁+bΔ₂), −2(cΔ₂+bΔ₁), a, c, 2b) dotted with r_δ = (δ₁, δ₂, δ₁², δ₂², δ₁δ₂); that
    differs from the expression above by the per-head constant ½ΔᵀΣ−1Δ, which the softmax cancels.
    We evaluate the centred form directly (better conditioned at large α).
    """

    def __init__(self, heads: int, isotropic: bool = True, center_std: float = 2.0, spread_std: float = 0.01):
        super().__init__()
        check_positive_int("heads", heads)
        self.heads, self.isotropic = heads, isotropic
        self.centers = nn.Parameter(torch.randn(heads, 2) * center_std)
        if isotropic:
            spreads = 1.0 + torch.randn(heads) * spread_std
        else:
            spreads = torch.eye(2).repeat(heads, 1, 1) + torch.randn(heads, 2, 2) * spread_std
        self.spreads = nn.Parameter(spreads)

    def inverse_covariance(self) -> Tensor:
        """Σ−1 per head: (heads, 2, 2)."""
        if self.isotropic:
            eye = torch.eye(2, device=self.spreads.device, dtype=self.spreads.dtype)
            return self.spreads.pow(2)[:, None, None] * eye  # Σ−1 = s² I
        return torch.einsum("hij,hkj->hik", self.spreads, self.spreads)  # Σ−1 = S Sᵀ

    def no_weight_decay(self) -> set[str]:
        return {"centers", "spreads"}

    def logged_state(self) -> dict[str, Tensor]:
        """The centres Δ (heads, 2) and inverse covariances Σ−1 (heads, 2, 2), whose evolution the trainer
        logs (centers.npz of a run)."""
        return {"centers": self.centers, "inverse_covariance": self.inverse_covariance()}

    def alpha(self) -> Tensor:
        """Isotropic width α_h = s_h² / 2 of the paper's score −α‖δ − Δ‖²: (heads,)."""
        if not self.isotropic:
            raise ConfigError("isotropic", False, "True (alpha is defined for the isotropic encoding)")
        return self.spreads.pow(2) / 2

    def scores(self, height: int, width: int) -> Tensor:
        """Positional scores (heads, N, N), N = height * width, δ = key − query."""
        c = self.centers
        d_row = relative_shifts(height, c.device, c.dtype)[None] - c[:, 0, None, None]  # (heads, H, H)
        d_col = relative_shifts(width, c.device, c.dtype)[None] - c[:, 1, None, None]  # (heads, W, W)
        if self.isotropic:
            half_s2 = -0.5 * self.spreads.pow(2)[:, None, None]  # −½ s²
            return _grid_scores(half_s2 * d_row.pow(2), half_s2 * d_col.pow(2))
        inv = self.inverse_covariance()
        a, b, cc = (inv[:, 0, 0, None, None], inv[:, 0, 1, None, None], inv[:, 1, 1, None, None])
        # −½ [a δ₁² + 2b δ₁δ₂ + c δ₂²] with δ centred on Δ
        cross = -b[:, :, :, None, None] * d_row[:, :, None, :, None] * d_col[:, None, :, None, :]
        return _grid_scores(-0.5 * a * d_row.pow(2), -0.5 * cc * d_col.pow(2), cross)

    def plain_scores(self, height: int, width: int) -> Tensor:
        """The scores written out for every (query, key) pair: (H, W, heads, H, W)."""
        ii, jj = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
        grid = torch.stack([ii, jj], -1).to(self.centers)  # (H, W, 2)
        delta = grid[None, None] - grid[:, :, None, None]  # δ = key − query: (H, W, H, W, 2)
        d = delta[:, :, None] - self.centers[:, None, None, :]  # δ − Δ_h: (H, W, heads, H, W, 2)
        return -0.5 * torch.einsum("ijhkla,hab,ijhklb->ijhkl", d, self.inverse_covariance(), d)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, isotropic={self.isotropic}"


LEARNED_FORMS = ("official", "attnlib", "re")


class _LearnedTables(RelativeEncoding):
    """The parameters of ``Learned2DEncoding`` and their terms per axis, which each of its forms combines: two
    tables ``row_embeddings`` / ``col_embeddings`` of shape (2·max_pos − 1, D_p), indexed by the row / column
    shift δ + max_pos − 1 (``_shift_index``), and, for forms official and attnlib, two head keys
    ``head_keys_row`` / ``head_keys_col`` (D_p → heads); ``_query_slices`` is the part of a query that meets
    each table.

    ``key_bias`` gives the head keys biases (the [Re] code's ``nn.Linear`` default): a constant per head,
    which the softmax cancels (its gradient is zero), kept so that parameter counts equal that code's.
    Parameters per layer: 2·(2·max_pos − 1)·D_p, plus 2·D_p·heads (and 2·heads biases) with head keys.

    The row / column naming follows the official code. (The [Re] code views its (B, H, W, ·) queries as
    (B, W, H, ·) and permutes the score tensor back, which on a square grid pairs the scores of the
    transposed query and key pixels with the values: the layer's ``score_layout="re"``, not this encoding.)
    """

    def __init__(
        self,
        heads: int,
        dim: int,
        max_pos: int = 16,
        pos_dim: int | None = None,
        form: str = "attnlib",
        key_bias: bool = False,
    ):
        super().__init__()
        check_positive_int("heads", heads)
        check_positive_int("max_pos", max_pos)
        check_choice("form", form, LEARNED_FORMS)
        if form == "re" and pos_dim is None and dim % 2:
            raise ConfigError("dim", dim, "an even integer (form 're' splits the query in halves)")
        if pos_dim is None:
            pos_dim = dim // 2 if form == "re" else dim
        self.heads, self.max_pos, self.pos_dim, self.form = heads, max_pos, pos_dim, form
        self.row_embeddings = nn.Embedding(2 * max_pos - 1, pos_dim)
        self.col_embeddings = nn.Embedding(2 * max_pos - 1, pos_dim)
        if form != "re":
            self.head_keys_row = nn.Linear(pos_dim, heads, bias=key_bias)
            self.head_keys_col = nn.Linear(pos_dim, heads, bias=key_bias)

    @torch.no_grad()
    def init_positional(self, std: float) -> None:
        """Draw the tables r and the head keys w from N(0, std²) (head-key biases stay as they are)."""
        keys = (self.head_keys_row, self.head_keys_col) if self.has_scores else ()
        for module in (self.row_embeddings, self.col_embeddings, *keys):
            module.weight.normal_(0.0, std)

    @property
    def has_scores(self) -> bool:
        """Whether the input-independent term w^(h)ᵀ r_δ (the head keys) is part of the score (forms
        official, attnlib); form re scores only with the queries."""
        return self.form != "re"

    @property
    def has_query_scores(self) -> bool:
        """Whether a layer with content adds a query-positional term (forms attnlib, re)."""
        return self.form != "official"

    def _query_slices(self, d: int) -> tuple[slice, slice]:
        """The part of a query of width ``d`` that meets the row table and the column table."""
        p = self.pos_dim
        if self.form == "re":
            if 2 * p != d:
                raise ConfigError("pos_dim", p, f"half the head dimension {d} (form 're')")
            return slice(0, p), slice(p, 2 * p)
        if d != p:
            raise ConfigError("pos_dim", p, f"equal to the head dimension {d}")
        return slice(None), slice(None)

    def _shift_index(self, height: int, width: int) -> tuple[Tensor, Tensor]:
        if max(height, width) > self.max_pos:
            raise ConfigError("max_pos", self.max_pos, f">= the grid size {height}x{width}")
        dev = self.row_embeddings.weight.device
        return (
            relative_shifts(height, dev) + self.max_pos - 1,  # (H, H): table row of δ₁ = k_i − q_i
            relative_shifts(width, dev) + self.max_pos - 1,  # (W, W): table row of δ₂ = k_j − q_j
        )

    def axis_scores(self, height: int, width: int) -> tuple[Tensor, Tensor]:
        """Per-axis positional scores: row (heads, H, H) [h, q_i, k_i] = w_rowᵀ r^row_{k_i − q_i}, col (heads, W, W)."""
        if not self.has_scores:
            raise ConfigError("form", self.form, "'official' or 'attnlib' (form 're' has no head keys)")
        idx_row, idx_col = self._shift_index(height, width)
        # project each table row once, then index by shift (same values and gradients as index-then-project)
        row = self.head_keys_row(self.row_embeddings.weight)  # (2M−1, heads): w_rowᵀ r^row_δ
        col = self.head_keys_col(self.col_embeddings.weight)
        return row[idx_row].permute(2, 0, 1), col[idx_col].permute(2, 0, 1)

    def _query_axis_scores(self, q: Tensor, height: int, width: int) -> tuple[Tensor, Tensor]:
        """Query-positional scores per axis: q_h^row·r^row_{k_i − q_i}/√d_h (B, heads, H, W, H) and
        q_h^col·r^col_{k_j − q_j}/√d_h (B, heads, H, W, W), with q_h^row, q_h^col the parts of the query
        that meet each table (``_query_slices``: the whole query, or its halves for form re)."""
        b, heads, n, d = q.shape
        s_row, s_col = self._query_slices(d)
        idx_row, idx_col = self._shift_index(height, width)
        scale = d**-0.5
        # q·r/√d_h for every table row, in the projection's own (B, N, heads, ·) layout (no copy of q)
        qt = q.transpose(1, 2)
        qr = qt[..., s_row] @ (self.row_embeddings.weight.t() * scale).to(q.dtype)
        qc = qt[..., s_col] @ (self.col_embeddings.weight.t() * scale).to(q.dtype)
        qr, qc = qr.view(b, height, width, heads, -1), qc.view(b, height, width, heads, -1)
        # pick the table row of each key's shift: [b, q_i, q_j, h, k_i] = qr[b, q_i, q_j, h, k_i − q_i + M − 1]
        row = qr.gather(-1, idx_row.view(1, height, 1, 1, height).expand(b, height, width, heads, height))
        col = qc.gather(-1, idx_col.view(1, 1, width, 1, width).expand(b, height, width, heads, width))
        return row.permute(0, 3, 1, 2, 4), col.permute(0, 3, 1, 2, 4)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, max_pos={self.max_pos}, pos_dim={self.pos_dim}, form={self.form!r}"


class Learned2DEncoding(_LearnedTables):
    """Learned relative 2D encoding: two tables r^row, r^col of the row and column shifts and, for two of its
    forms, head keys w_row, w_col (the parameters and their per-axis terms: ``_LearnedTables``), combined into
    the terms the attention layer reads.

    ``form`` says how the tables enter the score of head h for the query at q and the key at k (δ = k − q);
    with content the layer adds q_h·k_h/√d_h to every form (q_h = X_q W_qry^(h) of width d_h):

    - ``"official"`` (Cordonnier et al., ``Learned2DRelativeSelfAttention``): the last term of eq. (8),
      v ᵀ Ŵ_key r_δ, through two maps ``head_keys_row`` / ``head_keys_col`` (D_p → heads):

          A^(h)_{q,k} = w_row^(h)ᵀ r^row_{δ₁} + w_col^(h)ᵀ r^col_{δ₂}

      It does not depend on the input. D_p = the hidden size (official ``position_encoding_size=-1``).
    - ``"attnlib"`` (this library's earlier form): the official term plus, with content, the query-dependent
      term of eq. (8), X_q W_qry Ŵ_key r_δ, as q_h·(r^row_{δ₁} + r^col_{δ₂})/√d_h (D_p = d_h). Without
      content it is the official form. Same parameters as the official form.
    - ``"re"`` ([Re] ``Learned2dRelativeSelfAttention`` with ``query_positional_score: True``): the first
      half of the query scores the row shift and its second half the column shift, tables of width
      D_p = d_h / 2, no head keys:

          A^(h)_{q,k} = (q_h[:D_p]·r^row_{δ₁} + q_h[D_p:]·r^col_{δ₂}) / √d_h

      It needs the queries, i.e. a layer with content.
    """

    def scores(self, height: int, width: int) -> Tensor:
        """Input-independent positional scores (heads, N, N), N = height * width, δ = key − query
        (forms official and attnlib)."""
        return _grid_scores(*self.axis_scores(height, width))

    def query_scores(self, q: Tensor, height: int, width: int) -> Tensor:
        """Query-positional scores q_h^row·r^row_{δ₁}/√d_h + q_h^col·r^col_{δ₂}/√d_h:
        q (B, heads, N, d_h) -> (B, heads, N, N)."""
        row, col = self._query_axis_scores(q, height, width)
        b, heads, n = q.shape[:3]
        return (row[..., :, None] + col[..., None, :]).reshape(b, heads, n, n)  # [q_i,q_j,k_i,k_j]

    def plain_scores(self, height: int, width: int) -> Tensor:
        """The scores as the official code computes them, index then project: (H, W, heads, H, W)."""
        idx_row, idx_col = self._shift_index(height, width)
        row = self.head_keys_row(self.row_embeddings(idx_row))  # (H, H, heads): w_rowᵀ r^row_{k−i}
        col = self.head_keys_col(self.col_embeddings(idx_col))  # (W, W, heads)
        return row.permute(0, 2, 1)[:, None, :, :, None] + col.permute(0, 2, 1)[None, :, :, None, :]

    def plain_query_scores(self, q: Tensor, height: int, width: int) -> Tensor:
        """The query-positional scores written with einsum, q (B, H, W, heads, d_h) -> (B, H, W, heads, H, W):
        attnlib q·(r^row_{k−i} + r^col_{l−j})/√d_h; [Re] (q[:d_h/2]·r^row + q[d_h/2:]·r^col)/√d_h."""
        dh = q.shape[-1]
        s_row, s_col = self._query_slices(dh)
        idx_row, idx_col = self._shift_index(height, width)
        r_row, r_col = self.row_embeddings(idx_row), self.col_embeddings(idx_col)  # (H, H, D_p), (W, W, D_p)
        row = torch.einsum("bijhd,ikd->bijhk", q[..., s_row], r_row)
        col = torch.einsum("bijhd,jld->bijhl", q[..., s_col], r_col)
        return (row[..., :, None] + col[..., None, :]) / math.sqrt(dh)

    def content_bias(self, q: Tensor, height: int, width: int) -> Tensor:
        """Everything the encoding adds to q·k/√d_h for queries q, in q's dtype: ``scores + query_scores``
        (form attnlib), ``query_scores`` (form re) or ``scores`` (form official: (heads, N, N), broadcast
        over the batch).

        q (B, heads, N, d_h) -> (B, heads, N, N), contiguous. The terms split into a row part (depends on
        q and k_i) and a column part (q and k_j); the row parts and the column parts are summed on the small
        per-axis tensors, and the (B, heads, N, N) result is their ``pair_sum`` (one GEMM, written once).
        """
        if not self.has_query_scores:
            return super().content_bias(q, height, width)
        b, heads, n = q.shape[:3]
        row, col = self._query_axis_scores(q, height, width)
        if self.has_scores:
            pos_row, pos_col = (s.to(q.dtype) for s in self.axis_scores(height, width))
            row = row + pos_row[None, :, :, None, :]  # (B, heads, H, W, H) + (heads, H, 1, H)
            col = col + pos_col[None, :, None, :, :]  # (B, heads, H, W, W) + (heads, 1, W, W)
        return pair_sum(row, col).reshape(b, heads, n, n)  # [q_i, q_j, k_i·W + k_j]

    def linear_query_bias(
        self, xs: Tensor, w_query: Tensor, b_query: Tensor | None, height: int, width: int
    ) -> Tensor:
        """``content_bias`` for queries q_h = X W_hᵀ + b_h given by their weights, in the (query, head, key)
        layout of the layer's bilinear path (form official: ``RelativeEncoding``'s (N·heads, N) scores).

        xs (B, N, D); w_query (heads, d_h, D); b_query (heads, d_h) or None -> (B, N·heads, N), rows
        ordered (query, head). Per axis a ∈ {row, col} the score (q_h^a/√d_h + w_a^(h))·r^a_δ (+ the head
        key's bias; no w_a for form re) is a linear map of X: X (W_h^aᵀ r^a_t/√d_h) + (b_h^a/√d_h +
        w_a^(h))·r^a_t for every table row t (one GEMM of width heads·2·(2M−1)), where W_h^a, b_h^a are the
        rows of the query projection that meet table a; each key then picks the row of its shift, as in
        ``query_scores``.
        """
        if not self.has_query_scores:
            return super().linear_query_bias(xs, w_query, b_query, height, width)
        b, n, _ = xs.shape
        heads, d = w_query.shape[:2]
        s_row, s_col = self._query_slices(d)
        idx_row, idx_col = self._shift_index(height, width)
        scale = d**-0.5
        tables = torch.stack([self.row_embeddings.weight, self.col_embeddings.weight])  # (2, T, D_p)
        w_axes = torch.stack([w_query[:, s_row], w_query[:, s_col]], 1)  # (heads, 2, D_p, D)
        u = torch.zeros(heads, 2, self.pos_dim, dtype=tables.dtype, device=tables.device)
        if self.has_scores:
            u = u + torch.stack([self.head_keys_row.weight, self.head_keys_col.weight], 1)  # w_a^(h)
        if b_query is not None:
            u = u + torch.stack([b_query[:, s_row], b_query[:, s_col]], 1) * scale  # b_h^a/√d_h
        weight = torch.einsum("atp,hapd->hatd", tables, w_axes * scale)  # (heads, 2, T, D)
        bias = torch.einsum("atp,hap->hat", tables, u)  # (heads, 2, T)
        if self.has_scores and self.head_keys_row.bias is not None:
            bias = bias + torch.stack([self.head_keys_row.bias, self.head_keys_col.bias], 1)[..., None]
        qr = F.linear(xs, weight.reshape(-1, xs.shape[-1]), bias.reshape(-1))
        qr = qr.view(b, height, width, heads, 2, -1)  # [b, q_i, q_j, h, axis, table row]
        row = qr[..., 0, :].gather(-1, idx_row.view(1, height, 1, 1, height).expand(b, -1, width, heads, -1))
        col = qr[..., 1, :].gather(-1, idx_col.view(1, 1, width, 1, width).expand(b, height, -1, heads, -1))
        return pair_sum(row, col).reshape(b, n * heads, n)  # [q_i, q_j, h, k_i·W + k_j]
