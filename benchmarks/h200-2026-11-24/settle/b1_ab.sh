# fox B = 1, splatfacto's 30k schedule: 2 runs of this code and 2 of 3b8d9ff (in .old), all four at once on one GPU
# .old/ was the tree of 3b8d9ff (git archive 3b8d9ff | tar -x -C .old), carried to the device; PYTHONPATH puts it
# before the installed checkout, so the second benchmark and its ns-train children import the old code
# (its runs' config.yml has no tight_tiles: checked on the device).
cd /tmp/repo
rm -rf /tmp/repo-old && cp -r .old /tmp/repo-old && ln -s /tmp/repo/.data /tmp/repo-old/.data
PYTHONPATH=/tmp/repo-old:/tmp/site python -c "import ns_splat_plus; print('old code from', ns_splat_plus.__file__)"
python -c "import ns_splat_plus; print('head code from', ns_splat_plus.__file__)"
setsid nohup python scripts/benchmark.py --methods splat-plus --steps 30000 --repeats 2 --first-repeat ${FIRST:-2} \
  --concurrent-quality --no-prebuild --timeout 1700 --scene-args "$FOX" --scene-name fox --out /tmp/r-b1-head${TAG} > /tmp/b1_head${TAG}.blog 2>&1 < /dev/null &
echo $! >> /tmp/jobs
cd /tmp/repo-old
PYTHONPATH=/tmp/repo-old:/tmp/site setsid nohup python scripts/benchmark.py --methods b1-3b8d9ff --variant "b1-3b8d9ff=splat-plus" \
  --steps 30000 --repeats 2 --first-repeat ${FIRST:-2} --concurrent-quality --no-prebuild --timeout 1700 --scene-args "$FOX" \
  --scene-name fox --out /tmp/r-b1-old${TAG} > /tmp/b1_old${TAG}.blog 2>&1 < /dev/null &
echo $! >> /tmp/jobs
cd /tmp/repo
