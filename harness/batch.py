"""Per-row bookkeeping of a batch being decoded: committed tokens, EOS and length stops, verification steps."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.api import DecodeRequest, DecodeResult, FinishReason, VerifyStep


def truncate(
    emitted: Sequence[int], remaining: int, eos_token_ids: Sequence[int]
) -> tuple[list[int], FinishReason | None]:
    """The tokens of `emitted` that may be committed: up to `remaining`, and up to and including the first EOS."""
    kept: list[int] = []
    for token in emitted[:remaining]:
        kept.append(token)
        if token in eos_token_ids:
            return kept, "eos"
    return kept, ("length" if len(kept) == remaining else None)


class BatchState:
    """Committed tokens of each row, in a padded tensor the proposer reads, plus each row's steps."""

    def __init__(self, requests: Sequence[DecodeRequest], device: torch.device, lookahead: int) -> None:
        self.requests = list(requests)
        self.prompt_lengths = [len(r.prompt_ids) for r in requests]
        width = max(len(r.prompt_ids) + r.max_new_tokens for r in requests) + lookahead + 1
        self.sequence = torch.zeros(len(requests), width, dtype=torch.long, device=device)
        for row, request in enumerate(requests):
            self.sequence[row, : len(request.prompt_ids)] = torch.tensor(request.prompt_ids)
        self.lengths = torch.tensor(self.prompt_lengths, dtype=torch.long, device=device)
        self.generated: list[list[int]] = [[] for _ in requests]
        self.steps: list[list[VerifyStep]] = [[] for _ in requests]
        self.finish: list[FinishReason | None] = [None for _ in requests]

    @property
    def active(self) -> torch.Tensor:
        return torch.tensor([f is None for f in self.finish], dtype=torch.bool, device=self.lengths.device)

    def any_active(self) -> bool:
        return any(f is None for f in self.finish)

    def last_tokens(self) -> torch.Tensor:
        """The newest committed token of each row [B]."""
        return self.sequence.gather(1, (self.lengths - 1)[:, None]).squeeze(1)

    def commit(self, row: int, drafts: Sequence[int], accepted: int, next_token: int, record: bool = True) -> int:
        """Commit accepted drafts and the target's token for `row` (truncated); returns how many were committed."""
        request = self.requests[row]
        proposed = [*drafts[:accepted], next_token]
        kept, finish = truncate(proposed, request.max_new_tokens - len(self.generated[row]), request.eos_token_ids)
        if record:
            self.steps[row].append(VerifyStep(len(self.generated[row]), tuple(drafts), accepted, tuple(kept)))
        start = int(self.lengths[row])
        self.sequence[row, start : start + len(kept)] = torch.tensor(kept, dtype=torch.long)
        self.lengths[row] = start + len(kept)
        self.generated[row].extend(kept)
        self.finish[row] = finish
        return len(kept)

    def results(self) -> list[DecodeResult]:
        return [
            DecodeResult(tuple(tokens), tuple(steps), finish or "length")
            for tokens, steps, finish in zip(self.generated, self.steps, self.finish, strict=True)
        ]


def prefill_inputs(state: BatchState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every prompt token but the last, right-padded: (token ids, positions, valid), each [B, P]."""
    lengths = state.lengths - 1
    width = int(lengths.max())
    columns = torch.arange(width, device=lengths.device)[None, :].expand(len(state.requests), -1)
    valid = columns < lengths[:, None]
    return torch.where(valid, state.sequence[:, :width], 0), columns, valid
