"""vLLM 0.32.0's MTP drafting as three of its findings describe it, computed by the harness's own proposer: what a
finding's signature compares the engine's drafts with.

- position 0 (docs/findings/vllm-mtp-zeroes-the-token-embedding-at-position-0.md): the MTP layer zeroes the token
  embedding of its entry at vLLM position 0, the pair (h_0, t_1): in the harness's indexing depth d's entry at
  index 0, position id d.
- GLM-4.5 (docs/findings/vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state.md): the next draft step
  reads the layer's hidden state before its final norm; the logits still come from the normed one.
- chunked prefill (docs/findings/vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end.md): at
  the end of a prefill chunk that ended inside the prompt, after c prompt tokens, the first MTP layer's entry at
  vLLM position c - 1 pairs h_{c-1} with the prompt's last token instead of t_c: in the harness's indexing depth 1's
  entry with position id c.

`drafts_as_described(bundle, prefixes, k, ...)` gives, for each committed prefix, the k drafts such a proposer
makes; with both flags off it is the harness's own proposer (the draft-conformance reference).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import nn

from harness.contract.decoder import DecodeRequest
from harness.decoding.mtp_decoder import MTPDecoder
from harness.models.loading import ModelBundle
from harness.models.mtp_depth import MTPDepth


class DescribedDepth(nn.Module):
    """An MTP depth computed the way the findings describe vLLM's MTP layer (wrapping the checkpoint's depth)."""

    def __init__(
        self,
        depth: MTPDepth,
        number: int,
        zero_position_zero: bool,
        chain_pre_norm: bool,
        fed_last_prompt_token: tuple[tuple[int, ...], int] = ((), 0),
    ) -> None:
        super().__init__()
        self.depth = depth
        self.number = number  # 1-based: its entry at index 0 has position id `number`
        self.zero_position_zero = zero_position_zero
        self.chain_pre_norm = chain_pre_norm
        # (prefill chunk ends c, the prompt's last token): depth 1's entries at position id c take that token
        self.chunk_ends, self.last_prompt_token = fed_last_prompt_token if number == 1 else ((), 0)
        self.layer_type = depth.layer_type

    def forward(
        self,
        token_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor,
        cache: object | None = None,
    ) -> torch.Tensor:
        """The depth's forward (harness/models/mtp_depth.py) with the embedding at index 0 zeroed and/or the pre-norm
        output returned (`head` then applies the final norm, so the logits are unchanged)."""
        depth = self.depth
        if self.chunk_ends:  # vLLM: the proposer's "backup" token at a discarded chunk's last position
            at_chunk_end = torch.isin(position_ids, torch.tensor(self.chunk_ends, device=position_ids.device))
            token_ids = torch.where(at_chunk_end, self.last_prompt_token, token_ids)
        embedded = depth.embed_tokens(token_ids)
        if self.zero_position_zero:  # vLLM: torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)
            embedded = torch.where((position_ids == self.number)[..., None], 0, embedded)
        x = depth.pre_norm_output(embedded, hidden, position_embeddings, attention_mask, position_ids, cache)
        return x if self.chain_pre_norm else depth.final_norm(x)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.depth.head(self.depth.final_norm(hidden) if self.chain_pre_norm else hidden)


def described_bundle(
    bundle: ModelBundle,
    zero_position_zero: bool,
    chain_pre_norm: bool,
    fed_last_prompt_token: tuple[tuple[int, ...], int] = ((), 0),
) -> ModelBundle:
    """The bundle with its MTP depths computed as described (the target and the weights are the same objects)."""
    depths = nn.ModuleList(
        DescribedDepth(depth, number, zero_position_zero, chain_pre_norm, fed_last_prompt_token)
        for number, depth in enumerate(bundle.depths, start=1)
    )
    return dataclasses.replace(bundle, depths=depths)


def drafts_as_described(
    bundle: ModelBundle,
    passes: Sequence[tuple[Sequence[int], int]],
    zero_position_zero: bool = False,
    chain_pre_norm: bool = False,
    fed_last_prompt_token: Sequence[tuple[tuple[int, ...], int]] = (),
) -> list[tuple[int, ...]]:
    """For each (committed prefix, k), the k greedy drafts of the first pass of a fresh decode of the prefix (the
    harness's proposer with the described depths), decoded one prefix at a time; `fed_last_prompt_token`, per pass,
    the request's prefill chunk ends and its prompt's last token (none: whole prefills)."""
    decoders: dict[tuple[tuple[int, ...], int], MTPDecoder] = {}
    drafts = []
    for index, (prefix, k) in enumerate(passes):
        fed = tuple(fed_last_prompt_token[index]) if fed_last_prompt_token else ((), 0)
        if fed not in decoders:
            decoders[fed] = MTPDecoder(described_bundle(bundle, zero_position_zero, chain_pre_norm, fed))
        [result] = decoders[fed].decode([DecodeRequest(tuple(prefix), 1, num_draft_tokens=k)])
        drafts.append(tuple(result.steps[0].drafts))
    return drafts
