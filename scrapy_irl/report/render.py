"""Plots and an HTML page from ``stats.jsonl`` (+ ``pld_table.json``).

The four plots mirror IRLbot's evaluation (thesis ``004_*.txt`` chapter VIII, Figs. 6-7):

* ``download_rate.png``: pages/s per sampling interval, from ``response_received_count``
  (Fig. 6); an interval under half the median one (the sample at close) is merged into
  the one before it;
* ``uniqueness.png``: probability of uniqueness p, new unique URLs (``irl_sched/unique``)
  over URLs offered to the scheduler (``irl_sched/offered``) per interval, and cumulative (Fig. 7a);
* ``pld_pages.png``: pages admitted per PLD against its in-degree, log-log, from
  ``pld_table.json`` (Fig. 7b);
* ``queues.png``: URLseen pending tuples, BEAST queued / Q_F, requests in RAM over time.

Any missing series gives a plot that says "no data". A new run id (a resumed JOBDIR crawl
starts its stats at zero and its ``t`` at 0 again; in files written before run ids, ``t``
going back) starts a new segment: time continues from the previous segment's end and
totals add up. Within one run, ``t`` going back is the wall clock set back: time is held,
the counters go on in the same segment.
"""

from __future__ import annotations

import html
import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrapy_irl.report.sampler import PLD_FILE, STATS_FILE

logger = logging.getLogger(__name__)

PAGES = "response_received_count"
UNIQUE = "irl_sched/unique"
ENQUEUED = "scheduler/enqueued"
#: Requests offered to the scheduler, duplicates included (since 2026-11-25; before,
#: ``scheduler/enqueued`` counted them, and data written then is read with it).
OFFERED = "irl_sched/offered"
QUEUE_KEYS = (
    "irl_sched/urlseen_pending",
    "irl_sched/beast/queued",
    "irl_sched/beast/qf",
    "irl_sched/ram_requests",
)
PLOTS = {
    "download_rate": "download_rate.png",
    "uniqueness": "uniqueness.png",
    "pld_pages": "pld_pages.png",
    "queues": "queues.png",
}
TOP_PLDS_SHOWN = 10


# -- reading -------------------------------------------------------------------------------
@dataclass
class Samples:
    """The decoded lines of ``stats.jsonl``; ``t`` continues across restarts."""

    t: list[float] = field(default_factory=list)
    stats: list[dict[str, float]] = field(default_factory=list)
    segment: list[int] = field(default_factory=list)  # 0, then +1 at each restart
    skipped: int = 0  # undecodable lines (a torn last line after a kill)
    torn_last_line: bool = False

    def __len__(self) -> int:
        return len(self.t)

    def has(self, key: str) -> bool:
        return any(key in s for s in self.stats)

    def last(self, key: str) -> float | None:
        for s in reversed(self.stats):
            if key in s:
                return s[key]
        return None


def read_samples(path: Path | str) -> Samples:
    """Decode ``stats.jsonl``, skipping (and counting) undecodable lines."""
    out = Samples()
    raw = Path(path).read_bytes().split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    offset = 0.0
    prev_t: float | None = None
    prev_run: Any = None
    seg = 0
    for i, line in enumerate(raw):
        try:
            rec = json.loads(line)
            t = float(rec["t"])
            stats = {str(k): v for k, v in rec["stats"].items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)}  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            if line.strip():
                out.skipped += 1
                if i == len(raw) - 1:
                    out.torn_last_line = True
            continue
        run = rec.get("run")
        # A new crawl appended to the same file: its run id differs, or (files written
        # before run ids) its t starts again from zero. Within one run id, t going back is
        # the wall clock stepping back (NTP): the same counters go on, so no new segment
        # (that added them twice); time is held where it was instead of going back.
        if prev_t is not None:
            if run != prev_run or (run is None and t < prev_t):
                seg += 1
                offset = out.t[-1]
            elif t < prev_t:
                offset += prev_t - t
        prev_t, prev_run = t, run
        out.t.append(offset + t)
        out.stats.append(stats)
        out.segment.append(seg)
    return out


PLD_COUNTS = ("indegree", "budget", "admitted")


def read_pld_table(path: Path | str) -> list[dict[str, Any]]:
    """Rows of ``pld_table.json`` (empty when absent or unreadable), each with a ``pld``
    string and whole non-negative ``indegree``, ``budget`` and ``admitted`` (0 when
    missing). A row that is not one (``"indegree": "many"``, a null budget, a hand edit)
    is skipped with a warning: it used to stop ``irl-report`` with a traceback."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(rows, list):
        return []
    good = []
    for r in rows:
        if isinstance(r, (list, tuple)) and len(r) == 4:  # (pld, indegree, budget, admitted)
            r = dict(zip(("pld", *PLD_COUNTS), r, strict=True))
        row = _pld_row(r)
        if row is not None:
            good.append(row)
    if len(good) < len(rows):
        logger.warning("%s: skipped %d row(s) that are not a PLD with whole counts",
                       path, len(rows) - len(good))  # fmt: skip
    return good


def _pld_row(row: Any) -> dict[str, Any] | None:
    if not isinstance(row, dict) or not isinstance(row.get("pld"), str):
        return None
    clean = dict(row)
    for key in PLD_COUNTS:
        value = row.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if not math.isfinite(value) or value < 0 or value != int(value):
            return None
        clean[key] = int(value)
    return clean


# -- series --------------------------------------------------------------------------------
def interval_diffs(
    samples: Samples, key: str
) -> tuple[list[float], list[float], list[float]]:
    """(t, dt, delta of ``key``) per interval; intervals across a restart are skipped."""
    ts, dts, ds, _segs = _segment_diffs(samples, key)
    return ts, dts, ds


def _segment_diffs(
    samples: Samples, key: str
) -> tuple[list[float], list[float], list[float], list[int]]:
    """:func:`interval_diffs` with each interval's segment (run)."""
    ts: list[float] = []
    dts: list[float] = []
    ds: list[float] = []
    segs: list[int] = []
    if not samples.has(key):
        return ts, dts, ds, segs
    prev: tuple[float, float, int] | None = None
    for t, s, seg in zip(samples.t, samples.stats, samples.segment, strict=True):
        v = s.get(key, 0)  # Scrapy counters appear at their first increment
        if prev is not None and prev[2] == seg and t > prev[0]:
            ts.append(t)
            dts.append(t - prev[0])
            ds.append(v - prev[1])
            segs.append(seg)
        prev = (t, v, seg)
    return ts, dts, ds, segs


def total(samples: Samples, key: str) -> float:
    """Final value of a counter, summed over restarted segments."""
    last: dict[int, float] = {}
    for s, seg in zip(samples.stats, samples.segment, strict=True):
        if key in s:
            last[seg] = s[key]
    return sum(last.values())


def offered_key(samples: Samples) -> str:
    """The counter of requests offered to the scheduler in these samples."""
    return OFFERED if samples.has(OFFERED) else ENQUEUED


#: An interval shorter than this fraction of the median interval of all the data (the sample at
#: close, taken just after the last timed one) is merged into the interval before it.
SHORT_INTERVAL = 0.5


def merge_short_intervals(ts: list[float], dts: list[float], ds: list[float],
                          segs: list[int] | None = None,
                          ) -> tuple[list[float], list[float], list[float]]:  # fmt: skip
    """``interval_diffs`` with each interval much shorter than the median one (under
    :data:`SHORT_INTERVAL` of it) added to the interval it directly follows, if any: a
    page or two in the milliseconds between the last timed sample and the one at close
    made a "peak" of hundreds of pages/s. ``segs``: each interval's run; a run's first
    interval follows nothing (the next run's time starts where the last one ended)."""
    if not dts:
        return ts, dts, ds
    ordered = sorted(dts)
    median = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
    out_t: list[float] = []
    out_dt: list[float] = []
    out_d: list[float] = []
    runs = segs if segs is not None else [0] * len(ts)
    for i, (t, dt, d) in enumerate(zip(ts, dts, ds, strict=True)):
        follows = (out_t and (i == 0 or runs[i] == runs[i - 1])
                   and math.isclose(t - dt, out_t[-1], rel_tol=0, abs_tol=1e-6))  # fmt: skip
        if follows and dt < SHORT_INTERVAL * median:
            out_t[-1] = t
            out_dt[-1] += dt
            out_d[-1] += d
        else:
            out_t.append(t)
            out_dt.append(dt)
            out_d.append(d)
    return out_t, out_dt, out_d


def download_rate(samples: Samples) -> tuple[list[float], list[float]]:
    """(end time, pages/s) per interval, short intervals merged (:func:`merge_short_intervals`)."""
    ts, dts, ds = merge_short_intervals(*_segment_diffs(samples, PAGES))
    return ts, [d / dt for d, dt in zip(ds, dts, strict=True)]


def uniqueness(samples: Samples) -> tuple[list[float], list[float], list[float]]:
    """(t, p per interval, cumulative p) where the interval enqueued anything."""
    tu, _, du = interval_diffs(samples, UNIQUE)
    te, _, de = interval_diffs(samples, offered_key(samples))
    by_t = dict(zip(tu, du, strict=True))
    ts, p, cum = [], [], []
    su = se = 0.0
    for t, e in zip(te, de, strict=True):
        u = by_t.get(t)
        if u is None:
            continue
        su += u
        se += e
        if e > 0:
            ts.append(t)
            p.append(u / e)
            cum.append(su / se if se > 0 else math.nan)
    return ts, p, cum


@dataclass
class Summary:
    samples: int
    skipped_lines: int
    duration: float
    pages: float
    mean_rate: float | None
    peak_rate: float | None
    final_p: float | None
    overall_p: float | None
    queues: dict[str, float]
    top_plds: list[dict[str, Any]]


def summarize(samples: Samples, plds: Sequence[dict[str, Any]] = ()) -> Summary:
    duration = samples.t[-1] if samples.t else 0.0
    pages = total(samples, PAGES)
    _, rates = download_rate(samples)
    _, p, _ = uniqueness(samples)
    enq = total(samples, offered_key(samples))
    return Summary(
        samples=len(samples),
        skipped_lines=samples.skipped,
        duration=duration,
        pages=pages,
        mean_rate=pages / duration if duration > 0 and samples.has(PAGES) else None,
        peak_rate=max(rates) if rates else None,
        final_p=p[-1] if p else None,
        overall_p=total(samples, UNIQUE) / enq
        if enq > 0 and samples.has(UNIQUE)
        else None,
        queues={k: v for k in QUEUE_KEYS if (v := samples.last(k)) is not None},
        top_plds=sorted(
            plds, key=lambda r: (-int(r.get("indegree", 0)), str(r["pld"]))
        )[:TOP_PLDS_SHOWN],
    )


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def summary_rows(s: Summary) -> list[tuple[str, str]]:
    rows = [
        (
            "samples",
            f"{s.samples}"
            + (
                f" ({s.skipped_lines} undecodable line(s) skipped)"
                if s.skipped_lines
                else ""
            ),
        ),
        ("duration", f"{s.duration:,.1f} s"),
        ("pages (responses received)", _fmt(s.pages)),
        ("mean pages/s", _fmt(s.mean_rate)),
        ("peak pages/s (one interval)", _fmt(s.peak_rate)),
        ("final p (last interval)", _fmt(s.final_p, 3)),
        ("overall p (unique / offered)", _fmt(s.overall_p, 3)),
    ]
    for key in QUEUE_KEYS:
        rows.append((f"at end: {key}", _fmt(s.queues.get(key))))
    return rows


def _pld_lines(s: Summary) -> list[str]:
    if not s.top_plds:
        return ["(no PLD table)"]
    return [
        f"{r['pld']:<40} in-degree {int(r.get('indegree', 0)):>7}  budget {int(r.get('budget', 0)):>6}  "
        f"admitted {int(r.get('admitted', 0)):>7}"
        for r in s.top_plds
    ]


def summary_text(
    data: Samples | Path | str, plds: Sequence[dict[str, Any]] | None = None
) -> str:
    """The summary table as plain text (``data``: a Samples or a data directory)."""
    if not isinstance(data, Samples):
        d = Path(data)
        data = read_samples(d / STATS_FILE)
        if plds is None:
            plds = read_pld_table(d / PLD_FILE)
    s = summarize(data, plds or ())
    rows = summary_rows(s)
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append(f"top {TOP_PLDS_SHOWN} PLDs by in-degree:")
    lines += ["  " + line for line in _pld_lines(s)]
    return "\n".join(lines)


# -- plots ---------------------------------------------------------------------------------
def _figure(title: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.set_title(title)
    return fig, ax


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def _no_data(ax: Any, why: str) -> None:
    ax.text(0.5, 0.5, f"no data\n({why})", ha="center", va="center", fontsize=14,
            color="grey", transform=ax.transAxes)  # fmt: skip
    ax.set_xticks([])
    ax.set_yticks([])


def plot_download_rate(samples: Samples, path: Path) -> None:
    fig, ax = _figure("Download rate (IRLbot Fig. 6)")
    ts, rates = download_rate(samples)
    if not ts:
        _no_data(ax, f"no {PAGES} in two samples")
    else:
        ax.plot(ts, rates, color="tab:blue", lw=1.2, label="pages/s per interval")
        mean = sum(rates) / len(rates)
        ax.axhline(
            mean, color="tab:red", ls="--", lw=1, label=f"mean of intervals {mean:,.1f}"
        )
        ax.set_xlabel("crawl time (s)")
        ax.set_ylabel("pages/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="best")
    _save(fig, path)


def plot_uniqueness(samples: Samples, path: Path) -> None:
    fig, ax = _figure("Probability of uniqueness p (IRLbot Fig. 7a)")
    ts, p, cum = uniqueness(samples)
    if not ts:
        _no_data(ax, f"needs {UNIQUE} and {OFFERED}")
    else:
        ax.plot(ts, p, "o", ms=3, color="tab:blue", alpha=0.6, label="per interval")
        ax.plot(ts, cum, "-", color="tab:orange", lw=1.5, label="cumulative")
        ax.set_xlabel("crawl time (s)")
        ax.set_ylabel("p = new unique URLs / URLs offered")
        ax.set_ylim(0, max(1.05, max(p) * 1.05))
        ax.grid(alpha=0.3)
        ax.legend(loc="best")
    _save(fig, path)


def plot_pld_pages(plds: Sequence[dict[str, Any]], path: Path) -> None:
    fig, ax = _figure("Pages per PLD vs PLD in-degree (IRLbot Fig. 7b)")
    pts = [(int(r.get("indegree", 0)), int(r.get("admitted", 0))) for r in plds]
    pts = [(d, p) for d, p in pts if d > 0 and p > 0]
    if not pts:
        _no_data(ax, "no pld_table.json (or no PLD with in-degree and pages > 0)")
    else:
        xs, ys = zip(*pts, strict=True)
        ax.scatter(
            xs,
            ys,
            s=14,
            alpha=0.6,
            color="tab:blue",
            edgecolors="none",
            label="one PLD",
        )
        bins: dict[int, list[tuple[int, int]]] = {}
        for d, p in pts:  # Fig. 7b plots the mean per in-degree: bin by powers of 2
            bins.setdefault(d.bit_length() - 1, []).append((d, p))
        if len(bins) > 1:
            keys = sorted(bins)
            bx = [
                math.exp(sum(math.log(d) for d, _ in bins[k]) / len(bins[k]))
                for k in keys
            ]
            by = [sum(p for _, p in bins[k]) / len(bins[k]) for k in keys]
            ax.plot(bx, by, "-o",
                    color="tab:red", ms=4, lw=1.5, label="mean per in-degree bin [2^k, 2^(k+1))")  # fmt: skip
            ax.legend(loc="upper left")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("PLD in-degree d_x")
        ax.set_ylabel("pages per PLD (URLs admitted P_x)")
        ax.grid(alpha=0.3, which="both")
    _save(fig, path)


def plot_queues(samples: Samples, path: Path) -> None:
    fig, ax = _figure("Frontier queue sizes")
    peaks = []
    for key in QUEUE_KEYS:
        pts = [
            (t, s[key])
            for t, s in zip(samples.t, samples.stats, strict=True)
            if key in s
        ]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, lw=1.2, label=key)
            peaks.append(max(ys))
    if not peaks:
        _no_data(ax, "no irl_sched/* queue stats (IRL scheduler not used?)")
    else:
        ax.set_xlabel("crawl time (s)")
        ax.set_ylabel("entries")
        if min(peaks) < max(peaks) / 20:  # one queue would flatten the others
            ax.set_yscale("symlog", linthresh=10)
            ax.set_ylabel("entries (log scale above 10)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="best")
    _save(fig, path)


# -- page ----------------------------------------------------------------------------------
def _html(summary: Summary, title: str, images: Iterable[str]) -> str:
    e = html.escape
    rows = "\n".join(
        f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in summary_rows(summary)
    )
    if summary.top_plds:
        pld_rows = "\n".join(
            f"<tr><td>{e(str(r['pld']))}</td><td>{int(r.get('indegree', 0)):,}</td>"
            f"<td>{int(r.get('budget', 0)):,}</td><td>{int(r.get('admitted', 0)):,}</td></tr>"
            for r in summary.top_plds
        )
        plds = ("<table><tr><th>PLD</th><th>in-degree</th><th>budget</th><th>admitted</th></tr>\n"
                f"{pld_rows}</table>")  # fmt: skip
    else:
        plds = "<p>No PLD table (pld_table.json is written at close by the IRL scheduler).</p>"
    imgs = "\n".join(
        f'<figure><img src="{e(name)}" alt="{e(name)}"></figure>' for name in images
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }}
td {{ font-variant-numeric: tabular-nums; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{e(title)}</h1>
<h2>Summary</h2>
<table>
{rows}
</table>
<h2>Top {TOP_PLDS_SHOWN} PLDs by in-degree</h2>
{plds}
<h2>Plots</h2>
{imgs}
</body></html>
"""


def build_report(data_dir: Path | str, out_dir: Path | str) -> Path:
    """Write the four PNGs and ``index.html`` to ``out_dir``; returns the HTML path.

    Raises FileNotFoundError when ``data_dir`` has no ``stats.jsonl``.
    """
    data = Path(data_dir)
    stats_path = data / STATS_FILE
    if not stats_path.is_file():
        raise FileNotFoundError(f"no {STATS_FILE} in {data}")
    samples = read_samples(stats_path)
    plds = read_pld_table(data / PLD_FILE)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_download_rate(samples, out / PLOTS["download_rate"])
    plot_uniqueness(samples, out / PLOTS["uniqueness"])
    plot_pld_pages(plds, out / PLOTS["pld_pages"])
    plot_queues(samples, out / PLOTS["queues"])
    index = out / "index.html"
    index.write_text(_html(summarize(samples, plds), f"scrapy-irl crawl report: {data}", PLOTS.values()),
                     encoding="utf-8")  # fmt: skip
    return index
