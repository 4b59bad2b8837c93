"""Ties and edges of a plan, said out loud (issue 24 item 6): the stated tie-break (``TIE_BREAK``, the data the
code applies and ``tie_break_text`` prints), ``break_ties`` on a ranked table, the notes on tied rows and on a pick
at the edge of a numeric grid field (``edge_notes``)."""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


#: The stated tie-break: among the best configuration and those tied with it (inside its noise), the pick is the
#: first by these keys in order, ``(table column, "min" | "max", words)``; rows equal on every key keep the
#: table's order (the objective's mean, then the grid's order).  ``gpus`` (``_gpus``): the GPUs the answer needs
#: for the base scenario's demand (max_rate: its arrival rate; max_adapters: its adapters; min_cost: the
#: configuration's own; min_replicas: the replicas to deploy); ``gpus_price_usd_per_hour``: their price.
#: ``tie_break_text`` says it in words.
TIE_BREAK: dict[str, tuple[tuple[str, str, str], ...]] = {
    "max_rate": (("gpus", "min", "fewest GPUs for the base arrival rate (num_replicas x tensor_parallel_size x "
                                 "ceil(rate / max rate))"),
                 ("gpus_price_usd_per_hour", "min", "lowest price of those GPUs (US$/h)"),
                 ("max_rate_rps", "max", "highest sustainable rate (req/s)")),
    "max_adapters": (("gpus", "min", "fewest GPUs for the base adapter count "
                                     "(num_replicas x tensor_parallel_size x ceil(adapters / max adapters))"),
                     ("gpus_price_usd_per_hour", "min", "lowest price of those GPUs (US$/h)"),
                     ("max_adapters", "max", "most adapters")),
    "min_cost": (("gpus", "min", "fewest GPUs"),
                 ("cost_per_mtok_usd", "min", "lowest cost (US$ per million output tokens)"),
                 ("ttft_p99_ms", "min", "lowest p99 TTFT at the base rate (ms)")),
    "min_replicas": (("gpus", "min", "fewest GPUs (replicas to deploy x tensor_parallel_size)"),
                     ("gpus_price_usd_per_hour", "min", "lowest fleet price (US$/h)"),
                     ("replicas_needed", "min", "fewest replicas on average over the replications"),
                     ("cost_per_mtok_usd", "min", "lowest cost (US$ per million output tokens)")),
}
#: Numeric fields whose 0 means "no limit": 0 is not the smallest value of their grid (edge notes skip it, as
#: they skip negative values, which are settings such as hot_set_k -1 = auto).
ZERO_IS_NO_LIMIT = ("max_loras", "max_cpu_loras", "kv_cache_gb", "max_in_system")


#: What a tie is, per objective (``_rank``).
TIE_MEANING = {
    "max_rate": "the 95 % CI of its paired per-replication difference to the best includes 0",
    "max_adapters": "the 95 % CI of its paired per-replication difference to the best includes 0",
    "min_cost": "the same GPU price and a cost per million output tokens within 2 % of the best",
    "min_replicas": "the 95 % CI of its paired per-replication difference in replicas to the best includes 0",
}


def tie_break_text(objective: str) -> str:
    """The stated tie-break of ``objective`` in words (from ``TIE_BREAK``, the rule the code applies)."""
    keys = ", then the ".join(words for _, _, words in TIE_BREAK[objective])
    return (f"Tie-break ({objective}): among the best configuration and those tied with it ({TIE_MEANING[objective]}), "
            f"the pick has the {keys}; rows equal on all of these keep the table's order.")


def _key_value(row, col: str, how: str) -> float:
    """Sort key of one tie-break column: smaller is better; missing or non-finite values last."""
    try:
        v = float(row.get(col, math.nan))
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v):
        return math.inf
    return v if how == "min" else -v


def _fmt_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}" if math.isfinite(v) else "n/a"
    return str(v)


def _short(words: str) -> str:
    """A tie-break key's words without their parenthesis."""
    return words.split(" (")[0]


def tie_break_short(objective: str) -> str:
    """The rule's keys in short words, e.g. "fewest GPUs for the base arrival rate, then the lowest price ..."."""
    return ", then the ".join(_short(words) for _, _, words in TIE_BREAK[objective])


def _decider(row, other, keys, lost: bool = False) -> str:
    """Why ``row`` ranks after (``lost``) or before ``other`` by the tie-break ``keys``."""
    same = []
    for col, how, words in keys:
        x, y = _key_value(row, col, how), _key_value(other, col, how)
        if x != y:
            prefix = f"equal on {', '.join(same)}; " if same else ""
            return (f"{prefix}{'lost on' if lost else 'won on'} {_short(words)}: {_fmt_value(row.get(col))} vs "
                    f"{_fmt_value(other.get(col))}")
        same.append(_short(words))
    return (f"equal on {', '.join(same)}; " + ("after it in the table's order" if lost else
                                                "first in the table's order"))


def break_ties(table: pd.DataFrame, objective: str) -> pd.DataFrame:
    """Apply the stated tie-break (``TIE_BREAK[objective]``) to a ranked table.

    ``table``: rows best first by the objective (row 0 ``recommended``), ``tie_with_best`` on the rows tied with
    row 0.  Returns a new table (positional index): the pick first, then the other tied rows in the rule's order,
    then every other row in its order; ``recommended`` on the pick only; ``tie_with_best`` on the other tied rows
    (row 0 among them when another row is picked); ``tie_break``: why the pick won (against the runner-up of the
    rule) and what each other tied row lost on, empty elsewhere.  ``diff_to_best_ci_*`` stay the paired
    differences to the best by the objective's mean (the reference of the ties).
    """
    t = table.reset_index(drop=True).copy()
    if "tie_break" not in t.columns:
        t["tie_break"] = ""
    if not len(t) or not bool(t.loc[0, "recommended"]):
        return t
    keys = TIE_BREAK[objective]
    group = [0] + [j for j in range(1, len(t)) if bool(t.loc[j, "tie_with_best"])]
    ordered = sorted(group, key=lambda j: (tuple(_key_value(t.loc[j], c, how) for c, how, _ in keys), j))
    pick = ordered[0]
    why = {j: "tied with the pick; " + _decider(t.loc[j], t.loc[pick], keys, lost=True) for j in ordered[1:]}
    if len(group) > 1:
        why[pick] = f"picked among {len(group)} tied: " + _decider(t.loc[pick], t.loc[ordered[1]], keys)
    in_group = set(group)
    order = ordered + [j for j in range(len(t)) if j not in in_group]
    out = t.iloc[order].reset_index(drop=True)
    out["recommended"] = [i == 0 for i in range(len(out))]
    out["tie_with_best"] = [0 < i < len(group) for i in range(len(out))]
    out["tie_break"] = [why.get(j, "") for j in order]
    return out


def _label(row, fields) -> str:
    return ", ".join(f"{f}={_fmt_value(row[f])}" for f in fields) or f"configuration {int(row['config'])}"


def tie_notes(table: pd.DataFrame, objective: str, grid: Mapping) -> list[str]:
    """One note when the pick was tied: which rows, and why the pick won (``break_ties``)."""
    tied = table[table["recommended"].astype(bool) | table["tie_with_best"].astype(bool)]
    if len(tied) < 2:
        return []
    fields = [f for f in grid if tied[f].astype(str).nunique() > 1] or list(grid)
    pick = tied[tied["recommended"].astype(bool)].iloc[0]
    rows = "; ".join(_label(r, fields) for _, r in tied.iterrows())
    rule = tie_break_short(objective)
    why = str(pick["tie_break"]).split(": ", 1)[-1]
    return [f"{len(tied)} configurations are tied inside the noise of the best ({rows}). The tie-break (the "
            f"{rule}) picks {_label(pick, fields)}: {why}."]


def _numeric(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _beyond(vals: list, upward: bool, integer: bool):
    """The next candidate past the largest (``upward``) or smallest of ``vals`` (sorted, at least two): the same
    ratio as the last two when they differ by at least 1.5x, else the same step; None if none (not positive)."""
    a, b = (vals[-1], vals[-2]) if upward else (vals[0], vals[1])
    if a > 0 and b > 0 and max(a, b) / min(a, b) >= 1.5:
        nxt = a * a / b
    else:
        nxt = a + (a - b)
    if integer:
        nxt = int(round(nxt))
        if nxt == a:
            nxt = a + (1 if upward else -1)
    else:
        nxt = float(f"{nxt:.3g}")
    return nxt if nxt > 0 and nxt != a else None


def edge_notes(best: Mapping, grid: Mapping, check=None, tied: Mapping | None = None) -> list[str]:
    """A note per numeric grid field with at least two values whose pick is the largest or the smallest of them
    ("64 is the largest max_loras you gave: try 128.").  For ``ZERO_IS_NO_LIMIT`` fields 0 (no limit) is left
    out of the order.  ``check(field, value)``: why a suggested value would not be a valid configuration ("" if
    it is); then the note names the reason instead of suggesting it.  ``tied``: field -> the values of the rows
    tied with the pick (itself included); when they are every value of the field, the note says so."""
    out = []
    for f, vals in grid.items():
        if not vals or not all(_numeric(v) for v in vals):
            continue
        nums = sorted(float(v) if isinstance(v, (float, np.floating)) else int(v) for v in vals
                      if v >= 0 and not (f in ZERO_IS_NO_LIMIT and v == 0))
        v = best.get(f)
        if len(set(nums)) < 2 or not _numeric(v) or v < 0 or (f in ZERO_IS_NO_LIMIT and v == 0):
            continue
        integer = all(isinstance(x, (int, np.integer)) for x in vals)
        for upward, word in ((True, "largest"), (False, "smallest")):
            if v != (nums[-1] if upward else nums[0]):
                continue
            nxt = _beyond(nums, upward, integer)
            head = f"{_fmt_value(v)} is the {word} {f} you gave"
            why = check(f, nxt) if (nxt is not None and check is not None) else ""
            if nxt is None:
                note = f"{head} (the pick uses it; nothing {'above' if upward else 'below'} it to try)"
            elif why:
                note = f"{head}; {_fmt_value(nxt)} would not be a valid configuration ({why})"
            else:
                note = f"{head}: try {_fmt_value(nxt)}"
            if tied is not None and set(nums) <= {_plain(x) for x in tied.get(f, ())}:
                note += f" (every {f} you gave is tied with the pick, so it makes little difference here)"
            out.append(note + ".")
    return out
