"""Loading a model directory as a `ModelBundle`: the target model, its MTP depths, tokenizer and layout.

The same code path serves the bundled fixtures and a real downloaded checkpoint of the supported
families (single-file or sharded safetensors). Weights are read with safetensors only, never pickle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import llguidance
import torch
import transformers
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    DynamicCache,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from harness.contract.dtypes import DTYPE_NAMES
from harness.contract.errors import CheckpointError, HarnessError
from harness.contract.paths import resolve_model_path
from harness.models.attention import EXACT_ATTENTION
from harness.models.checkpoint import SafetensorsCheckpoint, check_checkpoint_files, open_checkpoint, read_config_json
from harness.models.experts import fuse_experts
from harness.models.gated_deltanet import has_recurrent_layers, install_gated_deltanet_forward
from harness.models.grammar_tokenizer import grammar_tokenizer
from harness.models.layouts import DEEPSEEK_V3, MIMO, LayoutMatch, depth_tensor_name, detect_layout
from harness.models.mtp_depth import build_depths
from harness.models.numerics import use_float64_arithmetic
from harness.models.quiet import quiet_transformers
from harness.models.target_hidden import mark_pre_norm_reader
from harness.models.token_bytes import token_bytes
from harness.models.weights_guard import refuse_weights

DTYPES = {name: getattr(torch, canonical) for name, canonical in DTYPE_NAMES.items()}

# Model types whose config transformers does not know, mapped to the architecture that runs them.
# MiMo-7B is a Qwen2 target with MTP layers under model.mtp_layers (its own remote code on the hub).
_TARGET_MODEL_TYPE = {"mimo": "qwen2"}


class CheckpointFacts:
    """What a model directory's config says, for a bundle and a card alike (`path` and `config` attributes)."""

    path: Path
    config: PretrainedConfig
    tokenizer: PreTrainedTokenizerBase

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def vocab_size(self) -> int:
        return int(self.config.vocab_size)

    @property
    def max_context(self) -> int:
        return int(self.config.max_position_embeddings)

    def token_bytes(self) -> tuple[bytes, ...]:
        """Each token's bytes under the tokenizer (token_bytes.py), built once: how stop strings are read."""
        if "_token_bytes" not in self.__dict__:
            self.__dict__["_token_bytes"] = token_bytes(self.tokenizer, self.vocab_size)
        return self.__dict__["_token_bytes"]

    def grammar_tokenizer(self) -> llguidance.LLTokenizer:
        """The tokenizer as llguidance reads it (grammar_tokenizer.py), built once: how constraints are masked."""
        if "_grammar_tokenizer" not in self.__dict__:
            self.__dict__["_grammar_tokenizer"] = grammar_tokenizer(self.tokenizer, self.vocab_size)
        return self.__dict__["_grammar_tokenizer"]


@dataclass(frozen=True)
class ModelBundle(CheckpointFacts):
    """A target model with its MTP depths, ready for decoding (eval mode, no gradients)."""

    path: Path
    target: PreTrainedModel
    depths: nn.ModuleList
    tokenizer: PreTrainedTokenizerBase
    layout: LayoutMatch
    config: PretrainedConfig
    device: torch.device
    dtype: torch.dtype

    has_weights = True  # a ModelCard (harness/models/card.py) stands for it without them

    @cached_property
    def is_hybrid(self) -> bool:
        """Whether the target has recurrent (linear-attention) layers besides attention (Qwen3-Next)."""
        return has_recurrent_layers(self.target)

    def new_target_cache(self) -> DynamicCache:
        """An empty cache for the target; a hybrid's knows which layers are attention (for its masks)."""
        return DynamicCache(config=self.config) if self.is_hybrid else DynamicCache()

    def with_depths(self, count: int | None) -> ModelBundle:
        """The same model with only its first `count` MTP depths (None: all of them)."""
        if count is None or count >= len(self.depths):
            return self
        return replace(self, depths=nn.ModuleList(list(self.depths)[:count]))

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        eos = self.target.generation_config.eos_token_id
        if eos is None:
            eos = self.config.eos_token_id
        if eos is None:
            return ()
        return tuple(eos) if isinstance(eos, list | tuple) else (int(eos),)


def checkpoint_is_hybrid(directory: str | Path) -> bool:
    """Whether the checkpoint's config declares linear-attention layers (read without loading the model)."""
    try:
        config = read_config_json(Path(directory))
    except CheckpointError:
        return False
    return "linear_attention" in (config.get("layer_types") or [])


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """'float64' / 'fp32' / 'bf16' / ... or a torch.dtype -> torch.dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype.lower()]
    except KeyError:
        raise HarnessError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}") from None


def load_bundle(
    path: str | Path,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = torch.float64,
    attn_implementation: str = EXACT_ATTENTION,
) -> ModelBundle:
    """Load a model directory (config.json, safetensors weights, tokenizer) with its MTP depths.

    attn_implementation: the harness's own float64-exact eager kernel by default (harness/models/attention.py);
    any transformers implementation name ("sdpa", "flash_attention_2", ...) is accepted.
    Raises CheckpointError (or a subclass) naming the file and tensor for a missing directory, a
    checkpoint without MTP layers, an unknown layout, a shape mismatch or a tokenizer/model vocab mismatch.
    """
    directory = Path(path)
    refuse_weights(f"the weights of {directory}")  # --reference engine: the engine alone reads them
    torch_dtype = parse_dtype(dtype)
    torch_device = torch.device(device)
    checkpoint = open_checkpoint(directory)
    config = load_config(directory)
    layout = detect_layout(checkpoint.tensor_names, config.num_hidden_layers)
    target = _load_target(directory, config, torch_dtype, attn_implementation).to(torch_device)
    depths = _load_depths(checkpoint, target, layout)
    if layout.name == MIMO:
        mark_pre_norm_reader(target)
    tokenizer = load_tokenizer(directory, config)
    install_gated_deltanet_forward(target, depths)  # recurrent layers keep per-token states for rollback
    if torch_dtype == torch.float64:
        use_float64_arithmetic(target, depths)
    for module in (target, depths):
        module.eval()
        module.requires_grad_(False)
    return ModelBundle(directory, target, depths, tokenizer, layout, target.config, torch_device, torch_dtype)


def check_checkpoint(path: str | Path) -> None:
    """What load_bundle checks before it reads a weight: the directory, config.json, the safetensors files and
    their tensor names in an MTP layout, the tokenizer file. Seconds, whatever the checkpoint's size."""
    directory = Path(path)
    check_checkpoint_files(directory)
    config = load_config(directory)
    detect_layout(open_checkpoint(directory).tensor_names, config.num_hidden_layers)


def load_config(directory: Path) -> PretrainedConfig:
    raw = read_config_json(directory)
    config_file = directory / "config.json"
    model_type = raw.get("model_type")
    if model_type in _TARGET_MODEL_TYPE:
        fields = {k: v for k, v in raw.items() if k not in ("model_type", "architectures", "auto_map")}
        config = AutoConfig.for_model(_TARGET_MODEL_TYPE[model_type], **fields)
    else:
        try:
            config = AutoConfig.from_pretrained(directory)
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointError(f"{config_file}: transformers cannot read this config: {error}") from error
    if getattr(config, "num_hidden_layers", None) is None:
        raise CheckpointError(f"{config_file}: no num_hidden_layers")
    return config


def _load_target(
    directory: Path, config: PretrainedConfig, dtype: torch.dtype, attn_implementation: str
) -> PreTrainedModel:
    try:
        with quiet_transformers():
            model, info = AutoModelForCausalLM.from_pretrained(
                directory,
                config=config,
                dtype=dtype,
                use_safetensors=True,
                attn_implementation=attn_implementation,
                # grouped_mm MoE kernels have no float64 path; the per-expert loop runs in any dtype
                experts_implementation="eager" if dtype == torch.float64 else None,
                ignore_mismatched_sizes=True,  # reported below, naming the tensors
                output_loading_info=True,
            )
    except (RuntimeError, ValueError, OSError) as error:
        raise CheckpointError(f"{directory}: transformers could not load the target model: {error}") from error
    problems = []
    if info.get("missing_keys"):
        problems.append(f"missing tensors {sorted(info['missing_keys'])[:8]}")
    for name, found, expected in sorted(info.get("mismatched_keys") or [])[:8]:
        problems.append(f"tensor {name} has shape {tuple(found)}, expected {tuple(expected)}")
    if problems:
        raise CheckpointError(f"{directory}: target model weights do not fit its config: {'; '.join(problems)}")
    return model


def _load_depths(checkpoint: SafetensorsCheckpoint, target: PreTrainedModel, layout: LayoutMatch) -> nn.ModuleList:
    num_hidden_layers = target.config.num_hidden_layers
    located = {
        name: mapped
        for name in checkpoint.tensor_names
        if (mapped := depth_tensor_name(layout, name, num_hidden_layers)) is not None
    }
    own_embeddings = layout.name == DEEPSEEK_V3 and any(
        local.startswith("embed_tokens.") for _, local in located.values()
    )
    depths = build_depths(target, layout.num_depths, layout.hidden_first, own_embeddings)
    tensors = checkpoint.read(list(located))
    for d, depth in enumerate(depths):
        source_of = {local: name for name, (depth_index, local) in located.items() if depth_index in (d, -1)}
        raw = {local: tensors[name] for local, name in source_of.items()}
        state = fuse_experts(raw)
        source_of.update(_fused_sources(source_of))
        _load_depth_state(depth, d, state, source_of, checkpoint, own_embeddings)
    return depths


def _fused_sources(source_of: dict[str, str]) -> dict[str, str]:
    """Name fused expert tensors after the checkpoint tensors they came from, for error messages."""
    fused: dict[str, str] = {}
    for local, name in source_of.items():
        if ".experts." in local and local.endswith("_proj.weight"):
            prefix = local.split(".experts.")[0] + ".experts"
            stem = name.split(".experts.")[0] + ".experts.*"
            fused[f"{prefix}.gate_up_proj"] = f"{stem}.gate_proj/up_proj.weight"
            fused[f"{prefix}.down_proj"] = f"{stem}.down_proj.weight"
    return fused


def _load_depth_state(
    depth: nn.Module,
    d: int,
    state: dict[str, torch.Tensor],
    source_of: dict[str, str],
    checkpoint: SafetensorsCheckpoint,
    own_embeddings: bool,
) -> None:
    expected = depth.state_dict()
    shared = () if own_embeddings else ("embed_tokens.", "head.")
    required = {k for k in expected if not k.startswith(shared)}
    missing = sorted(required - state.keys())
    if missing:
        raise CheckpointError(
            f"{checkpoint.directory}: MTP depth {d} is missing tensors for {missing[:8]} "
            f"(layout expects them; found {len(state)} tensors for this depth)"
        )
    unexpected = sorted(k for k in state.keys() - expected.keys() if not k.startswith(shared))
    if unexpected:
        names = [source_of.get(k, k) for k in unexpected[:8]]
        raise CheckpointError(f"{checkpoint.directory}: MTP depth {d} has tensors the model does not use: {names}")
    for local in sorted(required):
        if state[local].shape != expected[local].shape:
            name = source_of.get(local, local)
            raise CheckpointError(
                f"{checkpoint.weight_map.get(name, checkpoint.directory)}: tensor {name} has shape "
                f"{tuple(state[local].shape)}, expected {tuple(expected[local].shape)} for MTP depth {d}"
            )
    parameter = next(depth.parameters())
    converted = {k: state[k].to(device=parameter.device, dtype=expected[k].dtype) for k in required}
    depth.load_state_dict(converted, strict=False)


def load_tokenizer(directory: Path, config: PretrainedConfig) -> PreTrainedTokenizerBase:
    tokenizer_file = directory / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise CheckpointError(f"{directory} has no tokenizer.json")
    try:
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file))
    except Exception as error:
        raise CheckpointError(f"{tokenizer_file}: cannot load tokenizer: {error}") from error
    if len(tokenizer) > config.vocab_size:
        largest = max(tokenizer.get_vocab().items(), key=lambda item: item[1])
        raise CheckpointError(
            f"{tokenizer_file}: tokenizer has {len(tokenizer)} tokens (largest id {largest[1]} = {largest[0]!r}) "
            f"but the model's vocab_size is {config.vocab_size}: vocab mismatch"
        )
    eos = config.eos_token_id
    if isinstance(eos, int) and tokenizer.eos_token is None:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(eos)
    return tokenizer


_BUNDLES: dict[tuple[str, str, str], ModelBundle] = {}


def bundle_for(model: str, device: str, dtype: str) -> ModelBundle:
    """Load a model once per process (a process-wide cache keyed by path, device and dtype); `model` is a
    directory or the name of a bundled fixture."""
    key = (str(resolve_model_path(model).resolve()), device, dtype)
    if key not in _BUNDLES:
        _BUNDLES[key] = load_bundle(key[0], device=device, dtype=dtype)
    return _BUNDLES[key]
