"""One MTP depth as a module, built from the target model's own decoder-layer class.

Depth d (1-based) at sequence index i predicts token t_{i+d+1} from the hidden state h^{d-1}_i and the
token t_{i+d}. h^0 is the target's hidden state (final-normed; MiMo: before the final norm, see
harness/models/target_hidden.py), h^{d-1} for d > 1 depth d-1's output:

    x_i      = eh_proj([enorm(E(t_{i+d})); hnorm(h^{d-1}_i)])   # MiMo: [hnorm(h); enorm(E)]
    h^d_i    = final_norm(Block(x_i))                           # Block attends over depth d's own cache
    logits_i = head(h^d_i)                                      # computed by callers where they need it

`h^d` (normed) feeds depth d+1, as in transformers' MtpModel. Depth d uses position id i + d (the
position of the token it embeds). Each depth has its own attention, hence its own KV cache.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.cache_utils import Cache


class MTPDepth(nn.Module):
    """One MTP depth: projection of (token embedding, hidden state), a decoder block, a norm and a head."""

    def __init__(
        self,
        block: nn.Module,
        norm_factory: type[nn.Module],
        hidden_size: int,
        eps: float,
        embed_tokens: nn.Embedding,
        head: nn.Linear,
        hidden_first: bool,
        layer_type: str = "full_attention",
    ) -> None:
        super().__init__()
        self.enorm = norm_factory(hidden_size, eps=eps)
        self.hnorm = norm_factory(hidden_size, eps=eps)
        self.eh_proj = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.block = block
        self.final_norm = norm_factory(hidden_size, eps=eps)
        self.embed_tokens = embed_tokens
        self.head = head
        self.hidden_first = hidden_first
        self.layer_type = layer_type

    def forward(
        self,
        token_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor,
        cache: Cache | None = None,
    ) -> torch.Tensor:
        """token_ids: [B, S], hidden: [B, S, H] -> normed hidden h^d [B, S, H]; logits are `self.head(h^d)`."""
        embedded = self.embed_tokens(token_ids)
        return self.final_norm(
            self.pre_norm_output(embedded, hidden, position_embeddings, attention_mask, position_ids, cache)
        )

    def pre_norm_output(
        self,
        embedded: torch.Tensor,
        hidden: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor,
        cache: Cache | None = None,
    ) -> torch.Tensor:
        """embedded: the tokens' embeddings [B, S, H], hidden: [B, S, H] -> the block's output before the final
        norm: block(eh_proj([enorm(embedded), hnorm(hidden)])), the pair in the family's order."""
        embedded = self.enorm(embedded)
        carried = self.hnorm(hidden)
        pair = (carried, embedded) if self.hidden_first else (embedded, carried)
        x = self.eh_proj(torch.cat(pair, dim=-1))
        return self.block(
            x,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=cache is not None,
            position_embeddings=position_embeddings,
        )


def mtp_block_config(config: PretrainedConfig, num_depths: int) -> PretrainedConfig:
    """The config MTP blocks are built with: depth d is layer d of a `num_depths`-layer model.

    MTP blocks are always MoE where the family has MoE (first_k_dense_replace = 0), and take the
    attention / MLP types the config declares for MTP layers (mtp_layer_types, mtp_mlp_layer_types).
    """
    mtp_config = copy.deepcopy(config)
    mtp_config.num_hidden_layers = num_depths
    if hasattr(mtp_config, "first_k_dense_replace"):
        mtp_config.first_k_dense_replace = 0
    if getattr(mtp_config, "layer_types", None) is not None:
        mtp_config.layer_types = getattr(config, "mtp_layer_types", None) or ["full_attention"] * num_depths
    if getattr(mtp_config, "mlp_layer_types", None) is not None:
        mtp_config.mlp_layer_types = getattr(config, "mtp_mlp_layer_types", None) or ["sparse"] * num_depths
    return mtp_config


def build_depths(target: PreTrainedModel, num_depths: int, hidden_first: bool, own_embeddings: bool) -> nn.ModuleList:
    """Empty MTP depths shaped for `target`, on its device and dtype; weights are loaded afterwards.

    own_embeddings: each depth gets its own embedding and head (DeepSeek-V3 ships copies per depth);
    otherwise the depths share the target's embedding and lm_head modules.
    """
    decoder = target.get_decoder()
    block_cls = type(decoder.layers[-1])
    norm_cls = type(decoder.norm)
    config = target.config
    mtp_config = mtp_block_config(config, num_depths)
    mtp_config._attn_implementation = config._attn_implementation
    layer_types = getattr(mtp_config, "layer_types", None) or ["full_attention"] * num_depths
    parameter = next(target.parameters())
    depths = nn.ModuleList()
    for d in range(num_depths):
        if own_embeddings:
            embed: nn.Module = nn.Embedding(config.vocab_size, config.hidden_size)
            head: nn.Module = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        else:
            embed, head = target.get_input_embeddings(), target.get_output_embeddings()
        depth = MTPDepth(
            block=block_cls(mtp_config, d),
            norm_factory=norm_cls,
            hidden_size=config.hidden_size,
            eps=config.rms_norm_eps,
            embed_tokens=embed,
            head=head,
            hidden_first=hidden_first,
            layer_type=layer_types[d],
        )
        depths.append(depth.to(device=parameter.device, dtype=parameter.dtype))
    return depths


def rotary_embeddings(
    target: PreTrainedModel, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str = "full_attention"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) for `position_ids` from the target's rotary module (per layer type where the family has them)."""
    rotary = target.get_decoder().rotary_emb
    if getattr(rotary, "layer_types", None) is not None:
        return rotary(x, position_ids, layer_type=layer_type)
    return rotary(x, position_ids)
