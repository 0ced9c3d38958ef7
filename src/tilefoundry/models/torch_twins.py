"""Hand-written torch runtime twins of the DSL models (seed 000 §1.1).

    Twin = causal_lm_twin(cfg, sem)                    # a @runtime_module class for sem
    twin = Twin().load(SafetensorsResource(ckpt, device="cuda", alias=causal_lm_alias(cfg)))
    check(twin.forward, loaded.forward, inputs, expect=...)   # judged against the LoadedModule

Every kernel is plain torch (matmul, scaled_dot_product_attention, ...) and never runs the
HIR evaluator; the orchestration methods (forward, init_caches, prepare_inputs, ...) are the
semantic Module's own. A function whose parameter list varies with the config (Qwen2's biases,
Qwen3's q/k norms) gets one `TorchKernel`: a RuntimeFunction stand-in whose ABI is the semantic
function's and whose body takes the parameters by name, the optional ones as keyword defaults.
Linear weights arrive as the Module declares them, `(in_features, out_features)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module
from tilefoundry.runtime.abi import entry_abi_of
from tilefoundry.runtime.decorator import runtime_module
from tilefoundry.runtime.function import RuntimeFunction
from tilefoundry.runtime.module import RuntimeModule

from .config import BertConfig, CausalLMConfig


class TorchKernel(RuntimeFunction):
    """A torch body standing in for the semantic function `fn`, called with its params by name."""

    def __init__(self, fn: Function, body: Callable[..., Any]) -> None:
        super().__init__(entry_abi_of(fn))
        self._body = body
        self._names = tuple(p.name for p in self.type.input_params)

    def __call__(self, *args: Any) -> Any:
        return self._body(**dict(zip(self._names, args, strict=True)))


def _linear(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, out_in: bool = False
) -> torch.Tensor:
    # F.linear wants (out, in); an (in, out) weight is read through its transposed view, no copy.
    return F.linear(x, w if out_in else w.t(), b)


def _rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    # Computed in f32 and rounded once, as tf.rms_norm is specified.
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    c, s = cos[positions].float(), sin[positions].float()  # (T, D), broadcast over (1, H, T, D)
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    return (xf * c + torch.cat((-x2, x1), dim=-1) * s).to(x.dtype)


def causal_lm_twin(cfg: CausalLMConfig, sem: Module, linear_layout: str = "in_out") -> type[RuntimeModule]:
    """The torch twin class of `causal_lm(cfg, ..., linear_layout=)`'s Module `sem`."""
    eps, nq, nkv, d = cfg.rms_norm_eps, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    layer_sem = sem.layers[0]
    out_in = linear_layout == "out_in"

    def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return _linear(x, w, b, out_in)

    def attention(
        x,
        cos,
        sin,
        positions,
        pos,
        kv_len,
        k_cache,
        v_cache,
        input_layernorm,
        q_proj,
        k_proj,
        v_proj,
        o_proj,
        q_proj_bias=None,
        k_proj_bias=None,
        v_proj_bias=None,
        q_norm=None,
        k_norm=None,
    ):
        t = x.shape[0]
        h = _rms_norm(x, input_layernorm, eps)
        q = project(h, q_proj, q_proj_bias).view(1, t, nq, d).transpose(1, 2)
        k = project(h, k_proj, k_proj_bias).view(1, t, nkv, d).transpose(1, 2)
        v = project(h, v_proj, v_proj_bias).view(1, t, nkv, d).transpose(1, 2)
        if q_norm is not None:
            q, k = _rms_norm(q, q_norm, eps), _rms_norm(k, k_norm, eps)
        q, k = _rope(q, cos, sin, positions), _rope(k, cos, sin, positions)
        # Out of place: the caches given are state the caller keeps; the step returns new ones.
        k_cache = k_cache.index_copy(2, positions, k)
        v_cache = v_cache.index_copy(2, positions, v)
        # Query i (at position positions[i]) reads keys 0 .. positions[i] within the valid prefix.
        j = torch.arange(k_cache.shape[2], device=x.device)
        mask = (j <= positions[:, None]) & (j < kv_len)
        o = F.scaled_dot_product_attention(
            q.float(), k_cache.float(), v_cache.float(), attn_mask=mask, scale=d**-0.5, enable_gqa=True
        ).to(x.dtype)
        return x + project(o.transpose(1, 2).reshape(t, nq * d), o_proj), k_cache, v_cache

    def mlp(x, post_attention_layernorm, gate_proj, up_proj, down_proj):
        h = _rms_norm(x, post_attention_layernorm, eps)
        return x + project(F.silu(project(h, gate_proj)) * project(h, up_proj), down_proj)

    def embed(ids, embed_tokens):
        return F.embedding(ids, embed_tokens)

    def logits(x, norm, lm_head):
        return project(_rms_norm(x, norm, eps), lm_head)

    return _twin_classes(
        sem, layer_sem, {"attention": attention, "mlp": mlp}, {"embed": embed, "logits": logits}
    )


def _twin_classes(
    sem: Module,
    layer_sem: Module,
    layer_bodies: dict[str, Callable[..., Any]],
    root_bodies: dict[str, Callable[..., Any]],
) -> type[RuntimeModule]:
    """The twin class of `sem` (children `layers.N` alike) from torch bodies by function name."""
    layer_ns = {name: TorchKernel(layer_sem.functions[name], body) for name, body in layer_bodies.items()}
    layer_cls = runtime_module(layer_sem)(type(f"{layer_sem.name}Twin", (), layer_ns))
    root_ns: dict[str, Any] = {
        name: TorchKernel(sem.functions[name], body) for name, body in root_bodies.items()
    }
    root_ns["layers"] = layer_cls
    return runtime_module(sem)(type(f"{sem.name}Twin", (), root_ns))


def bert_twin(cfg: BertConfig, sem: Module) -> type[RuntimeModule]:
    """The torch twin class of `bert_encoder(cfg)`'s Module `sem`."""
    eps, n, d, hidden = cfg.layer_norm_eps, cfg.num_heads, cfg.head_dim, cfg.hidden_size

    def embed(
        ids,
        positions,
        token_types,
        word_embeddings,
        position_embeddings,
        token_type_embeddings,
        embed_norm,
        embed_norm_bias,
    ):
        x = F.embedding(ids, word_embeddings) + F.embedding(positions, position_embeddings)
        x = x + F.embedding(token_types, token_type_embeddings)
        return F.layer_norm(x, (hidden,), embed_norm, embed_norm_bias, eps)

    def pool(x):
        return F.normalize(x.mean(0), p=2, dim=0, eps=1e-12)

    def attention(
        x,
        query,
        query_bias,
        key,
        key_bias,
        value,
        value_bias,
        attn_out,
        attn_out_bias,
        attn_norm,
        attn_norm_bias,
    ):
        t = x.shape[0]

        def heads(w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return _linear(x, w, b).view(1, t, n, d).transpose(1, 2)

        o = F.scaled_dot_product_attention(
            heads(query, query_bias), heads(key, key_bias), heads(value, value_bias)
        )
        o = _linear(o.transpose(1, 2).reshape(t, hidden), attn_out, attn_out_bias)
        return F.layer_norm(x + o, (hidden,), attn_norm, attn_norm_bias, eps)

    def ffn(x, intermediate, intermediate_bias, output, output_bias, output_norm, output_norm_bias):
        up = F.gelu(_linear(x, intermediate, intermediate_bias))
        return F.layer_norm(
            x + _linear(up, output, output_bias), (hidden,), output_norm, output_norm_bias, eps
        )

    return _twin_classes(
        sem, sem.layers[0], {"attention": attention, "ffn": ffn}, {"embed": embed, "pool": pool}
    )
