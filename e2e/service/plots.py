"""The trends page's plots, drawn by matplotlib as inline SVG (no script, no network):
new and fixed bugs per run, and each config's pass rate over runs."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

plt.rcParams["svg.fonttype"] = "none"  # text as text: smaller, and searchable in the page


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def bugs_plot(points: list[dict]) -> str:
    """Bars of bugs first seen (up) and fixed (down) per run, and the open bugs after each run."""
    figure = Figure(figsize=(8, 3))
    axes = figure.subplots()
    runs = [p["run"] for p in points]
    new = [p["new_bugs"] for p in points]
    fixed = [-p["fixed_bugs"] for p in points]
    axes.bar(runs, new, color="#c0392b", label="new bugs")
    axes.bar(runs, fixed, color="#27ae60", label="fixed bugs")
    opened = 0
    still_open = []
    for p in points:
        opened += p["new_bugs"] - p["fixed_bugs"]
        still_open.append(opened)
    twin = axes.twinx()
    twin.step(runs, still_open, where="mid", color="#34495e", label="open (of these runs)")
    twin.set_ylabel("open")
    axes.set_xlabel("run")
    axes.set_ylabel("bugs per run")
    axes.axhline(0, color="#999", linewidth=0.5)
    handles = axes.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    axes.legend(handles=handles, loc="upper left", fontsize="small", frameon=False)
    return _svg(figure)


def rates_plot(points: list[dict]) -> str:
    """Each config's pass rate (of its pairs with a verdict) per run."""
    figure = Figure(figsize=(8, 3))
    axes = figure.subplots()
    configs = sorted({c for p in points for c in p["pass_rate"]})
    for config in configs:
        xs = [p["run"] for p in points if p["pass_rate"].get(config) is not None]
        ys = [100 * p["pass_rate"][config] for p in points if p["pass_rate"].get(config) is not None]
        axes.plot(xs, ys, marker="o", markersize=3, label=config)
    axes.set_xlabel("run")
    axes.set_ylabel("pass rate, %")
    if configs:
        axes.legend(loc="lower left", fontsize="small", frameon=False, ncols=min(4, len(configs)))
    return _svg(figure)
