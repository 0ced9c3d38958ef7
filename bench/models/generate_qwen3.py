"""Generate 256 tokens on a Qwen3-1.7B-shaped checkpoint with the compiled CUDA twin, beside HF eager.

Issue 6's H200 figure. Writes a checkpoint with the config of Qwen3-1.7B and random bf16 weights
(transformers' own initialization, seeded, saved with save_pretrained), runs
`tilefoundry generate --target cuda --json` on it in a subprocess (with the decode step replayed
from a CUDA graph, then again with `--no-cuda-graph`), then times Hugging Face
transformers' eager `generate` on the same weights in this process, and prints one JSON object:

    python bench/models/generate_qwen3.py --out /tmp/qwen3 [--max-new-tokens 256] [--layers 28]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

# Qwen3-1.7B's config.json (the architecture only; the weights are random).
QWEN3_1_7B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
    hidden_act="silu",
    attention_bias=False,
    bos_token_id=151643,
    eos_token_id=151645,
)


def write_checkpoint(out: Path, layers: int) -> Path:
    """A Qwen3-1.7B-shaped checkpoint with seeded random bf16 weights, written by transformers."""
    import transformers

    ckpt = out / "qwen3-1.7b-random"
    config = transformers.Qwen3Config(**{**QWEN3_1_7B, "num_hidden_layers": layers})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.Qwen3ForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(ckpt, safe_serialization=True)
    return ckpt


def hf_eager(ckpt: Path, prompt: list[int], new: int) -> dict[str, float | list[int]]:
    """Greedy tokens and tokens/s of transformers' eager generate on the same checkpoint."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16).cuda().eval()
    model.set_attn_implementation("eager")
    ids = torch.tensor([prompt], device="cuda")
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, attention_mask=torch.ones_like(ids))
    with torch.no_grad():
        model.generate(ids, **{**kw, "max_new_tokens": 8, "min_new_tokens": 8})  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(ids, **kw)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    return {"tokens": out[0, len(prompt) :].tolist(), "tokens_per_s": new / seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--layers", type=int, default=QWEN3_1_7B["num_hidden_layers"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ckpt = write_checkpoint(args.out, args.layers)
    prompt = [int(t) for t in torch.randint(0, 150000, (16,), generator=torch.Generator().manual_seed(1))]
    cmd = [
        sys.executable,
        "-m",
        "tilefoundry",
        "generate",
        str(ckpt),
        "--prompt-ids",
        ",".join(map(str, prompt)),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--target",
        "cuda",
        "--json",
    ]
    result: dict[str, object] = {
        "gpu": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "layers": args.layers,
    }
    tokens: list[int] = []
    # The decode step replayed from a CUDA graph (the default), then launched eagerly.
    for label, extra in (("ours", []), ("ours_no_graph", ["--no-cuda-graph"])):
        run = subprocess.run([*cmd, *extra], capture_output=True, text=True)
        if run.returncode != 0:
            result[f"{label}_error"] = run.stderr[-4000:]
            continue
        ours = json.loads(run.stdout.strip().splitlines()[-1])
        tokens = tokens or ours["tokens"]
        result[label] = {k: v for k, v in ours.items() if k != "tokens"}
        result[label]["new_tokens"] = len(ours["tokens"])
    hf = hf_eager(ckpt, prompt, args.max_new_tokens)
    result["hf_eager_tokens_per_s"] = hf["tokens_per_s"]
    if tokens:
        same = 0
        for a, b in zip(tokens, hf["tokens"], strict=False):  # bf16 paths may part
            if a != b:
                break
            same += 1
        result["greedy_prefix_agreeing_with_hf"] = same
    print(json.dumps(result, indent=1))
    return 0 if tokens else 1


if __name__ == "__main__":
    raise SystemExit(main())
