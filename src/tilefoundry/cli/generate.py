"""Generate a continuation with a causal LM from a Hugging Face checkpoint directory.

    tilefoundry generate CKPT_DIR --prompt "Once upon a time" --max-new-tokens 64
    tilefoundry generate CKPT_DIR --prompt-ids 1,2,3 --max-new-tokens 16 --target torch --json

Prints the continuation, decoded when the checkpoint has a tokenizer.json (token ids otherwise),
and a tokens/s line on stderr; with --json, one object:

    {"tokens": [...], "target": "cuda", "context": 512, "compile_s": ...,
     "tokens_per_s": ...,          # the whole run: prompt, decode, graph warm-up and capture
     "prefill_s": ..., "decode_s": ...,
     "decode_tokens_per_s": ...,   # the tokens after the first, over decode_s (graph warm-up and
                                   # capture included; capture_s says how much of it capture took)
     "replay_tokens_per_s": ...,   # the steady rate of graph replays (null without them)
     "cuda_graph": true, "cuda_graph_refusal": null, "capture_s": ...}

Greedy unless --temperature, --top-k or --top-p asks for sampling (seeded by --seed). The target
defaults to cuda where it runs, else the compiled cpu target. The KV cache holds the prompt plus
--max-new-tokens positions, rounded up to a multiple of CONTEXT_MULTIPLE within the model's
context, so nearby lengths share one compiled model. On CUDA the decode steps replay a captured
CUDA graph when they qualify (--cuda-graph insists, --no-cuda-graph runs them eagerly).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .model_options import add_target_argument, fail

HELP = "generate a continuation with a causal LM checkpoint (Llama, Qwen2, Qwen3)"

# KV-cache lengths are rounded up to this many positions (a compiled model's shapes hold it).
CONTEXT_MULTIPLE = 256


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the command's arguments."""
    parser.add_argument("ckpt_dir", metavar="CKPT_DIR", help="a Hugging Face checkpoint directory")
    prompt = parser.add_mutually_exclusive_group(required=True)
    prompt.add_argument(
        "--prompt", metavar="TEXT", help="the prompt text (needs the checkpoint's tokenizer.json)"
    )
    prompt.add_argument("--prompt-ids", metavar="IDS", help="the prompt as comma-separated token ids: 1,2,3")
    parser.add_argument("--max-new-tokens", type=int, required=True, metavar="N", help="tokens to generate")
    add_target_argument(parser)
    parser.add_argument("--greedy", action="store_true", help="take the most likely token (the default)")
    parser.add_argument("--temperature", type=float, metavar="T", help="sample with this temperature")
    parser.add_argument("--top-k", type=int, metavar="K", help="sample among the K most likely tokens")
    parser.add_argument("--top-p", type=float, metavar="P", help="sample from the smallest set of mass P")
    parser.add_argument("--seed", type=int, metavar="S", help="seed the sampling, so a run repeats")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    graphs = parser.add_mutually_exclusive_group()
    graphs.add_argument(
        "--cuda-graph",
        dest="cuda_graph",
        action="store_true",
        default=None,
        help="replay the decode steps from a CUDA graph, or fail saying why not (default: when they qualify)",
    )
    graphs.add_argument(
        "--no-cuda-graph",
        dest="cuda_graph",
        action="store_false",
        default=None,
        help="run every decode step eagerly",
    )


def cache_length(prompt_len: int, max_new_tokens: int, max_context: int) -> int:
    """KV-cache positions for a run: prompt + new tokens, rounded up to CONTEXT_MULTIPLE, at most
    `max_context`.

    Raises:
        ValueError: the prompt alone, or with the new tokens, exceeds `max_context`.
    """
    if prompt_len > max_context:
        raise ValueError(
            f"the prompt has {prompt_len} tokens, longer than the model's context of {max_context} positions"
        )
    needed = prompt_len + max_new_tokens
    if needed > max_context:
        raise ValueError(
            f"the prompt's {prompt_len} tokens + --max-new-tokens {max_new_tokens} = {needed} positions "
            f"exceed the model's context of {max_context}; ask for at most {max_context - prompt_len} new "
            f"tokens"
        )
    return min(-(-needed // CONTEXT_MULTIPLE) * CONTEXT_MULTIPLE, max_context)


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    sampled = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p}
    asked = [f"--{k.replace('_', '-')}" for k, v in sampled.items() if v is not None]
    if args.greedy and asked:
        raise ValueError(f"--greedy and {', '.join(asked)} exclude each other; sampling options sample")
    if args.seed is not None and not asked:
        raise ValueError("--seed seeds sampling; add --temperature, --top-k or --top-p")
    if not asked:
        return {"greedy": True}
    return {"greedy": False, **sampled, "seed": args.seed}


def _prompt_ids(args: argparse.Namespace, tokenizer: Any) -> list[int]:
    if args.prompt_ids is not None:
        try:
            ids = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise ValueError(
                f"--prompt-ids {args.prompt_ids!r}: expected comma-separated ints, like 1,2,3"
            ) from None
        if not ids:
            raise ValueError("--prompt-ids is empty; give at least one token id")
        return ids
    if tokenizer is None:
        raise ValueError(
            f"--prompt needs a tokenizer, but {args.ckpt_dir!r} has no tokenizer.json; "
            f"pass --prompt-ids instead"
        )
    ids = tokenizer.encode(args.prompt).ids
    if not ids:
        raise ValueError(f"--prompt {args.prompt!r} encodes to no tokens")
    return ids


def run(args: argparse.Namespace) -> int:
    """Open the checkpoint on the target, generate, and print the continuation."""
    import torch

    from tilefoundry.ir.errors import TileFoundryError
    from tilefoundry.models import CausalLMConfig, load_tokenizer, open_model, read_config
    from tilefoundry.models.runners import default_target
    from tilefoundry.runtime import generate

    try:
        if args.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
        sampling = _sampling(args)
        cfg = read_config(args.ckpt_dir)
        if not isinstance(cfg, CausalLMConfig):
            raise ValueError(
                f"{args.ckpt_dir!r} holds a {cfg.architecture}, an encoder; generate needs a causal LM "
                f"(LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) — try `tilefoundry embed`"
            )
        tokenizer = load_tokenizer(args.ckpt_dir, cfg)
        prompt = _prompt_ids(args, tokenizer)
        bad = [t for t in prompt if not 0 <= t < cfg.vocab_size]
        if bad:
            raise ValueError(f"prompt token id {bad[0]} is outside the vocabulary [0, {cfg.vocab_size})")
        context = cache_length(len(prompt), args.max_new_tokens, cfg.max_context)
        target = args.target or default_target()
        opened = open_model(args.ckpt_dir, target=target, context=context)
        ids = torch.tensor(prompt, dtype=torch.int64, device=opened.device)
        result = generate(
            opened.model,
            ids,
            max_new_tokens=args.max_new_tokens,
            eos_token_id=cfg.eos_token_ids,
            cuda_graph=args.cuda_graph,
            **sampling,
        )
    except (FileNotFoundError, ValueError, TileFoundryError) as err:
        return fail("generate", err)
    new = result.new_tokens.tolist()
    if args.json:
        print(json.dumps(_record(result, target=target, context=context, compile_s=opened.compile_s)))
        return 0
    print(tokenizer.decode(new) if tokenizer is not None else " ".join(map(str, new)))
    print(_summary(result, target=target, device=opened.device, compile_s=opened.compile_s), file=sys.stderr)
    return 0


def _record(result: Any, *, target: str, context: int, compile_s: float) -> dict[str, Any]:
    """The --json object: the tokens, the whole run's rate and the decode phase's apart."""
    return {
        "tokens": result.new_tokens.tolist(),
        "tokens_per_s": result.tokens_per_s,
        "decode_tokens_per_s": result.decode_tokens_per_s,
        "replay_tokens_per_s": result.replay_tokens_per_s,
        "seconds": result.seconds,
        "prefill_s": result.prefill_seconds,
        "decode_s": result.decode_seconds,
        "compile_s": compile_s,
        "target": target,
        "context": context,
        "cuda_graph": result.cuda_graph,
        "cuda_graph_refusal": result.graph_refusal,
        "capture_s": result.capture_seconds,
    }


def _summary(result: Any, *, target: str, device: Any, compile_s: float) -> str:
    """The stderr line: tokens, time and rates, how the decode steps ran, load and compile time."""
    n = result.new_tokens.numel()
    decode = (
        "" if result.decode_tokens_per_s is None else f"; decode {result.decode_tokens_per_s:.1f} tokens/s"
    )
    if result.cuda_graph:
        steady = result.replay_tokens_per_s
        how = ", CUDA graph" + (f" replays {steady:.1f} tokens/s" if steady is not None else "")
    elif result.graph_refusal is not None and device.type == "cuda":
        how = f", no CUDA graph: {result.graph_refusal}"
    else:
        how = ""
    return (
        f"{n} tokens in {result.seconds:.2f} s ({result.tokens_per_s:.1f} tokens/s) on {target} ({device})"
        f"{decode}{how}; load and compile {compile_s:.1f} s"
    )
