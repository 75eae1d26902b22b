"""Command line: `kubesim serve --scenario NAME_OR_PATH --kubeconfig FILE [--port N] [--plain-http]`,
`kubesim scenarios`."""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from . import scenario as scenarios


def _serve(args: argparse.Namespace) -> int:
    from .simulator import Simulator
    try:
        sim = Simulator(args.scenario, host=args.host, port=args.port, verbose=args.verbose,
                        plain_http=args.plain_http)
    except (scenarios.ScenarioError, ValueError) as exc:
        print(f"kubesim: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kubesim: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    sim.write_kubeconfig(args.kubeconfig)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    sim.start()
    print(f"ready {sim.url}", flush=True)
    stop.wait()
    sim.stop()
    print("kubesim: stopped", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubesim", description="A local Kubernetes API simulator for tests.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a scenario until SIGTERM/SIGINT")
    serve.add_argument("--scenario", required=True, help="scenario name (see `kubesim scenarios`) or YAML path")
    serve.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig (contexts workload, global)")
    serve.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--verbose", action="store_true", help="log every request on stderr")
    serve.add_argument("--plain-http", action="store_true",
                       help="serve plain HTTP instead of HTTPS (the kubeconfig then carries the admin token)")
    sub.add_parser("scenarios", help="list the bundled scenarios")
    args = parser.parse_args(argv)
    if args.command == "scenarios":
        for name in scenarios.available():
            print(name)
        return 0
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
