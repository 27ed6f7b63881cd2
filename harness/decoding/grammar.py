"""Structured output: the token mask of a request's constraint at every output position, from llguidance.

    allowed_i = { t not an EOS : text(output[:i] + t) is a prefix of a match }
              ∪ { the request's EOS ids : text(output[:i]) is a whole match }
    processed logits at i: l[t] = -inf for every t not in allowed_i (first, before the logit bias)

A verification position j of a pass reads the committed output and the drafts before it, as the penalties do: the
matcher consumes the drafts one by one, each position's mask is taken on the way, and the matcher is rolled back to
the committed output (a draft the grammar refuses is never consumed: the positions after it are unreachable and left
unmasked). Only committed tokens stay consumed. A decoder that commits a token the grammar refuses leaves the row
unconstrained from there on (its later masks allow everything): the checks report the refused token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import llguidance
import torch

from harness.contract.decoder import InvalidRequest, StructuredOutput
from harness.decoding.processors import broadcast_rows

# JSON instances are compact: no whitespace between tokens, items separated by "," and keys by ":" (vLLM's
# disable_any_whitespace; flexible whitespace is a different language in every library)
COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


def compiled_grammar(constraint: StructuredOutput) -> str:
    """llguidance's grammar for a constraint: a regex, a JSON schema, or GBNF by way of Lark."""
    if constraint.kind == "regex":
        return llguidance.LLMatcher.grammar_from_regex(constraint.spec)
    if constraint.kind == "json_schema":
        return llguidance.LLMatcher.grammar_from_json_schema(constraint.spec, overrides=COMPACT_JSON)
    return llguidance.LLMatcher.grammar_from_lark(llguidance.gbnf_to_lark.gbnf_to_lark(constraint.spec))


# the masks already computed, keyed by (tokenizer, constraint, EOS ids, vocab size) and the tokens consumed: requests
# that share a constraint and a prompt meet the same states again and again (the law cases' thousands of samples)
_MASKS: dict[tuple, torch.Tensor] = {}
MASK_CACHE_ELEMENTS = 2**26  # mask entries kept (bools), whatever the vocab size
# a compiled matcher per (tokenizer, constraint), copied for each request (compiling costs ~1 ms, a copy ~1 us); the
# tokenizer is kept with it, so that its id is never reused while the entry lives
_TEMPLATES: dict[tuple[int, StructuredOutput], tuple[llguidance.LLTokenizer, llguidance.LLMatcher]] = {}


def fresh_matcher(constraint: StructuredOutput, tokenizer: llguidance.LLTokenizer) -> llguidance.LLMatcher:
    """A matcher of `constraint` holding nothing yet (InvalidRequest naming the constraint's error)."""
    key = (id(tokenizer), constraint)
    if key not in _TEMPLATES:
        try:
            grammar = compiled_grammar(constraint)
        except Exception as error:  # llguidance's converters raise bare Exceptions on a malformed spec
            raise InvalidRequest(f"structured_output {constraint.kind} does not compile: {error}") from None
        matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise InvalidRequest(f"structured_output {constraint.kind} does not compile: {matcher.get_error()}")
        _TEMPLATES[key] = (tokenizer, matcher)
    return _TEMPLATES[key][1].deep_copy()


class Grammar:
    """One request's constraint, its matcher holding the committed output."""

    def __init__(
        self,
        constraint: StructuredOutput,
        tokenizer: llguidance.LLTokenizer,
        vocab_size: int,
        eos_ids: Sequence[int],
    ) -> None:
        self.matcher = fresh_matcher(constraint, tokenizer)
        self.vocab_size = vocab_size
        self.eos_ids = list(eos_ids)
        self.broken = False  # a refused token was committed: unconstrained from here on
        self.consumed: list[int] = []  # what the matcher holds: the mask is a function of it (memoised)
        self.cache_key = (id(tokenizer), constraint, tuple(self.eos_ids), vocab_size)

    def allowed(self) -> torch.Tensor:
        """[V] bool: the tokens allowed after what the matcher holds (module docstring)."""
        if self.broken or self.matcher.is_error():
            return torch.ones(self.vocab_size, dtype=torch.bool)
        key = (self.cache_key, tuple(self.consumed))
        mask = _MASKS.get(key)
        if mask is None:
            mask = _MASKS[key] = self.computed_mask()
            while len(_MASKS) * self.vocab_size > MASK_CACHE_ELEMENTS:
                _MASKS.pop(next(iter(_MASKS)))  # the oldest first
        return mask.clone()

    def computed_mask(self) -> torch.Tensor:
        # each token on its own, not llguidance's computed mask: where the grammar forces text, that mask keeps only
        # the forced text's canonical tokens ("ab", not "a" then "b"), and a match's prefix is any way of spelling it
        validate = self.matcher.validate_tokens
        allowed = torch.tensor([validate([token]) == 1 for token in range(self.vocab_size)], dtype=torch.bool)
        if self.eos_ids:
            allowed[self.eos_ids] = self.matcher.is_accepting()
        return allowed

    def consume_valid_prefix(self, tokens: Sequence[int]) -> int:
        """Consume the longest prefix of `tokens` the grammar allows (an EOS ends it); return its length."""
        if self.broken:
            return 0
        tokens = list(tokens)
        end = next((i for i, token in enumerate(tokens) if token in self.eos_ids), len(tokens))
        valid = self.matcher.validate_tokens(tokens[:end]) if end else 0
        if valid:
            self.matcher.consume_tokens(tokens[:valid])
            self.consumed += tokens[:valid]
        return valid

    def commit(self, tokens: Sequence[int]) -> None:
        """The row committed `tokens`: consumed for good (a refused one breaks the row, see the module docstring)."""
        end = next((i for i, token in enumerate(tokens) if token in self.eos_ids), len(tokens))
        if self.consume_valid_prefix(tokens[:end]) < end:
            self.broken = True

    def allowed_along(self, drafts: Sequence[int]) -> torch.Tensor:
        """[len(drafts)+1, V] bool: the mask at each position of a pass verifying `drafts` after the committed output
        (each reads the drafts before it); the matcher is left as it was."""
        masks = [self.allowed()]
        consumed = 0
        for draft in drafts:
            if self.consume_valid_prefix([draft]) == 0:
                break
            consumed += 1
            masks.append(self.allowed())
        if consumed:
            self.matcher.rollback(consumed)
            del self.consumed[-consumed:]
        everything = torch.ones(self.vocab_size, dtype=torch.bool)
        masks += [everything] * (len(drafts) + 1 - len(masks))
        return torch.stack(masks)


# (the target's logits at a pass's positions [B, k+1, V], each position's mask [B, k+1, V]) -> the logits verification
# reads: every position masked (mask_logits)
GrammarRule = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def mask_logits(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """logits [B, ..., V] with -inf where allowed [B, ..., V] (or [B, V]: every position of the row) is False."""
    if allowed.dim() == 2 and logits.dim() > 2:
        allowed = broadcast_rows(allowed, logits)
    return logits.masked_fill(~allowed.to(logits.device), float("-inf"))


def grammar_problem(grammar: Grammar, output: Sequence[int], ended_at_eos: bool) -> str | None:
    """Why `output` breaks the constraint (a fresh Grammar): the first token it refuses, or an EOS before the text is
    a whole match; None when every token is allowed (an output cut by length may stop inside a match)."""
    body = list(output[:-1]) if ended_at_eos else list(output)
    valid = grammar.consume_valid_prefix(body)
    if valid < len(body):
        return f"output position {valid} (token {body[valid]}) is refused by the constraint after {valid} tokens"
    if ended_at_eos and not grammar.matcher.is_accepting():
        return f"the output ends with an EOS at position {len(body)} before its text is a whole match"
    return None
