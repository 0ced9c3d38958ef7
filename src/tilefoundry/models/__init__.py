"""tilefoundry.models: Hugging Face checkpoints as DSL models, their torch twins, and opening them.

    from tilefoundry.models import open_model, read_config, causal_lm, bert_encoder

    opened = open_model("ckpt/", target="reference")      # config.json -> Module -> weights
    result = generate(opened.model, ids, max_new_tokens=32)

Supported architectures: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, BertModel.
"""

from .bert import bert_encoder
from .causal_lm import causal_lm
from .checkpoint import DEMO_CONFIG, write_random_checkpoint
from .config import (
    SUPPORTED_ARCHITECTURES,
    BertConfig,
    CausalLMConfig,
    ConfigError,
    RopeConfig,
    config_from_dict,
    read_config,
)
from .hf_names import bert_alias, causal_lm_alias
from .runners import (
    RUNNERS,
    TARGETS,
    OpenedModel,
    default_device,
    linear_layout_of,
    load_tokenizer,
    open_model,
)
from .torch_twins import bert_twin, causal_lm_twin

__all__ = [
    "DEMO_CONFIG",
    "RUNNERS",
    "SUPPORTED_ARCHITECTURES",
    "TARGETS",
    "BertConfig",
    "CausalLMConfig",
    "ConfigError",
    "OpenedModel",
    "RopeConfig",
    "bert_alias",
    "bert_encoder",
    "bert_twin",
    "causal_lm",
    "causal_lm_alias",
    "causal_lm_twin",
    "config_from_dict",
    "default_device",
    "linear_layout_of",
    "load_tokenizer",
    "open_model",
    "read_config",
    "write_random_checkpoint",
]
