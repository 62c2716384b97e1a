"""A small Llama-style language model: RMSNorm, GQA attention, SwiGLU MLP or an MoE layer.

Attention reshapes with `-1` heads so the same code runs on tensor-parallel shards
(column-parallel q/k/v hold heads/tp heads locally).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from instrument.config import JobConfig


class Attention(nn.Module):
    def __init__(self, cfg: JobConfig):
        super().__init__()
        self.head_dim = cfg.hidden // cfg.heads
        self.wq = nn.Linear(cfg.hidden, cfg.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.hidden, cfg.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(cfg.hidden, cfg.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * self.head_dim, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        rep = q.shape[1] // k.shape[1]
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """Top-k routed experts, expert-parallel over `group`: each rank holds
    experts/ep of them; tokens travel with all_to_all_single (dispatch, combine)."""

    def __init__(self, cfg: JobConfig, ep: int, ep_rank: int, group=None):
        super().__init__()
        self.k, self.ep, self.group = cfg.top_k, ep, group
        self.n_experts = cfg.experts
        self.local = cfg.experts // ep
        self.first = ep_rank * self.local
        self.router = nn.Linear(cfg.hidden, cfg.experts, bias=False)
        self.experts = nn.ModuleList(MLP(cfg.hidden, cfg.ffn) for _ in range(self.local))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist
        from torch.distributed.nn.functional import all_to_all_single

        b, s, h = x.shape
        tokens = x.reshape(-1, h)
        weights, chosen = torch.softmax(self.router(tokens), dim=-1).topk(self.k, dim=-1)
        flat = chosen.reshape(-1)
        order = flat.argsort(stable=True)
        src_token = torch.arange(tokens.shape[0]).repeat_interleave(self.k)[order]
        routed = tokens[src_token]
        per_expert = torch.bincount(flat, minlength=self.n_experts)
        if self.ep > 1:
            recv_per_expert = torch.empty_like(per_expert)
            dist.all_to_all_single(recv_per_expert, per_expert, group=self.group)
            send = per_expert.view(self.ep, self.local).sum(1).tolist()
            recv = recv_per_expert.view(self.ep, self.local).sum(1).tolist()
            routed = all_to_all_single(
                routed.new_empty(sum(recv), h), routed, recv, send, group=self.group
            )
            counts = recv_per_expert.view(self.ep, self.local)
        else:
            counts = per_expert.view(1, self.local)
        # rows arrive grouped by source rank, then by expert within it
        local_id = torch.arange(self.local).repeat(counts.shape[0])
        row_expert = local_id.repeat_interleave(counts.reshape(-1))
        out = torch.zeros_like(routed)
        for j, expert in enumerate(self.experts):
            idx = (row_expert == j).nonzero(as_tuple=True)[0]
            if idx.numel():
                out = out.index_copy(0, idx, expert(routed[idx]))
        if self.ep > 1:
            out = all_to_all_single(out.new_empty(sum(send), h), out, send, recv, group=self.group)
        gate = weights.reshape(-1)[order].unsqueeze(1).to(out.dtype)
        combined = torch.zeros_like(tokens).index_add(0, src_token, out * gate)
        return combined.view(b, s, h)


class Block(nn.Module):
    def __init__(self, cfg: JobConfig, moe: MoE | None = None):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.hidden)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.RMSNorm(cfg.hidden)
        self.mlp = moe if moe is not None else MLP(cfg.hidden, cfg.ffn)
        self.slow_weight: torch.Tensor | None = None  # set by slow_down
        self.slow_matmuls = 0

    def slow_down(self, cfg: JobConfig, factor: float) -> None:
        """Make this block's forward do about `factor` times its matmul work: extra
        local [tokens, hidden] × [hidden, ffn] matmuls outside autograd (no communication,
        no gradient), as many as (factor − 1) × the block's own forward matmul FLOPs
        need (its projections and MLP; attention scores left out)."""
        h, f, hd = cfg.hidden, cfg.ffn, cfg.hidden // cfg.heads
        block = h * (2 * cfg.heads * hd + 2 * cfg.kv_heads * hd) + 3 * h * f  # MACs/token
        self.slow_matmuls = round((factor - 1) * block / (h * f))
        w = next(p for p in self.parameters())
        self.slow_weight = torch.ones(h, f, device=w.device, dtype=w.dtype) / h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.slow_matmuls:
            with torch.no_grad():
                t = x.detach().reshape(-1, x.shape[-1])
                for _ in range(self.slow_matmuls):
                    t.mm(self.slow_weight)
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    """Embedding → blocks → norm → LM head. `layer_ids`, `first`, `last` build a
    pipeline stage holding only some of it."""

    def __init__(self, cfg: JobConfig, layer_ids=None, first=True, last=True, moe_factory=None):
        super().__init__()
        ids = list(range(cfg.layers)) if layer_ids is None else list(layer_ids)
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden) if first else None
        self.layers = nn.ModuleDict(
            {str(i): Block(cfg, moe_factory() if moe_factory else None) for i in ids}
        )
        self.norm = nn.RMSNorm(cfg.hidden) if last else None
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False) if last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok(x) if self.tok is not None else x
        for i, block in self.layers.items():
            # a region per block, named by its module path (issue 30: where in the model)
            with record_function(f"layers.{i}"):
                h = block(h)
        if self.head is not None:
            h = self.head(self.norm(h))
        return h


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))


def param_counts(cfg: JobConfig) -> dict[str, int]:
    """Ψ of the whole (unsharded) model, the parameters a token passes through, and the
    embedding + head share — counted on a meta-device copy, nothing allocated."""
    with torch.device("meta"):
        if cfg.job == "moe":
            model = Transformer(cfg, moe_factory=lambda: MoE(cfg, ep=1, ep_rank=0))
        else:
            model = Transformer(cfg)
    total = sum(p.numel() for p in model.parameters())
    emb = model.tok.weight.numel() + model.head.weight.numel()
    active = total
    if cfg.job == "moe":
        per_expert = sum(p.numel() for p in MLP(cfg.hidden, cfg.ffn).to("meta").parameters())
        active = total - cfg.layers * (cfg.experts - cfg.top_k) * per_expert
    # every block's attention is is_causal=True (Attention.forward)
    return {"params": total, "active_params": active, "embedding_params": emb, "causal": True}
