"""Per-row bookkeeping of a batch being decoded, vectorised: committed tokens, EOS and length stops, steps."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol

import llguidance
import torch

from harness.contract.decoder import (
    DecodeRequest,
    DecodeResult,
    FinishReason,
    SamplingConfig,
    TokenLogprobs,
    VerifyStep,
    sample_requests,
    validate_for_model,
    with_samples,
)
from harness.decoding.grammar import Grammar
from harness.decoding.processors import TokenHistory, history_of_sequences
from harness.decoding.stops import Stops, StopsRule, stop_at_first_stop


class TextReader(Protocol):
    """What reads an output as text (a ModelBundle or ModelCard): the tokenizer's token bytes and llguidance view."""

    vocab_size: int

    def token_bytes(self) -> Sequence[bytes]: ...

    def grammar_tokenizer(self) -> llguidance.LLTokenizer: ...


NOT_FINISHED, FINISHED_EOS, FINISHED_LENGTH, FINISHED_STOP = 0, 1, 2, 3
_REASONS: dict[int, FinishReason] = {FINISHED_EOS: "eos", FINISHED_LENGTH: "length", FINISHED_STOP: "stop"}


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


# (proposed tokens [B, k+1], how many the pass offers [B], tokens left before max_new_tokens [B], EOS ids [B, E])
#   -> (count to commit, ended at EOS)
StopRule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def stop_at_first_eos(
    proposed: torch.Tensor, offered: torch.Tensor, remaining: torch.Tensor, eos_table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Commit at most `remaining` of the `offered` tokens, and stop after the first EOS among them (accepted
    drafts included: an EOS inside an accepted run ends the output there)."""
    count = torch.minimum(offered, remaining)
    columns = torch.arange(proposed.shape[1], device=proposed.device)[None, :]
    is_eos = (proposed[..., None] == eos_table[:, None, :]).any(-1) & (columns < count[:, None])
    first_eos = torch.where(is_eos.any(1), is_eos.long().argmax(1), proposed.shape[1])
    ends_at_eos = first_eos < count
    return torch.where(ends_at_eos, first_eos + 1, count), ends_at_eos


class BatchState:
    """Committed tokens of every row in a padded tensor [B, W] (the proposer reads it), and each pass's record."""

    def __init__(
        self,
        requests: Sequence[DecodeRequest],
        device: torch.device,
        lookahead: int,
        text: TextReader | None = None,
    ) -> None:
        self.requests = list(requests)
        # each request's stop sequences and strings, and its constraint's matcher (original row -> Grammar): what
        # reads the output as text, by way of the model's tokenizer (`text`)
        if text is None and any(r.stop_strings or r.structured_output for r in requests):
            raise ValueError("requests with stop strings or a structured output need the model's tokenizer")
        table = text.token_bytes() if text is not None and any(r.stop_strings for r in requests) else ()
        self.stops = [Stops.of(request, table) for request in requests]
        self.grammars = {
            row: Grammar(request.structured_output, text.grammar_tokenizer(), text.vocab_size, request.eos_token_ids)
            for row, request in enumerate(requests)
            if request.structured_output is not None and text is not None
        }
        size = len(requests)
        width = max(len(r.prompt_ids) + r.max_new_tokens for r in requests) + lookahead + 1
        self.sequence = torch.zeros(size, width, dtype=torch.long, device=device)
        for row, request in enumerate(requests):
            self.sequence[row, : len(request.prompt_ids)] = torch.tensor(request.prompt_ids)
        self.prompt_lengths = torch.tensor([len(r.prompt_ids) for r in requests], device=device)
        self.lengths = self.prompt_lengths.clone()
        self.max_new_tokens = torch.tensor([r.max_new_tokens for r in requests], device=device)
        eos_width = max(1, max(len(r.eos_token_ids) for r in requests))
        self.eos_table = torch.full((size, eos_width), -1, dtype=torch.long, device=device)
        for row, request in enumerate(requests):
            self.eos_table[row, : len(request.eos_token_ids)] = torch.tensor(request.eos_token_ids, dtype=torch.long)
        self.finish = torch.full((size,), NOT_FINISHED, dtype=torch.long, device=device)
        self.row_ids = torch.arange(size, device=device)  # current row -> original row
        self.passes = torch.zeros(size, dtype=torch.long, device=device)  # verification passes each row made
        # original row -> its tokens' logprobs, for the rows whose request asks for them
        self.logprobs: dict[int, list[TokenLogprobs]] = {
            row: [] for row, request in enumerate(requests) if request.logprobs is not None
        }
        self._passes: list[tuple[torch.Tensor, ...]] = []
        self._dropped: dict[int, tuple[list[int], int]] = {}  # original row -> (committed ids, finish code)

    @property
    def generated_counts(self) -> torch.Tensor:
        return self.lengths - self.prompt_lengths

    @property
    def active(self) -> torch.Tensor:
        return self.finish == NOT_FINISHED

    def any_active(self) -> bool:
        return bool(self.active.any())

    def last_tokens(self) -> torch.Tensor:
        """The newest committed token of each row [B]."""
        return self.sequence.gather(1, (self.lengths - 1)[:, None]).squeeze(1)

    def commit(
        self,
        active: torch.Tensor,
        drafts: torch.Tensor,
        row_k: torch.Tensor,
        accepted: torch.Tensor,
        next_token: torch.Tensor,
        record: bool = True,
        stop_rule: StopRule = stop_at_first_eos,
        stop_sequence_rule: StopsRule = stop_at_first_stop,
        logprobs: torch.Tensor | None = None,
    ) -> None:
        """Commit, for every active row, its accepted drafts and then the target's token, truncated at
        max_new_tokens, after the first EOS and after the first completed stop sequence. drafts [B, k]; row_k [B]:
        drafts the row proposed; logprobs [B, k+1, V]: the raw log-probabilities at the pass's positions, recorded
        for the committed tokens of the rows that ask for them."""
        size, k = drafts.shape
        columns = torch.arange(k + 1, device=drafts.device)[None, :]
        proposed = torch.cat([drafts, drafts.new_zeros(size, 1)], dim=1)
        proposed = proposed.scatter(1, accepted[:, None], next_token[:, None])  # a accepted drafts, then the token
        remaining = self.max_new_tokens - self.generated_counts
        count, ends_at_eos = stop_rule(proposed, accepted + 1, remaining, self.eos_table)
        count = torch.where(active, count, 0)
        ends_at_stop = self.stop_sequences(active, proposed, count, stop_sequence_rule)
        count = torch.where(ends_at_stop > 0, ends_at_stop, count)
        ends_at_stop = ends_at_stop > 0
        ends_at_eos = ends_at_eos & ~ends_at_stop
        start = self.generated_counts.clone()
        write = columns < count[:, None]
        positions = (self.lengths[:, None] + columns).clamp(max=self.sequence.shape[1] - 1)
        self.sequence.scatter_(1, positions, torch.where(write, proposed, self.sequence.gather(1, positions)))
        self.lengths = self.lengths + count
        self.passes = self.passes + active.long()
        finished_length = active & ~ends_at_eos & (self.generated_counts >= self.max_new_tokens)
        # a row that committed more than it may (a broken stop rule) is finished, not left running
        finished_length = finished_length & ~ends_at_stop
        self.finish = torch.where(active & ends_at_eos, FINISHED_EOS, self.finish)
        self.finish = torch.where(active & ends_at_stop, FINISHED_STOP, self.finish)
        self.finish = torch.where(finished_length, FINISHED_LENGTH, self.finish)
        if logprobs is not None and self.logprobs:
            self.record_logprobs(active, start, count, logprobs)
        if self.grammars:
            self.commit_to_grammars(active, start, count)
        if record:
            self._passes.append((self.row_ids, active, start, drafts, row_k, accepted, count))

    def history(self, sampling: SamplingConfig, vocab_size: int) -> TokenHistory | None:
        """The history at each row's next position, where the sampling settings read it (penalties, min_tokens)."""
        if not sampling.reads_history:
            return None
        return history_of_sequences(
            self.sequence, self.prompt_lengths, self.lengths, self.eos_table, vocab_size, torch.float64
        )

    def stop_sequences(
        self, active: torch.Tensor, proposed: torch.Tensor, count: torch.Tensor, rule: StopsRule
    ) -> torch.Tensor:
        """[B]: for each row whose request has stop sequences or strings and where one ends among the `count` tokens
        it may commit, how many to commit; 0 elsewhere."""
        ends = torch.zeros_like(count)
        for row, original in enumerate(self.row_ids.tolist()):
            stops = self.stops[original]
            if not stops or not bool(active[row]):
                continue
            output = self.sequence[row, int(self.prompt_lengths[row]) : int(self.lengths[row])].tolist()
            new = proposed[row, : int(count[row])].tolist()
            cut = rule(output, new, stops, self.requests[original].sampling.min_tokens)
            if cut is not None:
                ends[row] = cut
        return ends

    def commit_to_grammars(self, active: torch.Tensor, start: torch.Tensor, count: torch.Tensor) -> None:
        """Each constrained row's matcher consumes the tokens the row just committed."""
        for row, original in enumerate(self.row_ids.tolist()):
            if original in self.grammars and bool(active[row]):
                begin = int(self.prompt_lengths[row] + start[row])
                self.grammars[original].commit(self.sequence[row, begin : begin + int(count[row])].tolist())

    def grammar_allowed(self, drafts: torch.Tensor | None = None, row_k: torch.Tensor | None = None) -> torch.Tensor:
        """[B, j, V] bool: each row's mask at the j = k+1 positions of a pass verifying `drafts` [B, k] (row_k of
        them real; j = 1 without drafts); True everywhere for a row without a constraint."""
        size = len(self.row_ids)
        k = 0 if drafts is None else drafts.shape[1]
        vocab = next(iter(self.grammars.values())).vocab_size
        allowed = torch.ones(size, k + 1, vocab, dtype=torch.bool)
        for row, original in enumerate(self.row_ids.tolist()):
            grammar = self.grammars.get(original)
            if grammar is None or not bool(self.active[row]):
                continue
            real = [] if drafts is None else drafts[row, : int(row_k[row])].tolist()
            allowed[row, : len(real) + 1] = grammar.allowed_along(real)
        return allowed.to(self.sequence.device)

    def record_logprobs(
        self, active: torch.Tensor, start: torch.Tensor, count: torch.Tensor, logprobs: torch.Tensor
    ) -> None:
        """Append, for each row that asks for logprobs, its committed tokens' TokenLogprobs from logprobs [B, J, V]
        (column c: the pass's c-th committed token)."""
        for row, original in enumerate(self.row_ids.tolist()):
            if original not in self.logprobs or not bool(active[row]):
                continue
            top_count = self.requests[original].logprobs or 0
            begin = int(self.prompt_lengths[row] + start[row])
            tokens = self.sequence[row, begin : begin + int(count[row])].tolist()
            for column, token in enumerate(tokens):
                values = logprobs[row, column]
                top = values.topk(top_count) if top_count else None
                best = () if top is None else tuple(zip(top.indices.tolist(), top.values.tolist(), strict=True))
                self.logprobs[original].append(TokenLogprobs(token, float(values[token]), best))

    def select_rows(self, keep: torch.Tensor) -> None:
        """Keep only the rows `keep` (indices); the others must have finished and are set aside."""
        dropped = torch.ones(len(self.row_ids), dtype=torch.bool, device=keep.device)
        dropped[keep] = False
        for row in dropped.nonzero().squeeze(-1).tolist():
            length = int(self.lengths[row])
            self._dropped[int(self.row_ids[row])] = (self.sequence[row, :length].tolist(), int(self.finish[row]))
        for name in (
            "sequence",
            "prompt_lengths",
            "lengths",
            "max_new_tokens",
            "eos_table",
            "finish",
            "row_ids",
            "passes",
        ):
            setattr(self, name, getattr(self, name)[keep])

    def results(self) -> list[DecodeResult]:
        committed = dict(self._dropped)
        for row, original in enumerate(self.row_ids.tolist()):
            committed[original] = (self.sequence[row, : int(self.lengths[row])].tolist(), int(self.finish[row]))
        prompts = [len(r.prompt_ids) for r in self.requests]
        steps: list[list[VerifyStep]] = [[] for _ in self.requests]
        for record in self._passes:
            row_ids, active, start, drafts, row_k, accepted, count = (t.tolist() for t in record)
            for row, original in enumerate(row_ids):
                if not active[row]:
                    continue
                begin = prompts[original] + start[row]
                emitted = tuple(committed[original][0][begin : begin + count[row]])
                step = VerifyStep(start[row], tuple(drafts[row][: row_k[row]]), accepted[row], emitted)
                steps[original].append(step)
        return [
            DecodeResult(
                tuple(ids[prompts[row] :]),
                tuple(steps[row]),
                _REASONS.get(code, "length"),
                logprobs=tuple(self.logprobs.get(row, ())),
            )
            for row, (ids, code) in sorted(committed.items())
        ]


def decode_in_groups(
    requests: Sequence[DecodeRequest],
    vocab_size: int,
    max_context: int,
    group_key: Callable[[DecodeRequest], Hashable],
    decode_group: Callable[[list[DecodeRequest], list[int]], list[DecodeResult]],
    samples: SamplesRule = sample_requests,
) -> list[DecodeResult]:
    """Validate every request, decode requests that share `group_key` as one batch, return results in order.
    decode_group(requests, their indices in the input) -> their results. A request with n samples is decoded as the n
    one-sample requests `samples` makes of it (each row indexed by its request), its result holding them all."""
    for index, request in enumerate(requests):
        validate_for_model(request, vocab_size, max_context, index)
    rows = [(index, row) for index, request in enumerate(requests) for row in samples(request)]
    groups: dict[Hashable, list[int]] = {}
    for flat, (_, row) in enumerate(rows):
        groups.setdefault(group_key(row), []).append(flat)
    results: list[DecodeResult | None] = [None] * len(rows)
    for flats in groups.values():
        decoded = decode_group([rows[flat][1] for flat in flats], [rows[flat][0] for flat in flats])
        for flat, result in zip(flats, decoded, strict=True):
            results[flat] = result
    per_request: list[list[DecodeResult]] = [[] for _ in requests]
    for (index, _), result in zip(rows, results, strict=True):
        per_request[index].append(result)  # type: ignore[arg-type]
    return [with_samples(sampled) for sampled in per_request]


# (a request) -> the one-sample requests its n samples are drawn as
SamplesRule = Callable[[DecodeRequest], list[DecodeRequest]]


def prefill_inputs(state: BatchState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every prompt token but the last, right-padded: (token ids, positions, valid), each [B, P]."""
    lengths = state.lengths - 1
    width = int(lengths.max())
    columns = torch.arange(width, device=lengths.device)[None, :].expand(len(state.requests), -1)
    valid = columns < lengths[:, None]
    return torch.where(valid, state.sequence[:, :width], 0), columns, valid
