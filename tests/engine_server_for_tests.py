"""An engine server in the harness's wire format, for the engine-process tests: run by the harness's own
Python, it decodes with the harness's MTPDecoder (so its results must equal the in-process decoder's), or
misbehaves the way its configuration's "mode" asks."""

import json
import sys
import time

from harness.decoding.mtp_decoder import MTPDecoder
from harness.models.loading import load_bundle
from harness.subjects.engines.serving.server_loop import PROTOCOL
from harness.subjects.engines.wire import parse_request, result_message


def main() -> None:
    config = json.loads(sys.stdin.readline())
    mode = config.get("mode", "ok")
    if mode == "exit-at-start":
        print("loading the model failed: out of memory (simulated)", file=sys.stderr)
        sys.exit(3)
    if mode == "hang-at-start":  # a start that never answers
        time.sleep(3600)
    if mode == "not-ready":
        print(json.dumps({"ready": False, "error": "ValueError: head_dim 16 is not supported (simulated)"}))
        return
    decoder = MTPDecoder(load_bundle(config["model"], dtype=config["dtype"]))
    print(json.dumps({"ready": True, "protocol": PROTOCOL, "engine": {"name": "harness-mtp", "version": "test"}}))
    sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        if message["op"] == "shutdown":
            break
        if mode == "exit-on-decode":
            sys.exit(4)
        if mode == "hang-on-decode":  # an engine stuck inside a step: it never answers
            time.sleep(3600)
        if mode == "garbage":
            print("this is not JSON", flush=True)
            continue
        requests = [parse_request(r, config["num_draft_tokens"], config["draft_mode"]) for r in message["requests"]]
        results = [result_message(result) for result in decoder.decode(requests)]
        print(json.dumps({"id": message["id"], "results": results}), flush=True)


if __name__ == "__main__":
    main()
