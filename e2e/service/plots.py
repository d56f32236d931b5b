"""The trends page's plots, drawn by matplotlib as inline SVG (no script, no network):
new and fixed bugs per run, and each config's pass rate over runs."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

plt.rcParams["svg.fonttype"] = "none"  # text as text: smaller, and searchable in the page


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def bugs_plot(points: list[dict]) -> str:
    """Bars of bugs first seen (up) and fixed (down) per run, and the open bugs after each run."""
    figure = Figure(figsize=(8, 3.4), layout="constrained")
    axes = figure.subplots()
    runs = [p["run"] for p in points]
    new = [p["new_bugs"] for p in points]
    fixed = [-p["fixed_bugs"] for p in points]
    width = 0.8 if len(runs) < 2 else 0.8 * min(b - a for a, b in zip(runs, runs[1:]))
    axes.bar(runs, new, width=width, color="#c0392b", label="first seen")
    axes.bar(runs, fixed, width=width, color="#27ae60", label="fixed")
    opened = 0
    still_open = []
    for p in points:
        opened += p["new_bugs"] - p["fixed_bugs"]
        still_open.append(opened)
    twin = axes.twinx()
    twin.plot(runs, still_open, marker=".", color="#34495e", label="open, of those first seen here")
    twin.set_ylabel("open")
    twin.set_ylim(bottom=0)
    axes.set_xlabel("run")
    axes.set_ylabel("bugs per run")
    axes.axhline(0, color="#999", linewidth=0.5)
    for axis in (axes.xaxis, axes.yaxis, twin.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    handles = axes.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize="small", frameon=False)
    return _svg(figure)


def rates_plot(points: list[dict]) -> str:
    """Each config's pass rate (of its pairs with a verdict) per run."""
    figure = Figure(figsize=(8, 3.4), layout="constrained")
    axes = figure.subplots()
    configs = sorted({c for p in points for c in p["pass_rate"]})
    for config in configs:
        xs = [p["run"] for p in points if p["pass_rate"].get(config) is not None]
        ys = [100 * p["pass_rate"][config] for p in points if p["pass_rate"].get(config) is not None]
        axes.plot(xs, ys, marker="o", markersize=3, label=config)
    axes.set_xlabel("run")
    axes.set_ylabel("pass rate, %")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    if configs:
        figure.legend(loc="outside lower center", fontsize="small", frameon=False, ncols=min(7, len(configs)))
    return _svg(figure)
