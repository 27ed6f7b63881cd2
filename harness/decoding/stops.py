"""When a request's stops end its output: stop sequences (token ids) and stop strings (text), checked after every
token, accepted drafts included.

    a stop sequence s ends the output at token t  iff  output[t-len(s)+1 : t+1] == s
    a stop string   s ends the output at token t  iff  an occurrence of s in text(output[: t+1]) ends inside the
                                                       bytes of output[t]   (text: the tokens' bytes, token_bytes.py)

The first such t past the first min_tokens tokens ends the output, t kept (vLLM's detokenizer and llama.cpp's server
both keep the token that completes a stop string, and drop the text from the string on). The prompt's text never
counts. Text is compared as UTF-8 bytes, which for valid UTF-8 finds exactly the character matches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.contract.decoder import DecodeRequest


@dataclass(frozen=True)
class Stops:
    """A request's stop sequences and stop strings (UTF-8), with the token -> bytes table the strings are read by."""

    sequences: tuple[tuple[int, ...], ...] = ()
    strings: tuple[bytes, ...] = ()
    token_bytes: Sequence[bytes] = ()

    @classmethod
    def of(cls, request: DecodeRequest, token_bytes: Sequence[bytes] = ()) -> Stops:
        if request.stop_strings and not token_bytes:
            raise ValueError("a request with stop strings needs the tokenizer's token bytes to read them")
        strings = tuple(text.encode("utf-8") for text in request.stop_strings)
        return cls(request.stop_sequences, strings, token_bytes)

    def __bool__(self) -> bool:
        return bool(self.sequences or self.strings)

    def completed_by_last_token(self, output: Sequence[int]) -> bool:
        """Whether the last token of `output` completes one of the stop sequences or stop strings."""
        if any(
            len(stop) <= len(output) and tuple(output[len(output) - len(stop) :]) == stop for stop in self.sequences
        ):
            return True
        if not self.strings or not output:
            return False
        last = len(self.token_bytes[output[-1]])
        if last == 0:
            return False
        # the bytes an occurrence ending inside the last token can reach back to: its own and len(s) - 1 before them
        reach = last + max(len(text) for text in self.strings) - 1
        tail = b""
        for token in reversed(output):
            tail = self.token_bytes[token] + tail
            if len(tail) >= reach:
                break
        return any(tail.find(text, max(0, len(tail) - last - len(text) + 1)) != -1 for text in self.strings)


# (the row's output so far, the tokens a pass may commit after it, the request's stops, min_tokens)
#   -> how many of those tokens to commit when a stop ends among them, else None
StopsRule = Callable[[Sequence[int], Sequence[int], Stops, int], int | None]


def stop_at_first_stop(output: Sequence[int], new: Sequence[int], stops: Stops, min_tokens: int) -> int | None:
    """Checked after every token: the first of `new` that completes a stop sequence or a stop string ends the output
    (kept), once the output holds more than min_tokens tokens."""
    extended = list(output)
    for index, token in enumerate(new):
        extended.append(token)
        if len(extended) > min_tokens and stops.completed_by_last_token(extended):
            return index + 1
    return None
