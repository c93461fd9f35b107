"""pytest -p memtrace_plugin: print CUDA memory around each evaluation stage (diagnosis only)."""
import functools
import torch

MIB = 2**20


def _mem(tag):
    torch.cuda.synchronize()
    print(f"[mem] {tag}: allocated {torch.cuda.memory_allocated() / MIB:.0f} MiB, max since reset {torch.cuda.max_memory_allocated() / MIB:.0f} MiB", flush=True)


def pytest_configure(config):
    import nerfstudio.configs.method_configs  # noqa: F401 (nerfstudio imports in its own order)

    from ns_splat_plus.evaluation import streamed
    from ns_splat_plus.model import metrics
    from ns_splat_plus.model.model import SplatPlusModel

    orig_render = SplatPlusModel.get_outputs_for_camera

    @functools.wraps(orig_render)
    def render(self, *a, **k):
        _mem("before render")
        out = orig_render(self, *a, **k)
        _mem(f"after render (keys {sorted(out)})")
        return out

    SplatPlusModel.get_outputs_for_camera = render
    orig_im = streamed._image_metrics

    def image_metrics(model, outputs, batch):
        _mem(f"before metrics (limit {getattr(model, 'eval_memory_limit_bytes', None)})")
        r = orig_im(model, outputs, batch)
        _mem("after metrics")
        return r

    streamed._image_metrics = image_metrics
    orig_dev = metrics.fits_on_device

    def lpips_device(*a, **k):
        d = orig_dev(*a, **k)
        _mem(f"lpips on {d} (args {a[1:]} {k})")
        return d

    metrics.fits_on_device = lpips_device
    orig_one = streamed.evaluate_one_image

    def one(pipeline, with_loss=False):
        _mem(f"evaluate_one_image(with_loss={with_loss}) start")
        return orig_one(pipeline, with_loss)

    streamed.evaluate_one_image = one
    import ns_splat_plus.evaluation as ev

    ev.evaluate_one_image = one
