"""`python -m bench.server`: what `streamparse serve` adds in front of an upstream.

Starts the fake upstream of tests/upstream.py (its own process, streaming a ~2,000-character Hermes
output token by token as fast as it can) and `streamparse serve` in front of it, then measures
against the same upstream called directly:
- latency to the first streamed token (median of sequential requests; proxy: the first chunk with
  reasoning or content, direct: the first completion chunk with text), and of the proxy's, how much
  passed inside it, from the request's arrival to its first token (the mean its `/metrics` gives);
- the proxy's added CPU per streamed upstream chunk (its processes' CPU time / chunks they read);
- throughput with 64 concurrent streams (requests/s and upstream chunks/s, direct and through the proxy);
- the proxy's CPU per upstream chunk on each API's streaming path (chat completions, Responses,
  Anthropic Messages, Ollama's chat) for the same answer, as a ratio to chat completions'.
`--workers N` runs the proxy with N processes (default 1, the single process measured before
`--workers` existed). Needs the server extra. Prints a table; `--json` prints the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from upstream import bench_output, free_port, tokens  # noqa: E402

MESSAGES = [{"role": "user", "content": "[[bench]] What is the weather in Paris?"}]
TEMPLATE = ROOT / "fixtures" / "hermes" / "chat_template.jinja"


def _cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and its worker processes (`--workers`): the nanoseconds each of their threads
    ran (/proc/PID/task/TID/schedstat), where /proc/PID/stat counts in clock ticks (10 ms), as coarse as
    a whole request."""
    own = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            own += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return own / 1e9 + sum(_cpu_seconds(int(child)) for child in children)


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


async def _direct(client: httpx.AsyncClient, base: str) -> tuple[float, int]:
    body = {"model": "m", "prompt": "[[bench]]", "stream": True}
    start = time.perf_counter()
    first, chunks = 0.0, 0
    async with client.stream("POST", base + "/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                chunks += 1
                if not first and json.loads(line[6:])["choices"][0]["text"]:
                    first = time.perf_counter() - start
    return first, chunks


async def _proxied(client: httpx.AsyncClient, base: str) -> tuple[float, int]:
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    start = time.perf_counter()
    first, chunks = 0.0, 0
    async with client.stream("POST", base + "/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                chunks += 1
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if not first and (delta.get("content") or delta.get("reasoning_content")):
                    first = time.perf_counter() - start
    return first, chunks


# The same question through each API the proxy speaks: (path from the server's root, body).
API_REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", {"model": "m", "messages": MESSAGES, "stream": True}),
    "responses": ("/v1/responses", {"model": "m", "input": MESSAGES[0]["content"], "stream": True}),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 4096, "messages": MESSAGES, "stream": True}),
    "ollama": ("/api/chat", {"model": "m", "messages": MESSAGES, "stream": True}),
}


async def _through(client: httpx.AsyncClient, root: str, api: str) -> int:
    """One streamed answer through `api`; the lines it came in."""
    path, body = API_REQUESTS[api]
    lines = 0
    async with client.stream("POST", root + path, json=body) as response:
        async for line in response.aiter_lines():
            lines += bool(line)
    return lines


async def _api_cpu(proxy_url: str, proxy_pid: int, sequential: int) -> dict[str, float]:
    """The proxy's CPU per upstream chunk on each API's streaming path (µs), measured one API after another,
    each twice in alternation so that a drift of the machine's speed falls on all of them."""
    root = proxy_url.removesuffix("/v1")
    per_stream = len(tokens(bench_output())) + 1
    spent = dict.fromkeys(API_REQUESTS, 0.0)
    async with httpx.AsyncClient(timeout=120) as client:
        for api in API_REQUESTS:  # warm up every path
            await _through(client, root, api)
        for _ in range(2):
            for api in API_REQUESTS:
                before = _cpu_seconds(proxy_pid)
                for _ in range(sequential):
                    await _through(client, root, api)
                spent[api] += _cpu_seconds(proxy_pid) - before
    return {api: 1e6 * cpu / (2 * sequential * per_stream) for api, cpu in spent.items()}


async def _inside(client: httpx.AsyncClient, base: str) -> tuple[float, float]:
    """(sum, count) of the proxy's own time-to-first-token histogram, from its /metrics."""
    text = (await client.get(base.removesuffix("/v1") + "/metrics")).text
    found = dict(line.split(" ", 1) for line in text.splitlines()
                 if line.startswith("streamparse_time_to_first_token_seconds_"))
    return (float(found.get("streamparse_time_to_first_token_seconds_sum", 0)),
            float(found.get("streamparse_time_to_first_token_seconds_count", 0)))


async def _measure(direct_url: str, proxy_url: str, proxy_pid: int, sequential: int, concurrent: int,
                   workers: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=concurrent)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        for _ in range(3):  # warm up both paths
            await _direct(client, direct_url)
            await _proxied(client, proxy_url)
        direct_first = [(await _direct(client, direct_url))[0] for _ in range(sequential)]
        inside_before = await _inside(client, proxy_url)
        cpu_before = _cpu_seconds(proxy_pid)
        proxy_first = [(await _proxied(client, proxy_url))[0] for _ in range(sequential)]
        cpu = _cpu_seconds(proxy_pid) - cpu_before
        inside_after = await _inside(client, proxy_url)
        upstream_chunks = sequential * (len(tokens(bench_output())) + 1)

        start = time.perf_counter()
        await asyncio.gather(*(_direct(client, direct_url) for _ in range(concurrent)))
        direct_wall = time.perf_counter() - start
        start = time.perf_counter()
        results = await asyncio.gather(*(_proxied(client, proxy_url) for _ in range(concurrent)))
        proxy_wall = time.perf_counter() - start
    per_stream = len(tokens(bench_output())) + 1
    return {
        "output_chars": len(bench_output()),
        "workers": workers,
        "upstream_chunks_per_stream": per_stream,
        "ttft_direct_ms": 1000 * statistics.median(direct_first),
        "ttft_proxy_ms": 1000 * statistics.median(proxy_first),
        "ttft_added_ms": 1000 * (statistics.median(proxy_first) - statistics.median(direct_first)),
        "ttft_inside_proxy_ms": 1000 * (inside_after[0] - inside_before[0])
        / max(inside_after[1] - inside_before[1], 1),
        "proxy_cpu_us_per_chunk": 1e6 * cpu / upstream_chunks,
        "concurrent_streams": concurrent,
        "direct_streams_per_s": concurrent / direct_wall,
        "proxy_streams_per_s": concurrent / proxy_wall,
        "direct_chunks_per_s": concurrent * per_stream / direct_wall,
        "proxy_chunks_per_s": concurrent * per_stream / proxy_wall,
        "proxy_chunks_out_per_stream": statistics.median(r[1] for r in results),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.server", description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=30, help="sequential requests for latency and CPU")
    ap.add_argument("--concurrent", type=int, default=64, help="concurrent streams for throughput")
    ap.add_argument("--workers", type=int, default=1, help="the proxy's --workers")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args(argv)
    upstream_port, proxy_port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, str(ROOT / "tests" / "upstream.py"), str(upstream_port)])
    proxy = None
    try:
        _wait(f"http://127.0.0.1:{upstream_port}/health", upstream)
        proxy = subprocess.Popen([sys.executable, "-m", "streamparse", "serve", "--upstream",
                                  f"http://127.0.0.1:{upstream_port}/v1", "--chat-template", str(TEMPLATE),
                                  "--port", str(proxy_port), "--log-level", "warning", "--text-prompt",
                                  "--workers", str(opts.workers)],
                                 cwd=ROOT, stderr=subprocess.DEVNULL)
        _wait(f"http://127.0.0.1:{proxy_port}/health", proxy)
        result = asyncio.run(_measure(f"http://127.0.0.1:{upstream_port}/v1", f"http://127.0.0.1:{proxy_port}/v1",
                                      proxy.pid, opts.requests, opts.concurrent, opts.workers))
        result["api_cpu_us_per_chunk"] = asyncio.run(_api_cpu(f"http://127.0.0.1:{proxy_port}/v1", proxy.pid,
                                                              opts.requests))
    finally:
        for process in (proxy, upstream):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)
    if opts.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"streamparse serve ({opts.workers} worker{'s' * (opts.workers > 1)}) vs the upstream called directly "
          f"({result['output_chars']} characters, {result['upstream_chunks_per_stream']} upstream chunks per stream)")
    print(f"  time to first token: direct {result['ttft_direct_ms']:.2f} ms, proxy {result['ttft_proxy_ms']:.2f} ms, "
          f"added {result['ttft_added_ms']:.2f} ms (median of {opts.requests}); inside the proxy, from the "
          f"request's arrival to its first token: {result['ttft_inside_proxy_ms']:.2f} ms (mean)")
    print(f"  proxy CPU per upstream chunk: {result['proxy_cpu_us_per_chunk']:.0f} µs")
    apis = result["api_cpu_us_per_chunk"]
    print("  per API (streamed, the same answer): " + ", ".join(
        f"{api} {cpu:.0f} µs ({cpu / apis['chat']:.2f}x chat)" for api, cpu in apis.items()))
    print(f"  {opts.concurrent} concurrent streams: direct {result['direct_streams_per_s']:.1f} streams/s "
          f"({result['direct_chunks_per_s']:.0f} chunks/s), proxy {result['proxy_streams_per_s']:.1f} streams/s "
          f"({result['proxy_chunks_per_s']:.0f} chunks/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
