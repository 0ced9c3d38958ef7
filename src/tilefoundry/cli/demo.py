"""Build a small random-weight model, generate with it, and check it against the reference.

    tilefoundry demo                          # default target: cuda where it runs, else cpu
    tilefoundry demo --target torch --seed 3 --max-new-tokens 64 --dir demo-ckpt/

Writes a Qwen3-shaped causal LM with seeded random weights as a Hugging Face checkpoint
(config.json, model.safetensors, a byte-level tokenizer.json) — nothing is downloaded — then
generates greedily on the target, prints the continuation and tokens/s, and checks the target
against the reference evaluator: the logits of the whole sequence within rel_l2 1e-3 (f32) and
the greedy tokens identical. Exits 1 when the check fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from .model_options import add_target_argument, fail

HELP = "write a small random-weight checkpoint, generate with it and check it against the reference"
PROMPT = "TileFoundry"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the command's arguments."""
    add_target_argument(parser)
    parser.add_argument("--seed", type=int, default=0, help="seeds the random weights (default 0)")
    parser.add_argument("--max-new-tokens", type=int, default=32, metavar="N", help="tokens to generate (32)")
    parser.add_argument(
        "--dir", metavar="DIR", help="write the checkpoint here (default: a temporary directory)"
    )


def run(args: argparse.Namespace) -> int:
    """Write the checkpoint, generate on the target, check against the reference, print the outcome."""
    import torch

    from tilefoundry.check import check, equal, rel_l2
    from tilefoundry.ir.errors import TileFoundryError
    from tilefoundry.models import open_model, write_random_checkpoint
    from tilefoundry.models.runners import default_target
    from tilefoundry.runtime import generate

    if args.max_new_tokens < 1:
        return fail("demo", f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    ckpt = write_random_checkpoint(args.dir or tempfile.mkdtemp(prefix="tilefoundry-demo-"), seed=args.seed)
    explicit = args.target is not None
    target = args.target or default_target()
    try:
        reference = open_model(ckpt, target="reference", device="cpu")
        prompt = torch.tensor(reference.tokenizer.encode(PROMPT).ids, dtype=torch.int64)
        context = prompt.numel() + args.max_new_tokens
        reference = open_model(ckpt, target="reference", device="cpu", context=context)
        opened = open_model(ckpt, target=target, context=context)
    except (FileNotFoundError, ValueError, TileFoundryError) as err:
        return fail("demo", err)
    cfg = opened.config
    print(
        f"demo: wrote {ckpt} ({cfg.architecture}, {cfg.num_layers} layers, hidden {cfg.hidden_size}, "
        f"vocab {cfg.vocab_size}, {cfg.dtype}, seed {args.seed})"
    )
    if not explicit and target == "torch":
        print("demo: no compiled target can run here; using the torch twin", file=sys.stderr)
    result = generate(opened.model, prompt.to(opened.device), max_new_tokens=args.max_new_tokens)
    tokens = result.tokens.cpu()
    print(f"prompt:    {PROMPT!r}")
    print(f"generated: {opened.tokenizer.decode(result.new_tokens.tolist())!r}")
    print(f"tokens:    {result.new_tokens.tolist()}")
    ref_result = generate(reference.model, prompt, max_new_tokens=args.max_new_tokens, progress=False)
    print(
        f"{target}: {result.tokens_per_s:.1f} tokens/s (load and compile {opened.compile_s:.1f} s); "
        f"reference evaluator: {ref_result.tokens_per_s:.1f} tokens/s"
    )

    def sequence_logits(model: object, device: torch.device):
        def run_all(ids: torch.Tensor) -> torch.Tensor:
            caches = model.init_caches(device=device)
            logits, _ = model(*model.prepare_inputs(ids.to(device), 0, caches, device=device))
            return logits

        return run_all

    logits_report = check(
        sequence_logits(opened.model, opened.device),
        sequence_logits(reference.model, reference.device),
        (tokens,),
        expect={"output": [rel_l2(max=1e-3)]},
    )
    tokens_report = check(
        lambda ids: result.new_tokens.cpu(),
        lambda ids: ref_result.new_tokens,
        (tokens,),
        expect={"output": [equal()]},
    )
    print(f"check {target} against the reference (logits of all {tokens.numel()} positions, greedy tokens):")
    print(logits_report)
    print(tokens_report)
    passed = logits_report.passed and tokens_report.passed
    print(f"demo: {'passed' if passed else 'FAILED'}")
    return 0 if passed else 1
