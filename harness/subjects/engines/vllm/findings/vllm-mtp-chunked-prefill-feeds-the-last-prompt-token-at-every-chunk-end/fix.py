"""Fix of vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end.

When a prompt is prefilled in chunks, the drafter's input for a chunk is the chunk's tokens shifted left by one,
with the "next token" at the chunk's last position: there the MTP layer pairs the chunk's last hidden state with
the prompt token that follows the chunk, and caches that entry for the rest of the request. A chunk that ends
inside the prompt samples nothing (it is discarded), so `SpecDecodeBaseProposer.prepare_next_token_ids_padded`
takes a "backup" token from the request, `get_token_id(num_tokens_no_spec - 1)`: the prompt's last token, not
the one after the chunk. The fix takes `get_token_id(seq_len)` for a discarded request, with seq_len the tokens
computed after this step (`num_computed_tokens + num_scheduled_tokens`, which the model runner holds as
`optimistic_seq_lens_cpu`); a request that was sampled is unchanged (its backup is never read).
"""

from collections.abc import Callable
from types import ModuleType

PROPOSER_MODULE = "vllm.v1.spec_decode.llm_base_proposer"


def patch_proposer(module: ModuleType) -> None:
    proposer = module.SpecDecodeBaseProposer
    init: Callable = proposer.__init__
    prepare: Callable = proposer.prepare_next_token_ids_padded

    def init_keeping_the_runner(self, *args, **kwargs) -> None:  # noqa: ANN001
        init(self, *args, **kwargs)
        self.fix_runner = kwargs.get("runner", args[3] if len(args) > 3 else None)

    def prepare_with_the_next_prompt_token(self, sampled_token_ids, requests, gpu_input_batch, discard_request_mask):  # noqa: ANN001
        original_copy = self.backup_next_token_ids.copy_to_gpu
        runner = self.fix_runner
        num_reqs = gpu_input_batch.num_reqs
        discarded = runner.discard_request_mask.np[:num_reqs]
        seq_lens = runner.optimistic_seq_lens_cpu[:num_reqs].numpy()

        def copy_with_the_next_prompt_token(n: int) -> object:
            for i in range(n):
                if discarded[i]:  # a chunk that ended inside the prompt: the token after the chunk
                    request = requests[gpu_input_batch.req_ids[i]]
                    self.backup_next_token_ids.np[i] = request.get_token_id(int(seq_lens[i]))
            return original_copy(n)

        self.backup_next_token_ids.copy_to_gpu = copy_with_the_next_prompt_token
        try:
            return prepare(self, sampled_token_ids, requests, gpu_input_batch, discard_request_mask)
        finally:
            self.backup_next_token_ids.copy_to_gpu = original_copy

    proposer.__init__ = init_keeping_the_runner
    proposer.prepare_next_token_ids_padded = prepare_with_the_next_prompt_token


PATCHES = {PROPOSER_MODULE: patch_proposer}
