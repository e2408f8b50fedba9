"""`python -m bench.server_ab TREE_A TREE_B [--requests N]`: `streamparse serve` of two checkouts (say
`git worktree add ../before <commit>` and this one) in front of one upstream, requests alternated.

`python -m bench.server` measures one proxy; on a shared machine its numbers move more from run to
run than a change moves them. Here both proxies run at once, in front of the same fake upstream
(tests/upstream.py, streaming a ~2,000-character Hermes output token by token), and each of N rounds
sends one streamed request to each, in turn, in alternating order: a change in the machine's load
falls on both. Per tree: the time to the first token (median, p25, p10) and the proxy's CPU per
request (its processes' CPU time across the request, from /proc). Linux only (/proc). A benchmark,
not a test: read the two trees' numbers against each other.

Where the machine has two CPUs or more, both proxies run on its last CPU and the client and the
upstream on the others (`--no-pin` to leave placement to the kernel): a proxy that shares its CPU with
the client or the upstream more often than the other does spends more CPU per request, a bias that
alternating the requests does not cancel (f1e8867 against a later main, on a quiet machine: +5.6% and
+5.2% unpinned, then +1.3%, +0.4% and +0.1% pinned, in five runs one after the other).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx

from .server import ROOT, TEMPLATE, _cpu_seconds, _proxied, _wait, free_port


def _serve(tree: Path, upstream: int, cpus: set[int] | None) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamparse", "serve", "--upstream", f"http://127.0.0.1:{upstream}/v1",
         "--chat-template", str(TEMPLATE), "--port", str(port), "--log-level", "warning", "--text-prompt"],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stderr=subprocess.DEVNULL)
    if cpus:  # before it starts a thread or a worker: they inherit it
        os.sched_setaffinity(process.pid, cpus)
    return f"http://127.0.0.1:{port}/v1", process


def _placement(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """(the proxies' CPUs, the client's and the upstream's), or (None, None) to leave it to the kernel."""
    available = sorted(os.sched_getaffinity(0)) if pin and hasattr(os, "sched_setaffinity") else []
    if len(available) < 2:
        return None, None
    return {available[-1]}, set(available[:-1])


async def _rounds(servers: dict[str, tuple[str, subprocess.Popen[bytes]]], requests: int,
                  ) -> dict[str, tuple[list[float], float]]:
    first: dict[str, list[float]] = {name: [] for name in servers}
    cpu = dict.fromkeys(servers, 0.0)
    async with httpx.AsyncClient(timeout=60) as client:
        for url, _ in servers.values():  # warm up: the first requests build caches
            for _ in range(10):
                await _proxied(client, url)
        for i in range(requests):
            for name in (list(servers) if i % 2 else list(reversed(servers))):
                url, process = servers[name]
                before = _cpu_seconds(process.pid)
                first[name].append((await _proxied(client, url))[0])
                cpu[name] += _cpu_seconds(process.pid) - before
    return {name: (first[name], cpu[name] / requests) for name in servers}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_ab", description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, type=Path, help="two checkouts of streamparse")
    parser.add_argument("--requests", type=int, default=300, help="rounds (one request to each proxy per round)")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="leave the processes' CPUs to the kernel (default: the proxies on the last CPU)")
    opts = parser.parse_args(argv)
    labels = [str(tree) for tree in opts.trees]
    if labels[0] == labels[1]:
        labels = [f"{labels[0]} (a)", f"{labels[1]} (b)"]
    upstream = free_port()
    proxies, others = _placement(opts.pin)
    if others:
        os.sched_setaffinity(0, others)  # the client; the upstream inherits it
    processes = [subprocess.Popen([sys.executable, str(ROOT / "tests" / "upstream.py"), str(upstream)])]
    try:
        _wait(f"http://127.0.0.1:{upstream}/health", processes[0])
        servers = {}
        for label, tree in zip(labels, opts.trees, strict=True):
            url, process = _serve(tree.resolve(), upstream, proxies)
            processes.append(process)
            _wait(url.removesuffix("/v1") + "/health", process)
            servers[label] = (url, process)
        results = asyncio.run(_rounds(servers, opts.requests))
    finally:
        for process in processes:
            process.terminate()
            process.wait()
    placed = f"proxies on CPU {sorted(proxies)}" if proxies else "placement left to the kernel"
    print(f"{opts.requests} streamed requests to each proxy, alternated, {placed}; "
          f"load average {os.getloadavg()[0]:.2f}")
    for label, (times, cpu) in results.items():
        ordered = sorted(times)
        print(f"{label}: time to first token median {1000 * statistics.median(ordered):.3f} ms, "
              f"p25 {1000 * ordered[len(ordered) // 4]:.3f} ms, p10 {1000 * ordered[len(ordered) // 10]:.3f} ms; "
              f"CPU per request {1000 * cpu:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
