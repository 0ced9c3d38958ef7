"""The causal-LM family in the DSL: Llama, Qwen2 and Qwen3 built from their config.json.

    cfg = read_config("ckpt/")
    sem = causal_lm(cfg, context=512)                  # a Module; one definition, any token count
    model = sem.load(SafetensorsResource("ckpt/", device="cpu", alias=causal_lm_alias(cfg)))
    result = generate(model, prompt_ids, max_new_tokens=32)

The tree mirrors the checkpoint: a root with `embed` and `logits`, and children `layers.0` ...
`layers.{L-1}`, each with `attention` (RMSNorm, q/k/v projections, Qwen2's q/k/v bias or
Qwen3's per-head q/k RMSNorm, rotary embedding, KV-cache update, grouped-query causal attention,
output projection, residual) and `mlp` (RMSNorm, SwiGLU, residual). Linear weights come in one
of two layouts (`linear_layout`), whichever the target's GEMM atoms read in place:

    "in_out"  (in_features, out_features), used as `x @ w`: the row-major (K, N) operand of the
              cpu atoms. The checkpoint stores `(out, in)`; the alias table transposes each
              weight once, at load.
    "out_in"  (out_features, in_features) as the checkpoint stores it, used as
              `x @ tf.transpose(w, (1, 0))`: the cuda atoms read the (N, K) operand in place (the
              TN GEMM of wgmma, and a decode GEMV whose every row is contiguous), nothing is
              copied at load, and a tied LM head is the embedding table itself.

One step is `forward(ids, cos, sin, positions, pos, kv_len, caches) -> (logits, caches)`:

    ids        (T,) i64          the step's tokens; T is the DimVar `tokens` in [1, context]
    cos, sin   (context, D)      rotary tables, rows indexed by position
    positions  (T,) i64          each token's position, pos .. pos + T - 1
    pos        () i64            where the step's keys and values go in the cache
    kv_len     () i64            valid cache length after the step, pos + T
    caches     ((k, v), ...)     per layer, (1, Hkv, context, D) each: state, passed in and returned
    logits     (T, V)

The model's own `prepare_inputs` builds every input but the token ids, so a caller never
reconstructs positions, tables or lengths; `generate` drives it one token per step through
`prepare_inputs_for_generation`, and a prefill passes a whole prompt to `prepare_inputs`.
"""

import math
from typing import Any

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, func, i64, module, tf
from tilefoundry.ir.dtypes import dtype_of
from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module

from .config import CausalLMConfig
from .rotary import rotary_tables

LINEAR_LAYOUTS = ("in_out", "out_in")


def check_linear_layout(linear_layout: str) -> None:
    """Raise ValueError naming the accepted layouts when `linear_layout` is not one."""
    if linear_layout not in LINEAR_LAYOUTS:
        raise ValueError(f"linear_layout must be one of {', '.join(LINEAR_LAYOUTS)}, got {linear_layout!r}")


def causal_lm(cfg: CausalLMConfig, *, context: int | None = None, linear_layout: str = "in_out") -> Module:
    """The semantic Module of `cfg`'s model with a KV cache of `context` positions.

    Args:
        context: cache length, the most positions one sequence may use; defaults to and may not
            exceed `cfg.max_context`.
        linear_layout: how Linear weights are declared, "in_out" or "out_in" (module docstring).

    Raises:
        ValueError: a context outside [1, cfg.max_context], or an unknown layout.
    """
    context = cfg.max_context if context is None else context
    if not 1 <= context <= cfg.max_context:
        raise ValueError(
            f"causal_lm: context must lie in [1, {cfg.max_context}] (the model's context), got {context}"
        )
    check_linear_layout(linear_layout)
    layer = _decoder_layer(cfg, context, linear_layout)
    embed, logits = _root_functions(cfg, context, linear_layout)
    methods = _methods(cfg, context)
    ns: dict[str, Any] = {"embed": embed, "logits": logits, "layers": (layer,) * cfg.num_layers, **methods}
    return module(type("CausalLM", (), ns))


def _weight(dt: Any, k: int, n: int, linear_layout: str) -> Any:
    """The declared type of a Linear weight from k to n features."""
    return ConstTensor[(k, n) if linear_layout == "in_out" else (n, k), dt]


def _matmul(x: Any, w: Any, linear_layout: str) -> Any:
    """x @ W for a Linear weight in `linear_layout`."""
    return x @ w if linear_layout == "in_out" else x @ tf.transpose(w, (1, 0))


def _decoder_layer(cfg: CausalLMConfig, context: int, linear_layout: str) -> Module:
    """One decoder layer: `attention` (in the variant cfg calls for) and `mlp`."""
    dt, h, d, eps = dtype_of(cfg.dtype), cfg.hidden_size, cfg.head_dim, cfg.rms_norm_eps
    nq, nkv, inter = cfg.num_heads, cfg.num_kv_heads, cfg.intermediate_size
    T = DimVar("tokens", 1, context + 1)
    X = Tensor[(T, h), dt]
    Table = Tensor[(context, d), dt]
    Ids = Tensor[(T,), i64]
    Scalar = Tensor[(), i64]
    Cache = Tensor[(1, nkv, context, d), dt]
    Norm = ConstTensor[(h,), dt]
    HeadNorm = ConstTensor[(d,), dt]
    Wq, Wkv, Wo = (_weight(dt, h, nq * d, linear_layout), _weight(dt, h, nkv * d, linear_layout),
                   _weight(dt, nq * d, h, linear_layout))
    Wup, Wdown = _weight(dt, h, inter, linear_layout), _weight(dt, inter, h, linear_layout)
    Bq, Bkv = ConstTensor[(nq * d,), dt], ConstTensor[(nkv * d,), dt]

    def heads(y: Any, n: int) -> Any:
        # (T, n*D) -> (1, n, T, D)
        return tf.transpose(tf.reshape(y, (1, T, n, d)), (0, 2, 1, 3))

    def attend(
        x: Any,
        q: Any,
        k: Any,
        v: Any,
        cos: Any,
        sin: Any,
        positions: Any,
        pos: Any,
        kv_len: Any,
        k_cache: Any,
        v_cache: Any,
        o_proj: Any,
    ) -> tuple[Any, Any, Any]:
        q = tf.rope(q, cos, sin, positions)
        k = tf.rope(k, cos, sin, positions)
        k_cache = tf.cache_update(k_cache, pos, k)
        v_cache = tf.cache_update(v_cache, pos, v)
        o = tf.attention(q, k_cache, v_cache, scale=1 / math.sqrt(d), causal=True, kv_len=kv_len)
        o = tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (T, nq * d))
        return x + _matmul(o, o_proj, linear_layout), k_cache, v_cache

    def project(hn: Any, w: Any, n: int, bias: Any = None) -> Any:
        y = _matmul(hn, w, linear_layout)
        return heads(y if bias is None else y + bias, n)

    if cfg.qkv_bias:

        @func
        def attention(
            x: X,
            cos: Table,
            sin: Table,
            positions: Ids,
            pos: Scalar,
            kv_len: Scalar,
            k_cache: Cache,
            v_cache: Cache,
            input_layernorm: Norm,
            q_proj: Wq,
            q_proj_bias: Bq,
            k_proj: Wkv,
            k_proj_bias: Bkv,
            v_proj: Wkv,
            v_proj_bias: Bkv,
            o_proj: Wo,
        ):
            hn = tf.rms_norm(x, input_layernorm, eps=eps)
            q = project(hn, q_proj, nq, q_proj_bias)
            k = project(hn, k_proj, nkv, k_proj_bias)
            v = project(hn, v_proj, nkv, v_proj_bias)
            return attend(x, q, k, v, cos, sin, positions, pos, kv_len, k_cache, v_cache, o_proj)

    elif cfg.qk_norm:

        @func
        def attention(
            x: X,
            cos: Table,
            sin: Table,
            positions: Ids,
            pos: Scalar,
            kv_len: Scalar,
            k_cache: Cache,
            v_cache: Cache,
            input_layernorm: Norm,
            q_proj: Wq,
            k_proj: Wkv,
            v_proj: Wkv,
            o_proj: Wo,
            q_norm: HeadNorm,
            k_norm: HeadNorm,
        ):
            hn = tf.rms_norm(x, input_layernorm, eps=eps)
            q = tf.rms_norm(project(hn, q_proj, nq), q_norm, eps=eps)
            k = tf.rms_norm(project(hn, k_proj, nkv), k_norm, eps=eps)
            v = project(hn, v_proj, nkv)
            return attend(x, q, k, v, cos, sin, positions, pos, kv_len, k_cache, v_cache, o_proj)

    else:

        @func
        def attention(
            x: X,
            cos: Table,
            sin: Table,
            positions: Ids,
            pos: Scalar,
            kv_len: Scalar,
            k_cache: Cache,
            v_cache: Cache,
            input_layernorm: Norm,
            q_proj: Wq,
            k_proj: Wkv,
            v_proj: Wkv,
            o_proj: Wo,
        ):
            hn = tf.rms_norm(x, input_layernorm, eps=eps)
            q = project(hn, q_proj, nq)
            k = project(hn, k_proj, nkv)
            v = project(hn, v_proj, nkv)
            return attend(x, q, k, v, cos, sin, positions, pos, kv_len, k_cache, v_cache, o_proj)

    @func
    def mlp(
        x: X,
        post_attention_layernorm: Norm,
        gate_proj: Wup,
        up_proj: Wup,
        down_proj: Wdown,
    ):
        hn = tf.rms_norm(x, post_attention_layernorm, eps=eps)
        gated = tf.silu(_matmul(hn, gate_proj, linear_layout)) * _matmul(hn, up_proj, linear_layout)
        return x + _matmul(gated, down_proj, linear_layout)

    return module(type("DecoderLayer", (), {"attention": attention, "mlp": mlp}))


def _root_functions(cfg: CausalLMConfig, context: int, linear_layout: str) -> tuple[Function, Function]:
    """`embed` (token ids to hidden states) and `logits` (final norm and LM head)."""
    dt, h, v, eps = dtype_of(cfg.dtype), cfg.hidden_size, cfg.vocab_size, cfg.rms_norm_eps
    T = DimVar("tokens", 1, context + 1)
    X = Tensor[(T, h), dt]

    @func
    def embed(ids: Tensor[(T,), i64], embed_tokens: ConstTensor[(v, h), dt]):
        return tf.embedding(embed_tokens, ids)

    # "in_out": its own (hidden, vocab) weight even when tied (the table transposed once at load);
    # "out_in": the (vocab, hidden) table itself.
    @func
    def logits(x: X, norm: ConstTensor[(h,), dt], lm_head: _weight(dt, h, v, linear_layout)):
        return _matmul(tf.rms_norm(x, norm, eps=eps), lm_head, linear_layout)

    return embed, logits


def _methods(cfg: CausalLMConfig, context: int) -> dict[str, Any]:
    """The orchestration methods; one body serves a LoadedModule and every runtime twin."""
    dtype = dtype_of(cfg.dtype).torch
    cache_shape = (1, cfg.num_kv_heads, context, cfg.head_dim)

    def forward(
        self: Any, ids: Any, cos: Any, sin: Any, positions: Any, pos: Any, kv_len: Any, caches: Any
    ) -> Any:
        """One step over the tokens `ids`: returns (logits, caches)."""
        x = self.embed(ids)
        fresh = []
        for layer, (k_cache, v_cache) in zip(self.layers, caches, strict=True):
            x, k_cache, v_cache = layer.attention(x, cos, sin, positions, pos, kv_len, k_cache, v_cache)
            x = layer.mlp(x)
            fresh.append((k_cache, v_cache))
        return self.logits(x), tuple(fresh)

    def init_caches(self: Any, *, device: Any = "cpu") -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        """Empty KV caches, one (k, v) pair per layer; what lies past kv_len is never read."""
        return tuple(
            (
                torch.zeros(cache_shape, dtype=dtype, device=device),
                torch.zeros(cache_shape, dtype=dtype, device=device),
            )
            for _ in range(cfg.num_layers)
        )

    def prepare_inputs(
        self: Any, ids: torch.Tensor, start: int, caches: Any, *, device: Any = "cpu"
    ) -> tuple:
        """forward's inputs for the 1-D token ids `ids` at positions start, start + 1, ...

        Raises:
            ValueError: the tokens would run past the cache's `context` positions.
        """
        n = int(ids.numel())
        if start < 0 or n < 1 or start + n > context:
            raise ValueError(
                f"{cfg.architecture}: {n} token(s) at position {start} do not fit the context of {context} "
                f"positions"
            )
        cos, sin = rotary_tables(
            cfg.rope,
            head_dim=cfg.head_dim,
            max_positions=cfg.max_positions,
            length=context,
            seq_len=start + n,
            dtype=dtype,
            device=device,
        )
        # The positions, then kv_len = start + n: one kernel fills them on the device (a host tensor
        # copied over would wait for the GPU's queue); pos and kv_len are its first and last element.
        steps = torch.arange(start, start + n + 1, dtype=torch.int64, device=device)
        return (
            ids.reshape(n).to(device=device, dtype=torch.int64, copy=True),
            cos,
            sin,
            steps[:n],
            steps[0],
            steps[n],
            caches,
        )

    def prepare_inputs_for_generation(
        self: Any, input_ids: torch.Tensor, step: int, caches: Any, *, device: Any = "cpu"
    ) -> tuple:
        """forward's inputs for the token at `step` of `input_ids` (seed 000 §1.1.2)."""
        return self.prepare_inputs(input_ids[step : step + 1], step, caches, device=device)

    def append_cache(self: Any, caches: Any, fresh: tuple) -> Any:
        """The caches for the next step: the ones this step returned (forward's second result)."""
        (new,) = fresh
        return new

    return {
        "forward": forward,
        "init_caches": init_caches,
        "prepare_inputs": prepare_inputs,
        "prepare_inputs_for_generation": prepare_inputs_for_generation,
        "append_cache": append_cache,
    }
