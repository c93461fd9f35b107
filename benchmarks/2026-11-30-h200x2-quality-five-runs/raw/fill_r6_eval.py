"""Repeat 6's ns-eval, run again by hand: the first one failed (raw/fox_sf6_as_run.json).

Its lane exported TORCH_HOME with stand-in AlexNet weights, so the benchmark saw weights, used no stand-in of its
own, and did not set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD, which splatfacto's checkpoints need on torch >= 2.6
(nerfstudio #3683). The same probe evaluation with that variable set (command.sh) wrote raw/fox_sf6_reeval.json
and raw/fox_sf6_reeval_probe.json. This fills the run's record the way splatbench.runner.RunJob.evaluate does
(LPIPS dropped: stand-in weights) and writes raw/fox_sf6_results.json.

    PYTHONPATH=splatbench python benchmarks/2026-11-30-h200x2-quality-five-runs/raw/fill_r6_eval.py
"""

import json
from pathlib import Path

from splatbench.results import bytes_to_gib, read_eval_metrics

raw = Path(__file__).parent
results = json.loads((raw / "fox_sf6_as_run.json").read_text())
probe = json.loads((raw / "fox_sf6_reeval_probe.json").read_text())
(record,) = results["runs"]
assert record["repeat"] == 6 and record["status"] == "eval-failed", record["status"]
record.update(read_eval_metrics(raw / "fox_sf6_reeval.json"))
record["lpips"] = record["lpips_std"] = None  # stand-in AlexNet weights: meaningless
record["eval_wall_s"] = probe["eval_s"]
record["eval_peak_gib"] = bytes_to_gib(probe["eval_peak_bytes"])
record["per_image"] = probe["per_image"]
record["status"], record["error"] = "ok", None
record["eval_log"] = "raw-logs: fox-part-b/sf6_reeval_r6.log (the ns-eval run again by hand: fill_r6_eval.py)"
(raw / "fox_sf6_results.json").write_text(json.dumps(results, indent=2) + "\n")
print(f"repeat 6: PSNR {record['psnr']:.3f} SSIM {record['ssim']:.4f}")
