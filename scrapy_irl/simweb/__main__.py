"""``python -m scrapy_irl.simweb``: serve a simulated web on loopback until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from scrapy_irl.simweb.config import SIZES, WebConfig
from scrapy_irl.simweb.resolver import write_config
from scrapy_irl.simweb.server import SimwebServer

logger = logging.getLogger(__name__)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m scrapy_irl.simweb",
        description="Serve a deterministic simulated web on 127.0.x.y addresses (loopback only). "
        "Point a crawl at it with TWISTED_DNS_RESOLVER = 'scrapy_irl.simweb.resolver.SimwebResolver' "
        "and IRL_SIMWEB_CONFIG = the --config-out file.",
    )
    p.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="default",
        help="named web size (default: default)",
    )
    p.add_argument("--seed", type=int, default=1, help="the web's seed (default 1)")
    p.add_argument(
        "--plds", type=int, default=None, help="override the number of legitimate PLDs"
    )
    p.add_argument(
        "--port",
        type=int,
        default=8080,
        help="port on every address; 0 picks a free one (default 8080)",
    )
    p.add_argument(
        "--log", default="simweb-requests.log", help="request log path ('' for none)"
    )
    p.add_argument(
        "--config-out",
        default="simweb.json",
        help="write the web's config (for the resolver) here",
    )
    p.add_argument(
        "--ground-truth", default=None, help="also write the ground truth JSON here"
    )
    p.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help="stop after this many seconds (0: until Ctrl-C)",
    )
    p.add_argument(
        "--slow-seconds",
        type=float,
        default=None,
        help="delay of slow pages / slow robots.txt",
    )
    p.add_argument(
        "--drip-seconds",
        type=float,
        default=None,
        help="total time the drip page drips",
    )
    p.add_argument(
        "--web",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any field of the web's config (spam_plds=120, out_links=12, ...), repeatable",
    )
    p.add_argument("--quiet", action="store_true", help="do not list the addresses")
    args = p.parse_args(argv)
    try:
        args.web = dict(WebConfig.parse_override(item) for item in args.web)
        # Checked here: a bad --plds exits 2 with the message, not a traceback.
        args.config = web_config(args)
    except (ValueError, TypeError) as exc:
        p.error(str(exc))
    return args


def web_config(args: argparse.Namespace) -> WebConfig:
    """The web's config from the size, ``--web`` overrides and the explicit options."""
    explicit = {"seed": args.seed, "plds": args.plds, "port": args.port,
                "slow_seconds": args.slow_seconds, "drip_seconds": args.drip_seconds}  # fmt: skip
    given = {k: v for k, v in explicit.items() if v is not None}
    return WebConfig.sized(args.size, **{**args.web, **given})


async def run(args: argparse.Namespace) -> None:
    config = web_config(args)
    server = SimwebServer(config, args.log or None)
    await server.start()
    try:
        web = server.web
        if args.config_out:
            write_config(server.config, args.config_out)
        if args.ground_truth:
            Path(args.ground_truth).write_text(
                json.dumps(web.ground_truth()), encoding="utf-8"
            )
        print(
            f"simweb seed={config.seed} size={args.size}: {len(web.plds)} PLDs, {len(web.hosts)} listed hosts "
            f"(+{config.blog_users} blog users, endless spam subdomains), port {server.port}",
            flush=True,
        )
        print(f"config: {args.config_out or '-'}  log: {args.log or '-'}", flush=True)
        if not args.quiet:
            print("addresses: " + " ".join(server.addresses), flush=True)
        print("start URLs: " + " ".join(web.seed_urls()), flush=True)
        stop = (
            asyncio.Event()
        )  # SIGTERM stops cleanly too: the log is flushed and closed
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await asyncio.wait_for(
                stop.wait(), args.duration if args.duration > 0 else None
            )
        except TimeoutError:
            pass
    finally:
        await server.close()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    args = parse_args(argv)
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        print("simweb stopped", file=sys.stderr)
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        print(exc.strerror, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
