"""Embed sentences with a BERT encoder checkpoint, as sentence-transformers does.

    tilefoundry embed CKPT_DIR --text "A cat sits on the mat." --text "Another sentence."

Each text is tokenized with the checkpoint's tokenizer.json, encoded, mean-pooled over its tokens
and L2-normalized. Prints one line per text (the first values and the norm); with --json, one
object {"dim", "embeddings", "target"} holding the full vectors.
"""

from __future__ import annotations

import argparse
import json

from .model_options import add_target_argument, fail

HELP = "embed sentences with a BERT encoder checkpoint (e.g. all-MiniLM-L6-v2)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the command's arguments."""
    parser.add_argument("ckpt_dir", metavar="CKPT_DIR", help="a Hugging Face BERT checkpoint directory")
    parser.add_argument("--text", action="append", required=True, help="a sentence to embed (repeatable)")
    add_target_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object with the full vectors")


def run(args: argparse.Namespace) -> int:
    """Open the encoder on the target and print one embedding per --text."""
    import torch

    from tilefoundry.ir.errors import TileFoundryError
    from tilefoundry.models import BertConfig, open_model, read_config
    from tilefoundry.models.runners import default_target

    try:
        cfg = read_config(args.ckpt_dir)
        if not isinstance(cfg, BertConfig):
            raise ValueError(
                f"{args.ckpt_dir!r} holds a {cfg.architecture}; embed needs an encoder (BertModel) — "
                f"try `tilefoundry generate`"
            )
        target = args.target or default_target()
        opened = open_model(args.ckpt_dir, target=target)
        if opened.tokenizer is None:
            raise ValueError(f"{args.ckpt_dir!r} has no tokenizer.json to turn the texts into tokens")
        model, vectors = opened.model, []
        for text in args.text:
            ids = torch.tensor(opened.tokenizer.encode(text).ids, dtype=torch.int64)
            vectors.append(model(*model.prepare_inputs(ids, device=opened.device)).float().cpu())
    except (FileNotFoundError, ValueError, TileFoundryError) as err:
        return fail("embed", err)
    if args.json:
        print(
            json.dumps(
                {"dim": cfg.hidden_size, "embeddings": [v.tolist() for v in vectors], "target": target}
            )
        )
        return 0
    for text, v in zip(args.text, vectors, strict=True):
        head = " ".join(f"{x:+.4f}" for x in v[:6].tolist())
        print(f"{text!r}: [{head} ...] dim {v.numel()}, norm {float(v.norm()):.4f}")
    return 0
