"""The llama.cpp subject reads each verification pass from llama.cpp's own log (harness/subjects/engines/
llamacpp/server.py): checked on logs llama.cpp 2026.10.11549 (xllamacpp) wrote, one task of tiny-glm4-moe and
one of the hybrid tiny-qwen3-next (whose rejections restore a recurrent-state checkpoint and replay), both at
k = 2 with greedy sampling, 12 tokens."""

from __future__ import annotations

from pathlib import Path

from harness.subjects.engines.llamacpp.server import completion_request, parse_log, steps_of

DATA = Path(__file__).parent / "data"


def steps(log, slot):
    [task] = parse_log((DATA / log).read_text().splitlines(keepends=True))[slot]
    assert task.released
    return [(s["start"], tuple(s["drafts"]), s["accepted"], tuple(s["emitted"])) for s in steps_of(task)]


def test_passes_of_an_attention_model_are_read_from_the_log():
    passes = steps("llamacpp-glm4-moe-k2-slot0.log", 0)
    assert passes[:4] == [
        (0, (), 0, (269,)),  # the prefill's token, undrafted
        (1, (5, 2), 0, (28,)),
        (2, (28, 28), 2, (28, 28, 28)),
        (5, (28, 30), 1, (28, 28)),
    ]
    assert [t for *_, emitted in passes for t in emitted] == [269] + [28] * 11
    assert all(len(drafts) <= 2 for _, drafts, _, _ in passes)


def test_a_hybrid_models_restore_and_replay_is_the_pass_that_drafted_then_one_undrafted_pass():
    passes = steps("llamacpp-qwen3-next-k2-slot1.log", 1)
    assert passes[:8] == [
        (0, (), 0, (9,)),
        (1, (340, 221), 0, (199,)),  # rejected: state restored, then the replay commits 199 and samples 199
        (2, (), 0, (199,)),
        (3, (341, 269), 0, (33,)),
        (4, (), 0, (78,)),
        (5, (733, 12), 0, (335,)),
        (6, (), 0, (911,)),
        (7, (537, 10), 2, (537, 10, 292)),  # fully accepted: no restore
    ]
    assert [t for *_, emitted in passes for t in emitted] == [9, 199, 199, 33, 78, 335, 911, 537, 10, 292, 409, 261]


def test_a_record_written_without_its_newline_and_token_texts_with_newlines_do_not_lose_a_pass():
    lines = [
        "0.00.001.000 I slot launch_slot_: id  3 | task 7 | processing task, is_child = 0\n",
        "0.00.002.000 D No parser definition detected, assuming pure content parser."
        "0.00.002.001 D slot process_toke: id  3 | task 7 | n_gen = 1, n_remaining = 2, next token:    11 '\n",
        "'\n",  # the rest of a token text that held a newline
        "0.00.003.000 D spec        draft:  - seq_id 3, draft candidate   0, pos   0:    12 (   0.500) 'a\n",
        "0.00.003.500 D slot handle_last_: id  3 | task 7 | generate_draft: id=11, #tokens=4, #draft=1, pos_next=4\n",
        "0.00.004.000 I slot   operator(): id  3 | task 7 | accepted  1/ 1 draft tokens\n",
        "0.00.004.001 D slot process_toke: id  3 | task 7 | n_gen = 2, n_remaining = 1, next token:    12 'a\n",
        "0.00.004.002 D slot process_toke: id  3 | task 7 | n_gen = 3, n_remaining = 0, next token:    13 'b\n",
        "0.00.005.000 I slot      release: id  3 | task 7 | stop processing: n_tokens = 7, truncated = 0\n",
    ]
    [task] = parse_log(lines)[3]
    assert steps_of(task) == [
        {"start": 0, "drafts": [], "accepted": 0, "emitted": [11]},
        {"start": 1, "drafts": [12], "accepted": 1, "emitted": [12, 13]},
    ]


def test_the_request_asks_for_the_contracts_law_and_a_seed_llama_cpp_does_not_take_for_random():
    wire = {"prompt_ids": [5, 6], "max_new_tokens": 3, "temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 2**32 - 1}
    request = completion_request(wire, slot=2)
    assert request["samplers"] == ["top_k", "temperature", "top_p"]  # top-p on the tempered law, nothing else
    assert request["seed"] == 0 and request["id_slot"] == 2 and request["prompt"] == [5, 6]
    assert completion_request({**wire, "seed": 7}, 0)["seed"] == 7


def test_a_request_without_features_runs_the_chain_it_always_ran_and_each_feature_its_own_parameters():
    """Features change the chain only for a request that uses them: an unforced plain request's completion is
    unchanged. A repetition penalty puts llama.cpp's penalties first over the prompt and the output (frequency and
    presence off: llama.cpp would count the prompt); min-p comes right after the temperature (the contract's order)."""
    wire = {"prompt_ids": [5, 6], "max_new_tokens": 3, "temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 1,
            "eos_token_ids": [], "forced_drafts": {}, "min_p": 0.0, "repetition_penalty": 1.0,
            "frequency_penalty": 0.0, "presence_penalty": 0.0, "logit_bias": [], "min_tokens": 0,
            "stop_sequences": [], "logprobs": None}  # fmt: skip
    plain = completion_request(wire, slot=0)
    assert plain["samplers"] == ["top_k", "temperature", "top_p"]
    assert not {"repeat_penalty", "min_p", "logit_bias", "n_probs"} & set(plain)
    featured = completion_request(
        {**wire, "repetition_penalty": 1.3, "min_p": 0.1, "logit_bias": [[3, -1.5]], "logprobs": 0}, slot=0
    )
    assert featured["samplers"] == ["penalties", "top_k", "temperature", "min_p", "top_p"]
    assert featured["repeat_penalty"] == 1.3 and featured["repeat_last_n"] == 5
    assert featured["frequency_penalty"] == featured["presence_penalty"] == 0.0
    assert featured["min_p"] == 0.1 and featured["logit_bias"] == [[3, -1.5]] and featured["n_probs"] == 1


def test_the_log_counts_prompts_processed_in_several_batches_and_tasks_deferred_for_want_of_a_slot():
    """Lines as llama.cpp 2026.10.11549 writes them with n_batch 16 and 2 slots for 4 requests (one `cached n_tokens`
    line per batch of a prompt; a deferral when every slot is busy), under context shift, and when it turns context
    shift off for a model: the evidence of three deployed configurations."""
    from harness.subjects.engines.llamacpp.server import LogParser

    lines = [
        "0.00.023.929 I slot launch_slot_: id  1 | task 0 | processing task, is_child = 0\n",
        "0.00.023.954 I slot launch_slot_: id  0 | task 1 | processing task, is_child = 0\n",
        "0.00.023.956 D srv  process_sing: no slot is available, defer task, id_task = 2\n",
        "0.00.023.967 I slot   operator(): id  0 | task 1 | cached n_tokens = 0, memory_seq_rm [0, end)\n",
        "0.00.029.847 D srv  process_sing: no slot is available, defer task, id_task = 3\n",
        "0.00.030.070 I slot   operator(): id  0 | task 1 | cached n_tokens = 16, memory_seq_rm [16, end)\n",
        "0.00.031.362 I slot   operator(): id  0 | task 1 | cached n_tokens = 32, memory_seq_rm [32, end)\n",
        "0.00.034.476 I slot   operator(): id  0 | task 1 | cached n_tokens = 48, memory_seq_rm [48, end)\n",
        "0.00.034.502 I slot   operator(): id  1 | task 0 | cached n_tokens = 0, memory_seq_rm [0, end)\n",
        "0.00.317.055 W slot   operator(): id  0 | task 1 | slot context shift, n_keep = 0, n_left = 255, n_discard = 127\n",
    ]
    parser = LogParser()
    for line in lines:
        parser.feed(line)
    assert parser.evidence == {"steps_with_requests_waiting": 2, "partial_prefills": 3, "context_shifts": 1}
    assert not parser.shift_turned_off
    parser.feed("0.00.020.000 W srv    load_model: ctx_shift is not supported by this context, it will be disabled\n")
    assert parser.shift_turned_off


def test_each_step_takes_the_server_iteration_of_the_pass_that_drafted_it_and_a_replays_further_token_the_replays():
    """An instrumented build's records (recorded_task) number the iteration of each pass: a hybrid's restored pass and
    its replay make one step, at the iteration that drafted it; the replay's further token is a step at the replay's."""
    from harness.subjects.engines.llamacpp.server import engine_steps_of, recorded_task

    def record(drafts, accepted, emitted, restored, iteration):
        return {
            "drafts": drafts,
            "accepted": accepted,
            "emitted": emitted,
            "restored": restored,
            "iteration": iteration,
        }

    passes = [
        record([], 0, [9], False, 3),  # the prefill's token
        record([340, 221], 0, [], True, 4),  # rejected: state restored, its tokens emitted by the replay
        record([], 0, [199, 199], False, 5),  # the replay: the kept token, then the target's next one
        record([537, 10], 2, [537, 10, 292], False, 6),
    ]
    task = recorded_task({"harness_passes": passes}, 0)
    assert [(s["start"], s["drafts"], s["emitted"]) for s in steps_of(task)] == [
        (0, [], [9]),
        (1, [340, 221], [199]),
        (2, [], [199]),
        (3, [537, 10], [537, 10, 292]),
    ]
    assert engine_steps_of(task) == [3, 4, 5, 6]
    passes[0].pop("iteration")  # a build that numbers no iterations (or the log's passes): none
    assert engine_steps_of(recorded_task({"harness_passes": passes}, 0)) is None
