"""Opening a Hugging Face checkpoint directory as a runnable model on one target.

    opened = open_model("ckpt/", target="torch", context=128)
    result = generate(opened.model, ids, max_new_tokens=32, device=opened.device)

A target names how the Module's functions run, all loading the same directory through
`SafetensorsResource` and the alias table:

    reference   the HIR evaluator (a LoadedModule): slow, exact, the oracle
    torch       the hand-written torch twin (torch_twins.py)
    cpu, cuda   the compiled twin, `tilefoundry.twin(sem, target=...)`

RUNNERS maps each name to the function that builds the runnable model; a compiled target is
refused with TargetUnavailable, naming why, when its compiler is not installed or cannot run here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from tilefoundry.ir.errors import TargetUnavailable, TileFoundryError
from tilefoundry.ir.module import Module
from tilefoundry.runtime.resource import SafetensorsResource

from .bert import bert_encoder
from .causal_lm import causal_lm
from .config import BertConfig, CausalLMConfig, ModelConfig, read_config
from .hf_names import bert_alias, causal_lm_alias
from .torch_twins import bert_twin, causal_lm_twin

TARGETS = ("reference", "torch", "cpu", "cuda")

# A runner builds the runnable model: (config, Module, resource, compile options) -> LoadedModule
# or RuntimeModule.
Runner = Callable[[ModelConfig, Module, SafetensorsResource, Mapping[str, Any]], Any]


def _reference(
    cfg: ModelConfig, sem: Module, resource: SafetensorsResource, options: Mapping[str, Any]
) -> Any:
    return sem.load(resource)


def _torch(cfg: ModelConfig, sem: Module, resource: SafetensorsResource, options: Mapping[str, Any]) -> Any:
    twin_class = causal_lm_twin(cfg, sem) if isinstance(cfg, CausalLMConfig) else bert_twin(cfg, sem)
    return twin_class().load(resource)


def _compiled(target: str) -> Runner:
    def run(cfg: ModelConfig, sem: Module, resource: SafetensorsResource, options: Mapping[str, Any]) -> Any:
        try:
            from tilefoundry import twin
        except ImportError as err:
            raise TargetUnavailable(
                f"target {target!r}: the compiler (tilefoundry.twin) is not installed ({err})",
                where=target,
                expected="an installed compiler",
                got=str(err),
            ) from None
        return twin(sem, target=target, options=options).load(resource)

    return run


# How each target declares a causal LM's Linear weights (causal_lm.py): the layout its GEMM atoms
# read in place. cuda's atoms take the checkpoint's (out, in) as the K-major operand; the cpu
# atoms and the torch twin take (in, out) (transposed once at load).
LINEAR_LAYOUT: dict[str, str] = {"cuda": "out_in"}


def linear_layout_of(target: str) -> str:
    """The Linear-weight layout a causal LM compiled for `target` declares."""
    return LINEAR_LAYOUT.get(target, "in_out")


RUNNERS: dict[str, Runner] = {
    "reference": _reference,
    "torch": _torch,
    "cpu": _compiled("cpu"),
    "cuda": _compiled("cuda"),
}


@dataclass(frozen=True)
class OpenedModel:
    """A checkpoint opened on one target.

    Attributes:
        config: what config.json describes.
        sem: the semantic Module built from it.
        model: the runnable reading (LoadedModule) or twin (RuntimeModule), weights loaded.
        target: the target name it runs on.
        device: where its weights sit and its inputs belong.
        compile_s: seconds spent building and loading the model.
        tokenizer: the checkpoint's tokenizer.json, if it has one (a `tokenizers.Tokenizer`).
    """

    config: ModelConfig
    sem: Module
    model: Any
    target: str
    device: torch.device
    compile_s: float
    tokenizer: Any


class CheckpointError(TileFoundryError):
    """A checkpoint file that cannot be read (corrupt, truncated): `where` names the file."""


def default_target() -> str:
    """The target a command runs when none is named: cuda where it can run, else cpu.

    A compiled target counts only when it is installed and can compile and run here.
    """
    from tilefoundry.ir.target import get_target

    for name in ("cuda", "cpu"):
        try:
            availability = get_target(name).availability
        except TargetUnavailable:
            continue
        if availability.can_compile and availability.can_run:
            return name
    return "torch"


def default_device(target: str) -> torch.device:
    """Where a target runs by default: cpu for "cpu", cuda for "cuda", else cuda when present."""
    if target == "cpu" or (target != "cuda" and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda")


def open_model(
    ckpt_dir: str | Path,
    *,
    target: str = "reference",
    device: torch.device | str | None = None,
    context: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> OpenedModel:
    """Read config.json, build the Module, and load the weights for `target`.

    Args:
        target: one of TARGETS.
        device: defaults to `default_device(target)`.
        context: the KV-cache length of a causal LM (default: its whole context); ignored for
            an encoder.
        options: compile options of a compiled target (`tilefoundry.compile`'s), e.g.
            {"batch_launches": False}; refused by the reference and torch targets.

    Raises:
        FileNotFoundError: a missing directory, config.json or weights file.
        ConfigError: an unsupported architecture (naming the supported ones) or a bad field.
        ValueError: an unknown target, or a context the model does not have.
        TargetUnavailable: the target cannot run here, naming why.
        CheckpointError: a weights file is corrupt or truncated.
        LoadError: a weight is missing or has the wrong shape or dtype.
    """
    if target not in RUNNERS:
        raise ValueError(f"unknown target {target!r}; accepted: {', '.join(RUNNERS)}")
    if options and target not in ("cpu", "cuda"):
        raise ValueError(
            f"options {sorted(options)}: target {target!r} compiles nothing; only cpu and cuda take them"
        )
    cfg = read_config(ckpt_dir)
    dev = torch.device(device) if device is not None else default_device(target)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise TargetUnavailable(
            f"target {target!r} on {dev}: no CUDA device is available", where=target, expected="a CUDA device"
        )
    start = time.perf_counter()
    if isinstance(cfg, CausalLMConfig):
        layout = linear_layout_of(target)
        sem = causal_lm(cfg, context=context, linear_layout=layout)
        alias = causal_lm_alias(cfg, layout)
    else:
        sem = bert_encoder(cfg)
        alias = bert_alias(cfg, prefix=_bert_prefix(Path(ckpt_dir)))
    try:
        resource = SafetensorsResource(str(ckpt_dir), device=str(dev), alias=alias)
        model = RUNNERS[target](cfg, sem, resource, dict(options or {}))
    except SafetensorError as err:
        files = ", ".join(sorted(p.name for p in Path(ckpt_dir).glob("*.safetensors")))
        raise CheckpointError(
            f"checkpoint {str(ckpt_dir)!r}: a weights file ({files}) is corrupt or truncated: {err}",
            where=str(ckpt_dir),
            expected="complete safetensors files",
            got=str(err),
        ) from None
    return OpenedModel(
        cfg, sem, model, target, dev, time.perf_counter() - start, load_tokenizer(ckpt_dir, cfg)
    )


def _bert_prefix(ckpt_dir: Path) -> str:
    """ "bert." when the checkpoint stores the encoder under it (a task model's BertModel)."""
    return "bert." if any(k.startswith("bert.embeddings.") for k in checkpoint_keys(ckpt_dir)) else ""


def checkpoint_keys(ckpt_dir: str | Path) -> list[str]:
    """The tensor names a checkpoint directory holds (its index, or its one safetensors file)."""
    path = Path(ckpt_dir)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        return sorted(json.loads(index.read_text()).get("weight_map", {}))
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        return sorted(f.keys())


def load_tokenizer(ckpt_dir: str | Path, cfg: ModelConfig | None = None) -> Any:
    """The checkpoint's tokenizer.json as a `tokenizers.Tokenizer`, or None when it has none.

    Padding is switched off. An encoder's tokenizer truncates to sentence-transformers'
    max_seq_length when the checkpoint states one (sentence_bert_config.json).
    """
    path = Path(ckpt_dir)
    if not (path / "tokenizer.json").is_file():
        return None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.no_padding()  # one sequence per call; a padded tail would be read as tokens
    st_config = path / "sentence_bert_config.json"
    if isinstance(cfg, BertConfig):
        limit = cfg.max_positions
        if st_config.is_file():
            limit = min(limit, int(json.loads(st_config.read_text()).get("max_seq_length", limit)))
        tok.enable_truncation(limit)
    return tok
