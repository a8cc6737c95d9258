"""Model parts that checkpoints carry beyond what transformers defines (NV-Embed's latent-attention pooling head).

Imported lazily, only by code that builds or loads such a model: it imports torch.
"""

from __future__ import annotations

import torch
from torch import nn


class _PreNorm(nn.Module):
    def __init__(self, dim: int, fn: nn.Module, context_dim: int | None = None):
        super().__init__()
        self.fn = fn
        self.norm = nn.LayerNorm(dim)
        self.norm_context = nn.LayerNorm(context_dim) if context_dim is not None else None

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm(x)
        if self.norm_context is not None:
            return self.fn(x, context=self.norm_context(context))
        return self.fn(x)


class _GEGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, gates = x.chunk(2, dim=-1)
        return x * nn.functional.gelu(gates)


class _FeedForward(nn.Module):
    def __init__(self, dim: int, mult: int = 4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim * mult * 2), _GEGLU(), nn.Linear(dim * mult, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _CrossAttention(nn.Module):
    def __init__(self, query_dim: int, context_dim: int, heads: int, dim_head: int):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_kv = nn.Linear(context_dim, inner * 2, bias=False)
        self.to_out = nn.Linear(inner, query_dim, bias=False)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim=-1)

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(t.shape[0], t.shape[1], self.heads, -1).transpose(1, 2)

        out = nn.functional.scaled_dot_product_attention(split(q), split(k), split(v))
        return self.to_out(out.transpose(1, 2).reshape(b, n, -1))


class LatentAttention(nn.Module):
    """NV-Embed's latent-attention pooling (Lee et al., 2025): token states attend to trainable latents,
    a GEGLU feed-forward follows, both residual; the engine then mean-pools over the document tokens.
    Attribute names follow the checkpoint's `latent_attention_model.*` keys so its weights load as they are."""

    def __init__(self, hidden: int, num_latents: int, heads: int, dim_head: int):
        super().__init__()
        self.cross_attend_blocks = nn.ModuleList([
            _PreNorm(hidden, _CrossAttention(hidden, hidden, heads, dim_head), context_dim=hidden),
            _PreNorm(hidden, _FeedForward(hidden)),
        ])
        self.latents = nn.Parameter(torch.randn(num_latents, hidden))

    def forward(self, hiddens: torch.Tensor) -> torch.Tensor:
        attn, ff = self.cross_attend_blocks
        latents = self.latents.unsqueeze(0).expand(hiddens.shape[0], -1, -1).to(hiddens.dtype)
        hiddens = attn(hiddens, context=latents) + hiddens
        return ff(hiddens) + hiddens
