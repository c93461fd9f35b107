import os, sys, time, threading, hashlib, functools
import numpy as np
from PIL import Image
from concurrent.futures import ThreadPoolExecutor
d='../shared/data/fox/images'  # from the repository root; files=[os.path.join(d,f) for f in sorted(os.listdir(d))][:58]
def decode_all():
    t=time.perf_counter()
    with ThreadPoolExecutor(2) as ex: list(ex.map(lambda f: np.array(Image.open(f), dtype='uint8'), files))
    return time.perf_counter()-t
def key():
    import importlib
    import triton.runtime.cache as c
    importlib.reload(c)  # a fresh lru_cache each time
    t=time.perf_counter(); c.triton_key(); return time.perf_counter()-t
import triton.runtime.cache
print('alone: decode %.2f s, triton_key %.2f s' % (decode_all(), key()))
print('alone: decode %.2f s, triton_key %.2f s' % (decode_all(), key()))
for rep in range(2):
    res={}
    th=threading.Thread(target=lambda: res.update(k=key())); t=time.perf_counter(); th.start()
    dec=decode_all(); main_done=time.perf_counter()-t; th.join(); both=time.perf_counter()-t
    print('together: decode %.2f s, triton_key %.2f s in its thread, both done after %.2f s (main waited %.2f s)' % (dec, res['k'], both, both-main_done))
