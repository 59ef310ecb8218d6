#!/usr/bin/env python3
"""A lockstep reward server in Python: copy this file and change `score`.

Serves lockstep.v1.Reward (proto/reward.proto) on 127.0.0.1 with Debian's python3-grpcio.
The Python stubs are generated at start-up from the .proto with protoc and protoc's Python gRPC
plugin (Debian package protobuf-compiler-grpc) into a temporary directory: nothing generated is
kept in the source tree.

    /usr/bin/python3 rewards/examples/python/reward_server.py --port 50051 \
        [--auth-token-file FILE] [--host 127.0.0.1]

Prints "serving on HOST:PORT" once it listens (--port 0 picks a free port), and stops cleanly on
SIGINT / SIGTERM.
"""
import argparse
import hmac
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent import futures

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


# ---------------------------------------------------------------------------------------------
# Your reward. Return (reward, sub_scores); raise to mark the item as failed (never return 0 for
# "could not judge": the trainer must know the difference).

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def last_number(text):
    """The last number in `text` as a float (thousands separators allowed), or None."""
    matches = NUMBER.findall(text)
    if not matches:
        return None
    return float(matches[-1].replace(",", ""))


def score(item):
    """1 when the completion's last number equals the reference answer's, else 0."""
    if not item.reference_answer.strip():
        raise ValueError("the item has no reference answer")
    expected = last_number(item.reference_answer)
    if expected is None:
        raise ValueError(f"reference {item.reference_answer!r} holds no number")
    said = last_number(item.completion)
    found = 0.0 if said is None else 1.0
    correct = 1.0 if said is not None and abs(said - expected) <= 1e-9 else 0.0
    return correct, {"correct": correct, "format": found}


# ---------------------------------------------------------------------------------------------
# Plumbing: stubs, auth, serving. Nothing below needs changing for a new reward.


def generate_stubs(proto_root, out_dir):
    """Runs protoc with the Python gRPC plugin; returns the directory to put on sys.path."""
    plugin = shutil.which("grpc_python_plugin")
    protoc = shutil.which("protoc")
    if plugin is None or protoc is None:
        sys.exit("reward_server.py: needs protoc and grpc_python_plugin "
                 "(apt-get install protobuf-compiler protobuf-compiler-grpc)")
    subprocess.run([protoc, "-I", proto_root, f"--python_out={out_dir}", f"--grpc_out={out_dir}",
                    f"--plugin=protoc-gen-grpc={plugin}",
                    os.path.join(proto_root, "proto", "reward.proto")], check=True)
    return out_dir


def make_servicer(reward_pb2, reward_pb2_grpc, token):
    expected = f"Bearer {token}" if token else None

    class Reward(reward_pb2_grpc.RewardServicer):
        def Score(self, request, context):
            if expected is not None:
                sent = dict(context.invocation_metadata()).get("authorization", "")
                if not hmac.compare_digest(sent.encode(), expected.encode()):
                    context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong auth token")
            response = reward_pb2.ScoreResponse()
            for item in request.items:
                out = response.scores.add(id=item.id)  # exactly one score per item, in order
                try:
                    value, sub_scores = score(item)
                    if not math.isfinite(value):
                        raise ValueError(f"non-finite reward {value}")
                    out.reward = value
                    out.sub_scores.update(sub_scores)
                except Exception as error:  # one bad item never fails the batch
                    out.error = f"{type(error).__name__}: {error}"
            return response

    return Reward()


def add_health_service(server):
    """grpc.health.v1.Health/Check answering SERVING (what `lockstep run` waits for before it
    sends work), without needing the grpcio-health-checking package."""
    serving = b"\x08\x01"  # HealthCheckResponse{status: SERVING}, serialized by hand

    def check(request, context):
        return serving

    handler = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)})
    server.add_generic_rpc_handlers((handler,))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback default)")
    parser.add_argument("--port", type=int, default=50051, help="0 = any free port")
    parser.add_argument("--auth-token-file", default="", help="calls must carry this token")
    parser.add_argument("--proto-root", default=DEFAULT_PROTO_ROOT,
                        help="directory holding proto/reward.proto")
    parser.add_argument("--workers", type=int, default=16, help="threads serving calls")
    args = parser.parse_args()

    token = ""
    if args.auth_token_file:
        with open(args.auth_token_file, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            sys.exit(f"reward_server.py: auth token file {args.auth_token_file} is empty")

    stubs_dir = tempfile.mkdtemp(prefix="lockstep_reward_stubs_")
    try:
        sys.path.insert(0, generate_stubs(args.proto_root, stubs_dir))
        from proto import reward_pb2, reward_pb2_grpc  # noqa: E402 (generated just above)
    finally:
        # The modules are loaded; the generated files are not needed any more.
        shutil.rmtree(stubs_dir, ignore_errors=True)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers))
    reward_pb2_grpc.add_RewardServicer_to_server(
        make_servicer(reward_pb2, reward_pb2_grpc, token), server)
    add_health_service(server)
    port = server.add_insecure_port(f"{args.host}:{args.port}")
    if port == 0:
        sys.exit(f"reward_server.py: cannot listen on {args.host}:{args.port}")
    server.start()
    print(f"serving on {args.host}:{port}", flush=True)

    stop = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
