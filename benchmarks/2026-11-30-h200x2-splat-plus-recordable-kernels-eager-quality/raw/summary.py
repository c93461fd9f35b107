"""Per-run PSNR, SSIM, Gaussians of the 5-against-5 test, and C - A with 90 % Welch intervals."""
import glob, json, math, re, statistics as st
from scipy import stats

rows = {}
for f in sorted(glob.glob("*.eval.json")):
    name = f.split(".")[0]
    r = json.load(open(f))["results"]
    log = open(f"{name}.train.log").read()
    m = re.search(r"Trained 30,000 steps in ([\d.]+) s \(([\d.]+) s since the process started\): ([\d,]+) Gaussians", log)
    rows[name] = {"psnr": r["psnr"], "ssim": r["ssim"], "gaussians": int(m.group(3).replace(",", ""))}
    ov = re.search(r"overflowed training renders (\S+)", log)
    print(f"{name}: seed {name[1:]}, PSNR {r['psnr']:.3f}, SSIM {r['ssim']:.4f}, Gaussians {rows[name]['gaussians']:,}"
          + (f", overflowed renders {ov.group(1)}" if ov else ""))
for key in ("psnr", "ssim", "gaussians"):
    a = [v[key] for k, v in rows.items() if k[0] == "A"]
    c = [v[key] for k, v in rows.items() if k[0] == "C"]
    va, vc = st.variance(a) / len(a), st.variance(c) / len(c)
    se = math.sqrt(va + vc)
    df = (va + vc) ** 2 / (va**2 / (len(a) - 1) + vc**2 / (len(c) - 1))
    half = stats.t.ppf(0.95, df) * se
    print(f"{key}: A {st.mean(a):.4f} +- {st.stdev(a):.4f} (n={len(a)}), C {st.mean(c):.4f} +- {st.stdev(c):.4f} "
          f"(n={len(c)}); C - A {st.mean(c) - st.mean(a):+.4f} +- {half:.4f} (90 % Welch, df {df:.1f})")
