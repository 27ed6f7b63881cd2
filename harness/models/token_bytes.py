"""Each token's bytes under a tokenizer: what a token adds to the output's text, for the stop strings.

    text(output) = b"".join(token_bytes[t] for t in output), read as UTF-8

Byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek, GLM: the fixtures' tokenizers) spells each byte b as the character
bytes_to_unicode()[b], so a token's bytes are its spelling mapped back; SentencePiece vocabularies spell bytes as
`<0xNN>` and the space as "▁". Special tokens add nothing (engines skip them in the text, as vLLM's default
skip_special_tokens does).
"""

from __future__ import annotations

from functools import cache

from transformers import PreTrainedTokenizerBase

SENTENCEPIECE_SPACE = "\u2581"


@cache
def byte_of_character() -> dict[str, int]:
    """GPT-2's byte-level alphabet read backward: the printable character standing for each byte -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    characters = list(printable)
    shifted = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + shifted)
            shifted += 1
    return {chr(character): byte for byte, character in zip(printable, characters, strict=True)}


def piece_bytes(piece: str, byte_level: bool) -> bytes:
    """One vocabulary entry's bytes: byte-level spelling mapped back, or SentencePiece's `<0xNN>` and "▁"."""
    if byte_level:
        alphabet = byte_of_character()
        if all(character in alphabet for character in piece):
            return bytes(alphabet[character] for character in piece)
        return piece.encode("utf-8")
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return bytes([int(piece[3:5], 16)])
    return piece.replace(SENTENCEPIECE_SPACE, " ").encode("utf-8")


def token_bytes(tokenizer: PreTrainedTokenizerBase, vocab_size: int) -> tuple[bytes, ...]:
    """The bytes of token ids 0..vocab_size-1 (ids the tokenizer lacks, and special tokens, add none)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    byte_level = backend is not None and "ByteLevel" in repr(backend.decoder)
    added = getattr(tokenizer, "added_tokens_decoder", {})
    special = set(tokenizer.all_special_ids) | {token_id for token_id, token in added.items() if token.special}
    table = []
    for token_id in range(vocab_size):
        piece = tokenizer.convert_ids_to_tokens(token_id) if token_id < len(tokenizer) else None
        table.append(b"" if piece is None or token_id in special else piece_bytes(piece, byte_level))
    return tuple(table)
