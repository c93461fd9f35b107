"""Several benchmark commands' ``results.json`` of one comparison pooled into one (``--from-json``).

Entry point: :func:`merge_results`; :func:`only_methods` selects some methods' runs of a file first, and
:func:`with_reference` compares them with another method than the first file's reference.
Repeats made by separate commands (the timing runs on one machine, the quality repeats on another)
pool only where they ran the same experiment and, for each method, the same ns-splat-plus source
(:func:`check_one_source`): never runs of different code.
"""

from __future__ import annotations

import shlex
from typing import Any, Dict, List, Optional, Tuple

from splatbench.document import results_document
from splatbench.results import discard_timing
from splatbench.settings import SOURCE_DIGEST_KEY, run_tag
from splatbench.stats import group_runs, summarize_repeats


def source_digests(runs: List[Dict[str, Any]]) -> List[str]:
    """The ns-splat-plus source digests these runs recorded (sorted, once each; older files record none)."""
    return sorted({d for r in runs if (d := (r.get("environment") or {}).get(SOURCE_DIGEST_KEY))})


def check_one_source(runs: List[Dict[str, Any]]) -> None:
    """Every method's runs must come from one ns-splat-plus source: pooling a method's runs of two
    versions of the code would mix two methods under one name.

    Raises:
        ValueError: naming the first method (and GPU count) whose runs recorded two digests or more.
    """
    for (method, num_gpus), group in group_runs(runs).items():
        digests = source_digests(group)
        if len(digests) > 1:
            raise ValueError(f"the runs of {run_tag(method, num_gpus)} come from {len(digests)} versions of the "
                             f"ns-splat-plus source ({', '.join(digests)}): never pool runs of different code")  # fmt: skip


def _merged_labels(parts: List[Dict[str, Any]], key: str = "variants") -> Dict[str, str]:
    """The labels of all parts under settings ``key`` (``variants``: --variant LABEL=METHOD ARGS; ``peers``:
    --peer LABEL=COMMAND). A command may add labels the others do not have; a label must mean the same in
    every part that runs it (one spec, or plain everywhere)."""
    labels: Dict[str, str] = {}
    for index, part in enumerate(parts, 1):
        for label, spec in (part.get("settings", {}).get(key) or {}).items():
            if labels.setdefault(label, spec) != spec:
                raise ValueError(f"results {index} runs {label} as {spec!r}, an earlier one as {labels[label]!r}: "
                                 "not one experiment")  # fmt: skip
    for index, part in enumerate(parts, 1):
        settings = part.get("settings", {})
        plain = [m for m in settings.get("methods", []) if m in labels and m not in (settings.get(key) or {})]
        if plain:
            raise ValueError(f"results {index} runs {plain[0]} as the plain method, another as "
                             f"{labels[plain[0]]!r}: not one experiment")  # fmt: skip
    return labels


def only_methods(results: Dict[str, Any], methods: List[str]) -> Dict[str, Any]:
    """``results`` with only the runs of ``methods`` (those it has, in that order): the settings' method
    list and variants follow, the summary is recomputed."""
    settings = dict(results.get("settings", {}))
    keep = [m for m in methods if m in settings.get("methods", [])]
    settings["methods"] = keep
    for key in ("variants", "peers"):
        settings[key] = {k: v for k, v in (settings.get(key) or {}).items() if k in keep}
    runs = [dict(r) for r in results["runs"] if r["method"] in keep]
    return results_document(
        settings, runs, results.get("reference_method"), results.get("environment"), created=results.get("created"),
        finished=results.get("finished"), command=results.get("command"), scene=results.get("scene"),
    )  # fmt: skip


def with_reference(results: Dict[str, Any], reference: str) -> Dict[str, Any]:
    """``results`` compared with ``reference`` instead of the reference its command had (a merge's
    ``--reference``): the summary's differences of means are recomputed; a method it does not run is refused."""
    methods = results.get("settings", {}).get("methods", [])
    if reference not in methods:
        raise ValueError(f"--reference {reference}: the results run {', '.join(methods)}")
    return results | {"reference_method": reference, "summary": summarize_repeats(results["runs"], reference)}


def split_data_path(scene_args: str) -> Tuple[Optional[str], str]:
    """``--data PATH`` (or ``--data=PATH``) taken out of scene arguments: (PATH or None, the rest)."""
    tokens, path, rest = shlex.split(scene_args or ""), None, []
    skip = False
    for i, token in enumerate(tokens):
        if skip:
            skip = False
        elif token == "--data" and i + 1 < len(tokens):
            path, skip = tokens[i + 1], True
        elif token.startswith("--data="):
            path = token.split("=", 1)[1]
        else:
            rest.append(token)
    return path, shlex.join(rest)


def merge_results(
    parts: List[Dict[str, Any]],
    sources: Optional[List[str]] = None,
    command: Optional[str] = None,
    renumber: bool = False,
    data_copies: bool = False,
) -> Dict[str, Any]:
    """One results dict from several benchmark commands' ``results.json`` of the same comparison.

    ``command``: the merge's own command line (``--from-json ...``), which regenerates the report from
    the stored files; each part's command (a part may itself be a merge) stays in ``merged_from``.

    They must agree on what was run (scene, steps, train and method arguments, dataparser): a merge
    of different experiments would pool unlike runs. A (method, GPU count, repeat) may appear only
    once; with ``renumber`` a later file's run whose repeat is taken gets the method's next free
    number instead (above every number in any file) and its timing is discarded: pooled for quality,
    while the report's timing stays that of the file the number belonged to. Each renumbered run
    keeps ``renumbered_from`` (file, repeat), and its file's ``merged_from`` entry lists the changes.
    Speedups and the per-method summary are recomputed over all runs; timing figures keep their
    validity flags (a concurrent quality run stays discarded). Each ``merged_from`` entry names its
    file's device and the ns-splat-plus source digests its runs recorded.

    ``data_copies``: the parts' ``--data`` paths may differ (one dataset copied to another place on the GPU
    machine); the rest of the scene arguments must still agree, and the merged settings list every path
    (``data_paths``), which the report prints. The caller vouches that the copies hold the same files.

    Raises:
        ValueError: on fewer than two parts, different experiments, a repeat present twice (without
        ``renumber``), or a method whose runs come from different ns-splat-plus sources.
    """
    if len(parts) < 2:
        raise ValueError("merging needs at least two results files")
    same = ("steps", "scene_args", "train_args", "method_args", "skip_steps", "eval_every", "device_type")
    first = parts[0].get("settings", {})

    def compared(settings: Dict[str, Any], key: str) -> Any:
        value = settings.get(key) or None  # absent = empty
        return split_data_path(value)[1] if data_copies and key == "scene_args" and value else value

    for index, part in enumerate(parts[1:], 2):
        settings = part.get("settings", {})
        differ = [key for key in same if compared(settings, key) != compared(first, key)]
        if differ:
            raise ValueError(f"results {index} differs from results 1 in " + ", ".join(differ) + ": not one experiment")
    variants, peers = _merged_labels(parts, "variants"), _merged_labels(parts, "peers")
    names = sources or [f"results {index}" for index in range(1, len(parts) + 1)]  # for the notes
    runs: List[Dict[str, Any]] = []
    seen: Dict[tuple, int] = {}
    last_repeat: Dict[tuple, int] = {}  # (method, GPUs) -> the highest repeat number in any file, then given
    for part in parts:
        for r in part["runs"]:
            group = (r["method"], r["num_gpus"])
            last_repeat[group] = max(last_repeat.get(group, 0), r.get("repeat") or 1)
    renumbered: Dict[int, List[str]] = {}
    for index, part in enumerate(parts, 1):
        for r in part["runs"]:
            run = dict(r)
            key = (r["method"], r["num_gpus"], r.get("repeat") or 1)
            if key in seen:
                if not renumber:
                    raise ValueError(f"{run_tag(*key)} is in results {seen[key]} and in results {index}: number the "
                                     "repeats of a later command with --first-repeat, or pool them with "
                                     "--renumber-repeats")  # fmt: skip
                last_repeat[key[:2]] += 1
                run["repeat"] = last_repeat[key[:2]]
                discard_timing(run, f"repeat {key[2]} of {names[index - 1]}, renumbered {run['repeat']} to pool "
                                    "its quality; its timing is in that file's own report")  # fmt: skip
                run["renumbered_from"] = {"source": names[index - 1], "repeat": key[2]}
                renumbered.setdefault(index, []).append(f"{run_tag(*key)} -> r{run['repeat']}")
                key = key[:2] + (run["repeat"],)
            seen[key] = index
            runs.append(run)
    check_one_source(runs)
    runs.sort(key=lambda r: (r["num_gpus"], r.get("repeat") or 1))  # stable: method order within a repeat kept
    methods = list(dict.fromkeys(m for part in parts for m in part.get("settings", {}).get("methods", [])))
    settings = dict(first) | {
        "methods": methods,
        "variants": variants,
        "peers": peers,
        "repeats": len({r.get("repeat") or 1 for r in runs}),
        "first_repeat": min(r.get("repeat") or 1 for r in runs),
        "concurrent_quality": any(p.get("settings", {}).get("concurrent_quality") for p in parts)
        or any(r.get("timing_valid") is False for r in runs),
    }
    data_paths = list(dict.fromkeys(split_data_path(p.get("settings", {}).get("scene_args") or "")[0] for p in parts))
    if data_copies and len(data_paths) > 1:
        settings["data_paths"] = data_paths
    results = results_document(
        settings, runs, parts[0].get("reference_method"), parts[0].get("environment"),
        created=min(p.get("created") or "" for p in parts) or None,
        finished=max(p.get("finished") or "" for p in parts) or None,
        command=command, scene=parts[0].get("scene"),
    )  # fmt: skip
    results["merged_from"] = [
        {"source": (sources or [None] * len(parts))[i], "command": p.get("command"), "created": p.get("created"),
         "device": (p.get("environment") or {}).get("device_name"), "hostname": (p.get("environment") or {}).get("hostname"),
         "ns_splat_plus_source": source_digests(p["runs"])}
        | ({"renumbered": renumbered[i + 1]} if i + 1 in renumbered else {})
        for i, p in enumerate(parts)
    ]  # fmt: skip
    return results
