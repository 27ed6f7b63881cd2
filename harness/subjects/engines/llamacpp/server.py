"""The llama.cpp engine server: runs inside llama.cpp's own environment (xllamacpp, llama.cpp's native server
built as a Python extension) and speaks the harness's wire protocol (harness/subjects/engines/wire.py).

This file is executed by that environment's Python (`python server.py`) and needs only the standard library,
xllamacpp and the servers' shared loop (harness/subjects/engines/serving/server_loop.py). The harness imports it
only for its pure parts (the request it sends, the log parser), which its unit tests check on recorded logs.

llama.cpp is tested as shipped: one `xllamacpp.Server` per configuration, with speculation `draft-mtp` (the
checkpoint's NextN layer drafting) and the draft length fixed when the server starts, requests sent as token ids
through the server's own completion handler. What the server adds is observation only:

- requests run in the server's parallel slots, one thread per slot, each request pinned to its slot
  (`id_slot`), so that the slot's log lines belong to it;
- the verification passes come from llama.cpp's own log: with LLAMA_TRACE set and verbosity 5 the server logs
  per slot and pass the drafted tokens (`draft candidate 0, pos i`), the draft it verified (`generate_draft:
  ... #draft=n`), the count the target accepted (`accepted a/n draft tokens`, or `... (restore checkpoint)`
  when a hybrid model restores its recurrent state and replays) and every token it emits (`next token: t`).
  llama.cpp writes its log to file descriptor 2: the server reads it through a pipe, parses it and passes the
  lines of level I and above on to the harness's engine log;
- the evidence that a deployed configuration happened (harness/subjects/engines/configurations.py) comes from the
  same log and the responses: prompt tokens taken from the slot's cache (`timings.cache_n`), prompts processed in
  more than one batch (a `cached n_tokens = n` line per batch of a prompt), tasks the server deferred because no
  slot was free (`no slot is available, defer task`), context shifts (`slot context shift`). Each reply carries the
  counters of its call.

Under the server's own queue (`server_queue`), requests are not pinned to slots: each result is matched to the
log's task on the slot the response names (`id_slot`) whose emitted tokens are the response's.
"""

from __future__ import annotations

import collections
import json
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

SEED_MODULUS = 0xFFFFFFFF  # llama.cpp's seeds are uint32 and 0xFFFFFFFF means "random": seeds are taken mod this
# the contract's law (temperature -> top-k -> top-p, harness/contract/decoder.py SamplingConfig) as a llama.cpp
# sampler chain: top-k commutes with temperature, top-p must see the tempered probabilities (llama.cpp's default
# chain applies temperature last, after top-p and min-p at temperature 1); nothing else (min-p, penalties, ...)
SAMPLERS = ["top_k", "temperature", "top_p"]
FINISH_REASONS = {"eos": "eos", "limit": "length", "word": "stop"}  # llama.cpp's stop_type -> the contract's
LOG_WAIT_SECONDS = 60.0
NO_TOKEN = -1  # an EOS id no token has: a request that ends at no token
BUILD_VARIABLE = "MTP_HARNESS_LLAMACPP_BUILD"  # a build from source: its record (JSON), for the run header

_LINE = re.compile(r"^\d+\.\d+\.\d+\.\d+ (?P<level>[A-Z]) (?P<message>.*)$")
# where a log record starts: a message written without its newline runs on into the next record's line
_RECORD_START = re.compile(r"(?<=[^\d\s])(?=\d+\.\d{2}\.\d{3}\.\d{3} [A-Z] )")
_SLOT = re.compile(r"^slot +\S+: id +(?P<slot>\d+) \| task (?P<task>-?\d+) \| (?P<text>.*)$")
_CANDIDATE = re.compile(r"^spec +\S+: +- seq_id (?P<seq>\d+), draft candidate +0, pos +(?P<pos>\d+): +(?P<token>\d+) ")
_LAUNCH = re.compile(r"^processing task")
_DRAFTED = re.compile(r"^generate_draft: id=\d+, #tokens=\d+, #draft=(?P<n>\d+),")
_NO_DRAFT = re.compile(r"^slot decode token, id=")
_ACCEPTED = re.compile(
    r"^accepted +(?P<accepted>\d+)/ *(?P<drafted>\d+) draft tokens(?P<restore> \(restore checkpoint\))?$"
)
_EMITTED = re.compile(r"^n_gen = (?P<n>\d+), n_remaining = -?\d+, next token: +(?P<token>\d+) ")
_RELEASED = re.compile(r"^stop processing")
_PROMPT_BATCH = re.compile(r"^cached n_tokens = \d+, memory_seq_rm")  # one per batch of a prompt's tokens
_DEFERRED = re.compile(r"^srv +\S+: no slot is available, defer task")
_SHIFTED = re.compile(r"^slot context shift, n_keep = ")
_SHIFT_OFF = re.compile(r"^srv +\S+: ctx_shift is not supported by this context, it will be disabled")


def completion_request(
    request: dict, slot: int, cache_prompt: bool = False, instrumented: bool = False, vocab_eos: tuple = ()
) -> dict:
    """The llama.cpp completion request for one wire request (harness/subjects/engines/wire.py), on `slot` (-1: the
    server chooses); `cache_prompt`: reuse the slot's cached prefix of the prompt; `instrumented`: a build with the
    harness's instrumentation (build.py), asked for the request's forced drafts, its pass records, and its own EOS
    ids where they are not the vocabulary's end-of-generation tokens `vocab_eos` (none: an id no token has)."""
    instrumentation: dict = {}
    if instrumented:
        instrumentation["harness_passes"] = True
        if request["forced_drafts"]:
            instrumentation["harness_forced_drafts"] = {str(p): int(t) for p, t in request["forced_drafts"].items()}
        if tuple(request["eos_token_ids"]) != tuple(vocab_eos):
            instrumentation["harness_eos_ids"] = [int(t) for t in request["eos_token_ids"]] or [NO_TOKEN]
    return {
        **instrumentation,
        "prompt": list(request["prompt_ids"]),  # token ids, used as they are (no BOS added)
        "n_predict": int(request["max_new_tokens"]),
        "temperature": float(request["temperature"]),
        "top_k": int(request["top_k"]),
        "top_p": float(request["top_p"]),
        "samplers": samplers_for(request),
        **feature_parameters(request),
        "seed": int(request["seed"]) % SEED_MODULUS,
        "id_slot": slot,
        "cache_prompt": cache_prompt,
        "return_tokens": True,
        "verbose": True,  # the token ids are in the completion's __verbose part
    }


def samplers_for(request: dict) -> list[str]:
    """The sampler chain: SAMPLERS, with the penalties first where the request has a repetition penalty and min-p after
    the temperature where it has a min_p (the contract's order: penalties, temperature, min-p, top-k, top-p; top-k
    before the temperature keeps the same tokens, and min-p's threshold is the top token's, which top-k keeps). A
    request without them runs the chain it always ran. llama.cpp applies the logit bias first whatever the chain."""
    samplers = list(SAMPLERS)
    if float(request.get("repetition_penalty", 1.0)) != 1.0:
        samplers.insert(0, "penalties")
    if float(request.get("min_p", 0.0)) > 0.0:
        samplers.insert(samplers.index("temperature") + 1, "min_p")
    return samplers


def feature_parameters(request: dict) -> dict:
    """The request features llama.cpp serves, as its /completion parameters (the harness's llama.cpp decoder refuses
    the others before a request reaches here)."""
    parameters: dict = {}
    if float(request.get("repetition_penalty", 1.0)) != 1.0:
        # the penalty window is every token the slot's sampler accepted: the prompt (init_sampler) and the output
        parameters |= {
            "repeat_penalty": float(request["repetition_penalty"]),
            "repeat_last_n": len(request["prompt_ids"]) + int(request["max_new_tokens"]),
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
        }
    if float(request.get("min_p", 0.0)) > 0.0:
        parameters["min_p"] = float(request["min_p"])
    if request.get("logit_bias"):
        parameters["logit_bias"] = [[int(token), float(bias)] for token, bias in request["logit_bias"]]
    constraint = request.get("structured_output")
    if constraint is not None:  # the decoder serves GBNF grammars only (decoder.py)
        parameters["grammar"] = str(constraint["spec"])
    if request.get("stop_strings"):
        parameters["stop"] = [str(text) for text in request["stop_strings"]]  # matched in the output's text
    if request.get("logprobs") is not None:
        parameters["n_probs"] = max(1, int(request["logprobs"]))  # 0 returns none; the top list is trimmed back
    return parameters


def token_logprobs(verbose: dict, tokens: list[int], top: int) -> list:
    """The wire's logprobs from a completion's `completion_probabilities` (pre-sampling: the raw logits' softmax), one
    per output token: llama.cpp may leave a token without an entry (the entries are a subsequence of the tokens,
    matched in order by id), which the wire says with null."""
    entries = iter(verbose.get("completion_probabilities", []))
    entry = next(entries, None)
    rows: list = []
    for token in tokens:
        if entry is None or int(entry["id"]) != token:
            rows.append(None)
            continue
        best = [[int(t["id"]), float(t["logprob"])] for t in entry["top_logprobs"][:top]]
        rows.append([token, float(entry["logprob"]), best])
        entry = next(entries, None)
    return rows


@dataclass
class Pass:
    """One verification pass of a slot, as llama.cpp logged it."""

    drafts: list[int] = field(default_factory=list)
    accepted: int = 0
    emitted: list[int] = field(default_factory=list)
    restored: bool = False  # a hybrid model's rejection: state restored, the accepted tokens replayed next
    # (position, hidden state) of the first token of each batch the MTP drafter took in since the pass before, as
    # llama.cpp paired them (an instrumented build's record; empty from the log)
    pairings: list[tuple[int, list[float]]] = field(default_factory=list)
    # the server iteration (update_slots call) that drafted and verified it: passes of one iteration were drafted in
    # one batch (an instrumented build's record; None from the log)
    iteration: int | None = None


@dataclass
class Task:
    """One request on one slot: its passes in order."""

    task: int
    passes: list[Pass] = field(default_factory=list)
    released: bool = False
    candidates: list[int] = field(default_factory=list)  # drafted tokens of the pass being drafted
    prompt_batches: int = 0


class LogParser:
    """llama.cpp's log (verbosity 5, LLAMA_TRACE), read line by line into each slot's tasks and their passes."""

    def __init__(self) -> None:
        self.slots: dict[int, list[Task]] = {}  # slot -> its tasks in the order they ran
        self.current: dict[int, Task] = {}  # slot -> the task it launched last (drafts name the slot only)
        self.tasks: dict[int, Task] = {}  # task id -> task (a task's last lines may follow the next one's launch)
        self.evidence: collections.Counter[str] = collections.Counter()  # configurations.EVIDENCE
        self.shift_turned_off = False  # llama.cpp said it turns context shift off for this model's memory

    def feed(self, raw: str) -> None:
        for record in _RECORD_START.split(raw.rstrip("\n")):
            self._feed_record(record)

    def _feed_record(self, raw: str) -> None:
        line = _LINE.match(raw)
        if line is None:
            return  # a continuation of a message that held a newline
        message = line["message"]
        if _SHIFT_OFF.match(message):
            self.shift_turned_off = True
            return
        if _DEFERRED.match(message):
            self.evidence["steps_with_requests_waiting"] += 1
            return
        candidate = _CANDIDATE.match(message)
        if candidate is not None:
            task = self.current.get(int(candidate["seq"]))
            if task is not None:
                del task.candidates[int(candidate["pos"]) :]
                task.candidates.append(int(candidate["token"]))
            return
        slot_line = _SLOT.match(message)
        if slot_line is None:
            return
        slot, text = int(slot_line["slot"]), slot_line["text"]
        if _LAUNCH.match(text):
            task = Task(int(slot_line["task"]), [Pass()])  # the first token comes from the prefill, undrafted
            self.current[slot] = self.tasks[task.task] = task
            self.slots.setdefault(slot, []).append(task)
            return
        task = self.tasks.get(int(slot_line["task"]))
        if task is None:
            return
        if _SHIFTED.match(text):
            self.evidence["context_shifts"] += 1
        elif _PROMPT_BATCH.match(text):
            task.prompt_batches += 1
            self.evidence["partial_prefills"] += int(task.prompt_batches > 1)  # the batch before this one
        elif (drafted := _DRAFTED.match(text)) is not None:
            task.passes.append(Pass(drafts=task.candidates[: int(drafted["n"])]))
            task.candidates = []
        elif _NO_DRAFT.match(text):
            task.passes.append(Pass())
            task.candidates = []
        elif (accepted := _ACCEPTED.match(text)) is not None:
            task.passes[-1].accepted = int(accepted["accepted"])
            task.passes[-1].restored = accepted["restore"] is not None
        elif (emitted := _EMITTED.match(text)) is not None:
            task.passes[-1].emitted.append(int(emitted["token"]))
        elif _RELEASED.match(text):
            task.released = True
            if self.current.get(slot) is task:
                del self.current[slot]

    def released(self, slot: int) -> int:
        return sum(task.released for task in self.slots.get(slot, []))


def recorded_task(verbose: dict, index: int) -> Task:
    """The passes an instrumented build recorded for a request (`harness_passes` of its response), as a Task. A build
    without the instrumentation ignores the request's fields and returns none: that stops here, never read as a run
    with nothing forced."""
    passes = verbose.get("harness_passes")
    if passes is None:
        raise RuntimeError(
            f"request {index}: llama.cpp returned no pass records (harness_passes): this build lacks the harness's "
            "instrumentation, so its forced drafts were not applied either"
        )
    fields = ("drafts", "accepted", "emitted", "restored")
    return Task(
        -1,
        [
            Pass(
                **{name: record[name] for name in fields},
                pairings=[(int(pair["pos"]), [float(x) for x in pair["h"]]) for pair in record.get("pairings", [])],
                iteration=record.get("iteration"),
            )
            for record in passes
        ],
        released=True,
    )


def parse_log(lines: Iterable[str]) -> dict[int, list[Task]]:
    """Slot -> its tasks in the order they ran, with their passes."""
    parser = LogParser()
    for line in lines:
        parser.feed(line)
    return parser.slots


def steps_of(task: Task) -> list[dict]:
    """The contract's verification steps (wire form) of a task."""
    return [step for step, _ in _steps_and_passes(task)]


def engine_steps_of(task: Task) -> list[int] | None:
    """The server iteration of each of the task's verification steps (DecodeResult.engine_steps): that of the pass
    that drafted it (a replay's further token: the replay's). None where a pass carries no iteration (the log's)."""
    passes = task.passes
    iterations = [passes[index].iteration if index < len(passes) else None for _, index in _steps_and_passes(task)]
    return None if any(i is None for i in iterations) else [int(i) for i in iterations]  # type: ignore[arg-type]


def _steps_and_passes(task: Task) -> list[tuple[dict, int]]:
    """Each verification step (wire form) of a task with the index of the pass that drafted it. A restored pass
    (hybrid rollback) is the pass that drafted: it committed its accepted drafts and the target's token, which
    llama.cpp emits in the replay that follows; the replay's one further token is a pass without drafts."""
    steps, start = [], 0
    passes = list(enumerate(task.passes))
    while passes:
        index, current = passes.pop(0)
        emitted = current.emitted
        if current.restored:
            replay_index, replay = passes.pop(0) if passes else (index + 1, Pass())
            emitted = replay.emitted[: current.accepted + 1]
            if replay.emitted[current.accepted + 1 :]:
                passes.insert(0, (replay_index, Pass(emitted=replay.emitted[current.accepted + 1 :])))
        if not emitted and not current.restored:
            continue  # a pass whose slot stopped before it emitted (no such pass commits anything)
        steps.append(
            ({"start": start, "drafts": current.drafts, "accepted": current.accepted, "emitted": emitted}, index)
        )
        start += len(emitted)
    return steps


def first_position(task: Task) -> int:
    """The position of the task's first batch: where its prompt's processing began (0 without a cached prefix)."""
    return task.passes[0].pairings[0][0] if task.passes and task.passes[0].pairings else 0


def hidden_pairings(task: Task, inherited: dict[int, list[float]]) -> tuple[list[dict], dict[int, list[float]]]:
    """The MTP drafter's pairings of a task (wire form, DecodeResult.hidden_pairings), and the pairings its slot's
    MTP cache holds after it that are not the target's own (what the slot's next task inherits with a cached prefix).

    llama.cpp pairs the first token of each batch it takes in (at position p) with the state it kept from the
    sequence's last batch (`pending_h`); every other token with the target's hidden state at p - 1 from the same
    batch. That kept state is the target's at p - 1 except where a finding says it is stale: the task's first batch
    (zeros on a fresh slot, the slot's previous task's last state after that) and, on a hybrid, the replay after a
    restored rejection (the last rejected draft's state). Those pairings carry llama.cpp's state; the others carry
    none (`hidden` null: the target's own at p - 1, the only state a correct engine can pair there). `inherited`: the
    stale pairings of the cached state the task starts from (Engine._cached_prefix_pairings), which a cached prefix
    below the task's first position keeps.
    Each pairing names the step whose drafts came after it (the pass it preceded drafted after it)."""
    steps = _steps_and_passes(task)
    drafted_at = [index for _, index in steps]
    events: list[dict] = []
    first = first_position(task)
    for position in sorted(p for p in inherited if p < first):
        events.append({"step": 0, "position": position, "hidden": inherited[position]})
    for index, current in enumerate(task.passes):
        step = next((s for s, at in enumerate(drafted_at) if at > index), len(steps))
        replay = index > 0 and task.passes[index - 1].restored
        for number, (position, hidden) in enumerate(current.pairings):
            stale = number == 0 and (index == 0 or replay)
            events.append({"step": step, "position": position, "hidden": hidden if stale else None})
    kept: dict[int, list[float]] = {}
    for event in events:  # a batch from position p rewrites the MTP cache from p on
        kept = {p: h for p, h in kept.items() if p < event["position"]}
        if event["hidden"] is not None:
            kept[event["position"]] = event["hidden"]
    return events, kept


class LogPipe:
    """llama.cpp's log (file descriptor 2) read through a pipe into a LogParser; the lines of level I and above are
    passed on to the harness's engine log."""

    def __init__(self) -> None:
        self.harness_log = os.fdopen(os.dup(2), "w", buffering=1)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.parser = LogParser()
        self.changed = threading.Condition()
        threading.Thread(target=self._read, args=(os.fdopen(read_end, errors="replace"),), daemon=True).start()

    def _read(self, stream) -> None:  # noqa: ANN001 - a text file
        for line in stream:
            parsed = _LINE.match(line)
            if parsed is None or parsed["level"] != "D":
                self.harness_log.write(line)
            with self.changed:
                self.parser.feed(line)
                self.changed.notify_all()

    def take(self, released: dict[int, int], timeout: float) -> tuple[dict[int, list[Task]], LogParser]:
        """Once each slot has released `released[slot]` tasks (at most `timeout` seconds): the tasks parsed since
        the last take, and the parser that read them (its evidence); the parser starts afresh."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not all(self.parser.released(slot) >= n for slot, n in released.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"llama.cpp's log did not show every request's end within {timeout:.0f} s")
                self.changed.wait(left)
            parser, self.parser = self.parser, LogParser()
        return parser.slots, parser


class Engine:
    """One llama.cpp server (in this process), with speculation draft-mtp at n_max = k, or none for k = 0."""

    def __init__(self, config: dict) -> None:
        os.environ["LLAMA_TRACE"] = "1"  # read once when the server loads the model: the per-pass accepted counts
        self.log = LogPipe()
        import xllamacpp

        self.config = config
        self.version = xllamacpp.__version__
        self.instrumented = bool(config.get("instrumented", False))  # pass records from the responses, forced drafts
        self.vocab_eos = tuple(config.get("eos_token_ids", ()))  # the vocabulary's end-of-generation tokens
        self.slots = int(config.get("parallel", 4))
        params = xllamacpp.CommonParams()
        params.model.path = config["gguf"]
        params.n_parallel = self.slots
        params.n_ctx = int(config["n_ctx"]) * self.slots  # per slot: n_ctx / n_parallel (kv_unified off)
        threads = int(config.get("threads", 1))
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        # f32 KV caches and no flash attention, for the target and the MTP context: with llama.cpp's defaults (f16
        # KV, flash attention auto) the logits are 1e-3 off the checkpoint's (docs/engines/llamacpp.md; 4e-6 with them)
        f32, no_flash = (
            xllamacpp.ggml_type.GGML_TYPE_F32,
            xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        )
        params.cache_type_k = params.cache_type_v = f32
        params.flash_attn_type = no_flash
        params.warmup = False
        params.fit_params = False
        self.cache_prompt = bool(config.get("cache_prompt", False))  # reuse a slot's cached prompt prefix
        if not self.cache_prompt:
            params.cache_ram_mib = 0  # no prompt cache between requests: every request starts from its own prompt
        if config.get("n_batch"):  # prompts processed in batches of this many tokens
            params.n_batch = params.n_ubatch = int(config["n_batch"])
        self.server_queue = bool(config.get("server_queue", False))  # requests wait in the server's own queue
        # under prompt caching, each finished task's tokens and the stale pairings its MTP cache held at its end
        # (hidden_pairings' second value): what a later task that reuses a prefix of those tokens starts from
        self.cached_states: list[tuple[int, tuple[int, ...], dict[int, list[float]]]] = []  # (slot, tokens, pairings)
        params.ctx_shift = bool(config.get("ctx_shift", False))  # a full slot discards its older half and goes on
        self.evidence: collections.Counter[str] = collections.Counter()
        params.verbosity = 5  # the per-pass lines (parse_log)
        k = int(config.get("num_draft_tokens", 0))
        if k:
            params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_MTP]
            draft = params.speculative.draft
            draft.n_max = draft.n_min = k  # k drafts whenever the slot has room for them
            draft.p_min = 0.0  # no probability cut-off
            draft.cache_type_k = draft.cache_type_v = f32
        self.server = xllamacpp.Server(params)
        _, start_up = self.log.take({}, LOG_WAIT_SECONDS)  # the start-up lines
        self.context_shift = params.ctx_shift and not start_up.shift_turned_off  # the effective setting

    def take_evidence(self) -> dict:
        taken, self.evidence = dict(self.evidence), collections.Counter()
        taken["context_shift"] = int(self.context_shift)
        return taken

    def describe(self) -> dict:
        build = json.loads(os.environ.get(BUILD_VARIABLE) or "null")  # the build's record (build.py), None: the wheel
        runner = "source" if self.instrumented else "wheel"  # the instrumented build is the one built from source
        fixes = [p["name"].removeprefix("fix:") for p in (build or {}).get("patches", []) if p["role"] == "fix"]
        return {"name": "llama.cpp", "version": self.version, "config": self.config, "fixes": fixes, "build": build,
                "runner": runner}  # fmt: skip

    def decode(self, requests: list[dict]) -> list[dict]:
        """Each request on its own thread: pinned to slot index mod slots and queued behind that slot's earlier
        requests by default; all at once into the server's own queue under `server_queue`."""
        if self.server_queue:
            queues = [[index] for index in range(len(requests))]
        else:
            queues = [list(range(slot, len(requests), self.slots)) for slot in range(self.slots)]
        responses: dict[int, dict] = {}

        def serve(queue: list[int]) -> None:
            for index in queue:
                slot = -1 if self.server_queue else index % self.slots
                request = completion_request(
                    requests[index], slot, self.cache_prompt, self.instrumented, self.vocab_eos
                )
                responses[index] = self.server.handle_completions(request)

        threads = [threading.Thread(target=serve, args=(queue,)) for queue in queues if queue]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        errors = [(i, r["error"]) for i, r in sorted(responses.items()) if "error" in r]
        if errors:
            raise RuntimeError(f"llama.cpp refused request {errors[0][0]}: {errors[0][1]}")
        slots = [int(responses[index]["__verbose"]["id_slot"]) for index in range(len(requests))]
        tasks, parser = self.log.take(collections.Counter(slots), LOG_WAIT_SECONDS)
        self.evidence.update(parser.evidence)
        self.evidence["prefix_cache_hit_tokens"] += sum(
            int(responses[index]["timings"].get("cache_n", 0)) for index in range(len(requests))
        )
        unmatched = {slot: list(slot_tasks) for slot, slot_tasks in tasks.items()}
        return [
            self._result(requests[index], responses[index], unmatched, index, slots[index])
            for index in range(len(requests))
        ]

    def next_token_logprobs(self, prompts: list[list[int]], vocab_size: int) -> list[list[list[float]]]:
        """Per prompt and per prefix (lengths 1..len): the target's next-token log-probabilities over the whole
        vocabulary, as llama.cpp computes them (the prefill's raw logits at temperature 1, `n_probs` = V)."""
        out = []
        for prompt in prompts:
            rows = []
            for length in range(1, len(prompt) + 1):
                request = {
                    "prompt": prompt[:length],
                    "n_predict": 1,
                    "temperature": 0.0,
                    "n_probs": vocab_size,
                    "cache_prompt": False,
                    "verbose": True,
                    "id_slot": 0,
                }
                response = self.server.handle_completions(request)
                if "error" in response:
                    raise RuntimeError(f"llama.cpp refused a log-probability request: {response['error']}")
                row = [float("-inf")] * vocab_size
                for entry in response["__verbose"]["completion_probabilities"][0]["top_logprobs"]:
                    row[entry["id"]] = entry["logprob"]
                rows.append(row)
            out.append(rows)
        self.log.take({0: sum(len(p) for p in prompts)}, LOG_WAIT_SECONDS)
        return out

    def _cached_prefix_pairings(self, prompt: tuple[int, ...], slot: int, first: int) -> dict[int, list[float]]:
        """The stale pairings of the cached state a task whose first batch starts at `first` started from. llama.cpp
        keeps the slot's own state where it shares enough of the prompt, or else restores from its RAM prompt cache
        the saved state that keeps the most of it (tools/server/server-context.cpp get_available_slot,
        server-task.cpp server_prompt_cache::load); either holds the tokens of a task that ran before: the slot's last
        task when it holds the reused prefix, else the latest task that shares the longest prefix with the prompt."""

        def shared(tokens: tuple[int, ...]) -> int:
            different = (i for i, (a, b) in enumerate(zip(tokens, prompt, strict=False)) if a != b)
            return next(different, min(len(tokens), len(prompt)))

        own = [i for i, (on, _, _) in enumerate(self.cached_states) if on == slot]
        if own and shared(self.cached_states[own[-1]][1]) >= first:
            return self.cached_states[own[-1]][2]
        order = range(len(self.cached_states))
        best = max(order, key=lambda i: (shared(self.cached_states[i][1]), i), default=None)
        return {} if best is None else self.cached_states[best][2]

    def _result(self, request: dict, response: dict, tasks: dict[int, list[Task]], index: int, slot: int) -> dict:
        """The request's result, with its passes from the log's tasks left on its slot (the task is used up): pinned
        requests ran in order on their slot, the first task left is theirs; under the server's queue, the first task
        left whose emitted tokens are the response's."""
        verbose = response["__verbose"]
        tokens = list(verbose["tokens"])
        left = tasks.get(slot, [])
        if self.server_queue:
            task = next((t for t in left if [x for s in steps_of(t) for x in s["emitted"]] == tokens), None)
        else:
            task = left[0] if left else None
        if task is None:
            raise RuntimeError(
                f"request {index} (slot {slot}): no task of llama.cpp's log on that slot emitted {tokens}"
            )
        left.remove(task)
        finish = FINISH_REASONS.get(verbose.get("stop_type"))
        if finish is None:
            raise RuntimeError(f"request {index}: llama.cpp stopped with {verbose.get('stop_type')!r}")
        result: dict = {}
        if self.instrumented:
            task = recorded_task(verbose, index)
            prompt = tuple(request["prompt_ids"])
            first = first_position(task)
            inherited = self._cached_prefix_pairings(prompt, slot, first) if self.cache_prompt and first else {}
            result["hidden_pairings"], left = hidden_pairings(task, inherited)
            if self.cache_prompt:
                self.cached_states.append((slot, (*prompt, *tokens), left))
        steps = steps_of(task)
        logged = [token for step in steps for token in step["emitted"]]
        if logged != tokens:
            source = "the recorded passes" if self.instrumented else "the log's passes"
            raise RuntimeError(
                f"request {index} (slot {slot}, task {task.task}): {source} emit {logged}, the completion holds "
                f"{tokens}"
            )
        engine_steps = engine_steps_of(task)
        if engine_steps is not None:
            result["engine_steps"] = engine_steps
        if request.get("logprobs") is not None:
            result["logprobs"] = token_logprobs(verbose, tokens, int(request["logprobs"]))
        return {"token_ids": tokens, "finish_reason": finish, "steps": steps, **result}


def main() -> None:
    from server_loop import serve  # on this process's PYTHONPATH (harness/subjects/engines/serving/)

    serve(
        Engine,
        {
            "decode": lambda engine, message: engine.decode(message["requests"]),
            # the fixtures' check (tests/test_llamacpp_fixtures.py)
            "next_token_logprobs": lambda engine, message: engine.next_token_logprobs(
                message["prompts"], int(message["vocab_size"])
            ),
        },
    )


if __name__ == "__main__":
    main()
