"""The report's page (pure: a ``RunHistory`` in, one HTML document out).

Contract: the page is self-contained and static: its style is inline, its charts are inline SVG, and it has
no script and no reference to anything outside it (no link, no image, no font), so it opens the same
offline, as a file or an attachment; its ``Content-Security-Policy`` (``CSP``: nothing but inline style)
makes a browser refuse any script or fetch should one ever reach it. Every value comes typed: the status
document through ``ReportStatus`` (``launcher.cli.report.status``: counts are ints, seconds finite floats,
a malformed document is refused), the events and the plan through their models; every text among them
(names, messages, commands, metrics' names) passes ``html.escape`` here, and numbers are formatted here. Each drawn thing carries a
class naming what it is (``lane``, ``span-<kind>``, ``mark-<kind>``, ``loss-point``, ``rate-point``, the
goodput rows' ``data-part``): what a person sees and what a test reads are the same elements.
The goodput breakdown is the status document's ``goodput`` (``wall_seconds``, ``productive_seconds``,
``fraction``, ``lost_seconds`` by part, ``recomputed_steps``); a run without it says "not measured".
The spec is shown without its ``env`` values and the plan without the tasks' environment (they may hold
credentials).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from html import escape

import yaml

from launcher.cli.report.axes import Axis, finite
from launcher.cli.report.status import GoodputRecord, ReportStatus
from launcher.cli.report.timeline import Kind, Lane, Timeline, timeline
from launcher.protocol.durations import for_people
from launcher.spec.redact import without_env_values
from launcher.supervision.history import RunHistory

WIDTH = 960
LABEL = 190
LANE = 30
CHART_HEIGHT = 220
MARGIN = 40

#: Lost time by part, in the order the breakdown lists them, with what a person reads.
LOST_PARTS = {"start_up": "start-up", "restarts": "restarts", "recomputation": "recomputation", "backups": "backups",
              "input_wait": "input wait", "stalls": "stalls", "evaluation": "evaluation", "slow_steps": "slow steps",
              "finishing": "final save and export"}

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #1d2330; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #5b6472; } .state-failed { color: #b3261e; } .state-succeeded { color: #1b7f3b; }
svg { display: block; background: #fbfcfe; border: 1px solid #e3e7ee; border-radius: 6px; }
svg text { font: 11px system-ui, sans-serif; fill: #3c4452; }
.axis { stroke: #9aa3b2; stroke-width: 1; } .grid { stroke: #e7ebf1; stroke-width: 1; }
.span-start_up { fill: #c8ccd4; } .span-training { fill: #3f8f5a; } .span-restart { fill: #e8a33c; }
.span-evaluation { fill: #7b68c9; } .span-stall { fill: #c55; }
.mark { stroke-width: 2; } .mark-backup { fill: #2f6fd6; } .mark-failure { fill: #d62f2f; }
.mark-restart { fill: #e8a33c; } .mark-preemption { fill: #9c27b0; } .mark-evaluation { fill: #4a3aa8; }
.line { fill: none; stroke-width: 2; } .rate-line { stroke: #3f8f5a; } .loss-line { stroke: #2f6fd6; }
.rate-point { fill: #3f8f5a; } .loss-point { fill: #2f6fd6; }
.legend span { display: inline-block; margin-right: 14px; } .swatch { display: inline-block; width: 12px; height: 12px;
  border-radius: 2px; vertical-align: -1px; margin-right: 4px; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #e3e7ee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.fraction { font-size: 30px; font-weight: 600; }
pre { background: #f3f5f9; padding: 10px; border-radius: 6px; overflow-x: auto; }
.part-productive { background: #3f8f5a; } .part-start_up { background: #c8ccd4; } .part-restarts { background: #e8a33c; }
.part-recomputation { background: #d9822b; } .part-backups { background: #2f6fd6; } .part-input_wait { background: #8fb8de; }
.part-stalls { background: #c55; } .part-evaluation { background: #7b68c9; }
.part-slow_steps { background: #b9a66b; } .part-finishing { background: #6b8f8a; }
.bar { display: flex; height: 22px; border-radius: 4px; overflow: hidden; margin: 8px 0; }
"""

#: The page's Content-Security-Policy: no script, nothing fetched; only its own inline style (the ``<style>``
#: element and ``style`` attributes). The charts are inline SVG, part of the document: they need no source.
CSP = "default-src 'none'; style-src 'unsafe-inline'"

COLORS = {Kind.START_UP: "#c8ccd4", Kind.TRAINING: "#3f8f5a", Kind.RESTART: "#e8a33c", Kind.EVALUATION: "#7b68c9",
          Kind.BACKUP: "#2f6fd6", Kind.FAILURE: "#d62f2f", Kind.PREEMPTION: "#9c27b0"}


def render(history: RunHistory) -> str:
    """The report of ``history``, one HTML document."""
    drawn = timeline(history)
    status = drawn.status
    name = escape(history.plan.name)
    state = escape(status.state.value)
    sections = [
        f"<h1>{name}</h1>",
        f"<div class='sub'>run {escape(history.plan.run_id)} on {escape(history.plan.backend.value)}: "
        f"<b class='state-{state}' id='state'>{state}</b>, {for_people(drawn.end - drawn.start)}"
        f"{_restarts(status)}</div>",
        *([f"<p class='sub' id='message'>{escape(status.message)}</p>"] if status.message else []),
        "<h2>Goodput</h2>", _goodput(status.goodput),
        "<h2>Timeline</h2>", _legend(), _timeline(drawn),
        "<h2>Step rate</h2>", _chart(drawn.step_rate, drawn.start, "seconds since start", "steps/s", "rate",
                                     "no step reports (the program does not report steps)"),
        "<h2>Loss</h2>", _chart([(float(step), loss) for step, loss in drawn.loss], 0.0, "step", "loss", "loss",
                                "no loss reported"),
        "<h2>Plan</h2>", _plan(history), "<h2>Spec</h2>", _spec(history),
    ]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<title>tfcluster report: {name}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(sections) + "\n</body></html>\n")


def _restarts(status: ReportStatus) -> str:
    parts = [f"{count} {key}" for key, count in (("restarts", status.restarts), ("preemptions", status.preemptions)) if count]
    return "; " + ", ".join(parts) if parts else ""


def _goodput(goodput: GoodputRecord | None) -> str:
    if goodput is None:
        return "<p id='goodput' class='sub'>Goodput: not measured for this run.</p>"
    wall = goodput.wall_seconds
    parts = [("productive", "productive", goodput.productive_seconds)]
    parts += [(key, label, goodput.lost_seconds.get(key, 0.0)) for key, label in LOST_PARTS.items()]
    bar = "".join(f"<div class='part-{key}' style='width:{100 * seconds / wall:.3f}%' title='{escape(label)} {seconds:.1f} s'></div>"
                  for key, label, seconds in parts if wall > 0 and seconds > 0)
    rows = "".join(f"<tr data-part='{key}'><td><span class='swatch part-{key}'></span>{escape(label)}</td>"
                   f"<td class='num seconds'>{seconds:.1f} s</td><td class='num'>{100 * seconds / wall if wall else 0:.1f} %</td></tr>"
                   for key, label, seconds in parts)
    recomputed = goodput.recomputed_steps
    return (f"<div id='goodput'><span class='fraction' id='goodput-fraction'>{100 * goodput.fraction:.1f} %</span> "
            f"of {wall:.1f} s was training"
            + (f"; {recomputed} steps were done again after restores" if recomputed else "")
            + f"<div class='bar'>{bar}</div><table><tr><th>where the time went</th><th>seconds</th><th>share</th></tr>"
            + rows + "</table></div>")


def _legend() -> str:
    kinds = [(Kind.START_UP, "start-up"), (Kind.TRAINING, "training"), (Kind.RESTART, "restart"),
             (Kind.EVALUATION, "evaluation"), (Kind.BACKUP, "backup ◆"), (Kind.FAILURE, "failure ▼"),
             (Kind.PREEMPTION, "preemption ▼")]
    return "<div class='legend'>" + "".join(
        f"<span><span class='swatch' style='background:{COLORS[kind]}'></span>{escape(label)}</span>" for kind, label in kinds) + "</div>"


def _x(time: float, drawn: Timeline) -> float:
    length = max(drawn.end - drawn.start, 1e-9)
    return LABEL + (WIDTH - LABEL - 20) * (time - drawn.start) / length


def _timeline(drawn: Timeline) -> str:
    height = LANE * len(drawn.lanes) + 40
    out = [f"<svg id='timeline' width='{WIDTH}' height='{height}' viewBox='0 0 {WIDTH} {height}' role='img'>"]
    length = drawn.end - drawn.start
    for seconds in Axis(0.0, length).ticks(6) if length > 0 else [0.0]:
        x = _x(drawn.start + seconds, drawn)
        out.append(f"<line class='grid' x1='{x:.1f}' x2='{x:.1f}' y1='10' y2='{height - 24}'/>"
                   f"<text x='{x:.1f}' y='{height - 8}' text-anchor='middle'>{seconds:g} s</text>")
    for number, lane in enumerate(drawn.lanes):
        out.append(_lane(lane, 10 + number * LANE, drawn))
    out.append("</svg>")
    if drawn.stalls:
        out.append(f"<p class='sub' id='stalls'>{drawn.stalls} stall(s) found by the watchdog "
                   "(see <code>tfcluster status</code>; their times are not recorded)</p>")
    return "".join(out)


def _lane(lane: Lane, top: float, drawn: Timeline) -> str:
    out = [f"<g class='lane' data-task='{escape(lane.task)}' data-role='{escape(lane.role)}'>",
           f"<text x='8' y='{top + LANE / 2 + 4:.1f}'>{escape(lane.task)}</text>"]
    for span in lane.spans:
        x1, x2 = _x(span.start, drawn), _x(span.end, drawn)
        out.append(f"<rect class='span span-{span.kind.value}' x='{x1:.1f}' y='{top + 5:.1f}' width='{max(x2 - x1, 1):.1f}' "
                   f"height='{LANE - 10}'><title>{escape(span.label)}: {for_people(span.end - span.start)}</title></rect>")
    for mark in lane.marks:
        x, y = _x(mark.time, drawn), top + 5
        shape = (f"M{x:.1f},{y + 10:.1f} l6,-10 l-6,-10 l-6,10 z" if mark.kind is Kind.BACKUP
                 else f"M{x - 6:.1f},{y - 4:.1f} h12 l-6,12 z")
        out.append(f"<path class='mark mark-{mark.kind.value}' d='{shape}'><title>{escape(mark.label)} "
                   f"(at {mark.time - drawn.start:.1f} s)</title></path>")
    out.append("</g>")
    return "".join(out)


def _chart(points: Sequence[tuple[float, float]], x_origin: float, x_label: str, y_label: str, name: str, empty: str) -> str:
    kept = finite((x - x_origin, y) for x, y in points)
    if not kept:
        return f"<p class='sub' id='{name}-chart'>{escape(empty)}</p>"
    xs = [x for x, _ in kept]
    ys = [y for _, y in kept]
    x_axis, y_axis = Axis.of(xs), Axis.of(ys, floor=0.0)
    left, right, top, bottom = MARGIN + 20, WIDTH - 20, 14, CHART_HEIGHT - 34

    def at(x: float, y: float) -> tuple[float, float]:
        return left + (right - left) * x_axis.fraction(x), bottom - (bottom - top) * y_axis.fraction(y)

    out = [f"<svg id='{name}-chart' width='{WIDTH}' height='{CHART_HEIGHT}' viewBox='0 0 {WIDTH} {CHART_HEIGHT}' role='img'>"]
    for value in y_axis.ticks(4):
        _, y = at(x_axis.low, value)
        out.append(f"<line class='grid' x1='{left}' x2='{right}' y1='{y:.1f}' y2='{y:.1f}'/>"
                   f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{value:g}</text>")
    for value in x_axis.ticks(6):
        x, _ = at(value, y_axis.low)
        out.append(f"<text x='{x:.1f}' y='{bottom + 16}' text-anchor='middle'>{value:g}</text>")
    out.append(f"<line class='axis' x1='{left}' x2='{right}' y1='{bottom}' y2='{bottom}'/>"
               f"<line class='axis' x1='{left}' x2='{left}' y1='{top}' y2='{bottom}'/>"
               f"<text x='{(left + right) / 2:.0f}' y='{CHART_HEIGHT - 4}' text-anchor='middle'>{escape(x_label)}</text>"
               f"<text x='12' y='{(top + bottom) / 2:.0f}' transform='rotate(-90 12 {(top + bottom) / 2:.0f})' "
               f"text-anchor='middle'>{escape(y_label)}</text>")
    placed = [at(x, y) for x, y in zip(xs, ys, strict=True)]
    out.append(f"<polyline class='line {name}-line' points='{' '.join(f'{x:.1f},{y:.1f}' for x, y in placed)}'/>")
    for (x, y), value_x, value_y in zip(placed, xs, ys, strict=True):
        out.append(f"<circle class='{name}-point' cx='{x:.1f}' cy='{y:.1f}' r='2.5'>"
                   f"<title>{escape(x_label)} {value_x:g}: {escape(y_label)} {value_y:.4g}</title></circle>")
    out.append("</svg>")
    return "".join(out)


def _plan(history: RunHistory) -> str:
    plan = history.plan
    rows = "".join(f"<tr class='plan-task'><td>{escape(t.name)}</td><td>{escape(t.type.value)}</td><td class='num'>{t.index}</td>"
                   f"<td>{escape(t.address)}</td><td>{escape(t.image or '')}</td><td><code>{escape(shlex.join(t.command))}</code></td></tr>"
                   for t in plan.tasks)
    return (f"<p>{escape(plan.strategy_note)}</p><table id='plan'><tr><th>task</th><th>type</th><th>index</th><th>address</th>"
            f"<th>image</th><th>command</th></tr>{rows}</table><p class='sub'>(the tasks' environment is not shown)</p>")


def _spec(history: RunHistory) -> str:
    document = without_env_values(history.plan.spec.model_dump(mode="json", exclude_defaults=True))
    return f"<pre id='spec'>{escape(yaml.safe_dump(document, sort_keys=False))}</pre><p class='sub'>(env values are not shown)</p>"
