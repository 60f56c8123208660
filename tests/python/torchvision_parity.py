"""ReferenceLoader over JPEGs against real torchvision: run in the torchvision environment
(scripts/venv_torchvision.sh) by test_torchvision_parity.py, since the main environment's torch
2.13.0 CPU has no torchvision that imports. Not collected on its own (no test_ prefix).

- the mapping (native_transform) on torchvision's own classes, v1 and v2: the same cases as the
  stand-ins of test_reference_loader_jpeg.py (transform_cases.py);
- batches against torch's DataLoader over torchvision.datasets.ImageFolder on the same tree:
  the same number, structure ([images, labels]), dtypes, shapes, labels per epoch (as a multiset,
  shuffled) and value ranges;
- a deterministic chain (Resize + CenterCrop) sample by sample against torchvision's output, and
  random crops against torchvision's functional ops on the loader's boxes (loader_plain.py
  recomputes them), within test_jpeg_ops.py's tolerance;
- an ImageFolder passed whole (its own samples, filtered), and one the loader must refuse;
- with CUDA: device batches (uint8 sent, normalised on the GPU) equal to the CPU's.
"""

from __future__ import annotations

import collections
import importlib.util
import sys

import pytest

from conftest import BUILD, PYTHON_DIR
from loader_plain import Rng, expected_batches, image_folder, random_resized_crop_box, sample_seed
from test_jpeg_ops import ABS_MAX, MAE_SCALED, P99_MAX, photo
from transform_cases import MEAN, STD, accepted, refused

torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed here: "
                                  "scripts/venv_torchvision.sh makes the environment these tests run in")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision.transforms as T1  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402
import torchvision.transforms.v2 as T2  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchvision import datasets  # noqa: E402

MODULE = next(BUILD.glob("lib/_stallscope_loader*.so"), None)
if MODULE is None:
    pytest.skip(f"the loader's Python module is not built in {BUILD / 'lib'}", allow_module_level=True)
if "_stallscope_loader" not in sys.modules:
    spec = importlib.util.spec_from_file_location("_stallscope_loader", MODULE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["_stallscope_loader"] = mod
sys.path.insert(0, str(PYTHON_DIR))
import stallscope.reference_loader as R  # noqa: E402

RL, IT = R.ReferenceLoader, R.ImageTransform

TREE = {
    "a_cat/001.jpg": (500, 375, "RGB"),
    "a_cat/002.jpg": (375, 500, "RGB"),
    "a_cat/grey.jpeg": (400, 300, "L"),
    "b_dog/deep/x.jpg": (320, 240, "RGB"),
    "b_dog/n01.JPEG": (500, 333, "RGB"),
    "b_dog/z.jpg": (150, 100, "RGB"),
    "c_owl/big.jpg": (1600, 1200, "RGB"),
    "c_owl/cmyk.jpg": (400, 300, "CMYK"),
    "c_owl/wide.jpg": (640, 200, "RGB"),
    "c_owl/w2.jpg": (480, 360, "RGB"),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagefolder")
    for i, (name, (w, h, mode)) in enumerate(TREE.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        photo(w, h, 200 + i).convert(mode).save(path, "JPEG", quality=90)
    return root


def levels(got, want, std=None):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    d = np.abs(got - want)
    return d * 255 * np.array(std)[:, None, None] if std is not None else d


def within_tolerance(d, name):
    mae, p99, mx = float(d.mean()), float(np.percentile(d, 99)), float(d.max())
    assert mae <= MAE_SCALED and p99 <= P99_MAX and mx <= ABS_MAX + 0.01, f"{name}: MAE {mae:.3f}, p99 {p99}, max {mx}"
    return mae


# ---------------------------------------------------------------------------------------------
# The mapping, on torchvision's own classes


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_torchvision_classic_chains_map_and_others_are_refused(v2):
    T = T2 if v2 else T1
    for label, chain, want in accepted(T, torch, IT, v2):
        got, why = R.native_transform(chain)
        assert why is None and got == want, f"{label}: {why or got}"
    for label, chain, phrase in refused(T, torch, v2):
        got, why = R.native_transform(chain)
        assert got is None and phrase in why and "\n" not in why, f"{label}: {got} {why!r}"


# ---------------------------------------------------------------------------------------------
# Batches against torch's DataLoader over torchvision's ImageFolder

CHAINS = {
    "v1 train": lambda: T1.Compose([T1.RandomResizedCrop(224), T1.RandomHorizontalFlip(), T1.ToTensor(),
                                    T1.Normalize(MEAN, STD)]),
    "v1 eval": lambda: T1.Compose([T1.Resize(256), T1.CenterCrop(224), T1.ToTensor(), T1.Normalize(MEAN, STD)]),
    "v1 uint8": lambda: T1.Compose([T1.RandomResizedCrop((96, 128)), T1.PILToTensor()]),
    "v2 recipe": lambda: T2.Compose([T2.ToImage(), T2.RandomResizedCrop(224, antialias=True),
                                     T2.RandomHorizontalFlip(), T2.ToDtype(torch.float32, scale=True),
                                     T2.Normalize(MEAN, STD)]),
    "v2 eval uint8": lambda: T2.Compose([T2.Resize(160), T2.CenterCrop(128), T2.PILToTensor()]),
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_batches_look_like_torch_dataloader_over_torchvision_imagefolder(tree, name):
    chain = CHAINS[name]()
    theirs = DataLoader(datasets.ImageFolder(str(tree), chain), batch_size=4, shuffle=True, drop_last=False)
    ours = RL.from_image_folder(tree, chain, batch_size=4, shuffle=True, seed=3)
    assert len(ours) == len(theirs)
    assert ours.classes == theirs.dataset.classes and ours.class_to_idx == theirs.dataset.class_to_idx
    for _epoch in range(2):
        a, b = list(theirs), list(ours)
        assert len(a) == len(b)
        for (xa, ya), (xb, yb) in zip(a, b, strict=True):
            assert type(xb) is type(xa) is torch.Tensor and xb.dtype == xa.dtype and xb.shape == xa.shape
            assert yb.dtype == ya.dtype == torch.int64 and yb.shape == ya.shape
        labels = collections.Counter(int(v) for _, y in a for v in y)
        assert labels == collections.Counter(int(v) for _, y in b for v in y)
        xa, xb = torch.cat([x for x, _ in a]), torch.cat([x for x, _ in b])
        if xa.dtype == torch.float32:
            lo = (0 - torch.tensor(MEAN)) / torch.tensor(STD)
            hi = (1 - torch.tensor(MEAN)) / torch.tensor(STD)
            for x in (xa, xb):
                assert (x.amin(dim=(0, 2, 3)) >= lo - 1e-5).all() and (x.amax(dim=(0, 2, 3)) <= hi + 1e-5).all()
        for x in (xa, xb):  # both use their range: not stuck at a constant, not clipped
            assert float(x.float().std()) > 0.1


def test_resize_center_crop_equals_torchvision_sample_by_sample(tree):
    """No randomness: ours is torchvision's own output, within the tolerance."""
    report = []
    for name in ("v1 eval", "v2 eval uint8"):
        chain = CHAINS[name]()
        theirs = list(DataLoader(datasets.ImageFolder(str(tree), chain), batch_size=3))
        ours = list(RL.from_image_folder(tree, chain, batch_size=3))
        for (xa, ya), (xb, yb) in zip(theirs, ours, strict=True):
            assert torch.equal(ya, yb)
            for k in range(len(ya)):
                std = STD if xa.dtype == torch.float32 else None
                report.append(within_tolerance(levels(xb[k], xa[k], std), f"{name} sample {len(report)}"))
    print(f"\nResize + CenterCrop vs torchvision: worst MAE {max(report):.3f} over {len(report)} images")


def test_v2_tensor_path_resize_is_within_the_tolerance(tree):
    """v2's recipe resizes a uint8 tensor (ToImage first, antialias=True), not a PIL image: the
    native resize, which follows Pillow, is within the same tolerance of it."""
    chain = T2.Compose([T2.ToImage(), T2.Resize(256), T2.CenterCrop(224), T2.ToDtype(torch.float32, scale=True),
                        T2.Normalize(MEAN, STD)])
    theirs = list(DataLoader(datasets.ImageFolder(str(tree), chain), batch_size=5))
    ours = list(RL.from_image_folder(tree, chain, batch_size=5))
    worst = 0.0
    for (xa, _), (xb, _) in zip(theirs, ours, strict=True):
        for k in range(len(xa)):
            worst = max(worst, within_tolerance(levels(xb[k], xa[k], STD), f"v2 tensor path sample {k}"))
    print(f"\nv2 tensor-path Resize + CenterCrop vs the loader: worst MAE {worst:.3f}")


def test_random_crops_equal_torchvision_functional_ops_on_the_same_boxes(tree):
    """RandomResizedCrop + flip: torchvision's own F.resized_crop / F.hflip / F.to_tensor /
    F.normalize on the boxes and flips the loader drew (recomputed here from its seed)."""
    chain = CHAINS["v1 train"]()
    ds = datasets.ImageFolder(str(tree))
    classes, samples = image_folder(tree)
    assert classes == ds.classes
    assert [(p, c) for p, c in ds.samples] == [(str(p), c) for p, c in samples]
    seed = 9
    ours = RL.from_image_folder(tree, chain, batch_size=4, shuffle=True, seed=seed, threads=2)
    rrc = chain.transforms[0]
    report = []
    for epoch in range(2):
        order = expected_batches(len(samples), 4, shuffle=True, seed=seed, epoch=epoch)
        for (x, y), idx in zip(ours, order, strict=True):
            for k, i in enumerate(idx):
                img, label = ds[i]
                assert int(y[k]) == label
                rng = Rng(sample_seed(seed, epoch, i))
                left, top, w, h = random_resized_crop_box(img.width, img.height, rrc.scale, rrc.ratio, rng)
                ref = F.resized_crop(img, top, left, h, w, [224, 224])
                if rng.uniform() < 0.5:
                    ref = F.hflip(ref)
                ref = F.normalize(F.to_tensor(ref), MEAN, STD)
                report.append(within_tolerance(levels(x[k], ref, STD), f"{samples[i][0]} epoch {epoch}"))
    print(f"\nRandomResizedCrop vs torchvision on the same boxes: worst MAE {max(report):.3f}")


def test_an_imagefolder_dataset_is_read_with_its_own_samples(tree):
    chain = CHAINS["v1 eval"]()
    ds = datasets.ImageFolder(str(tree), chain)
    ds.samples = ds.samples[1::2]  # a subset, as a user filters one
    theirs = list(DataLoader(ds, batch_size=2))
    ours = list(RL.from_image_folder(ds, batch_size=2))
    assert len(ours) == len(theirs) == 3
    for (xa, ya), (xb, yb) in zip(theirs, ours, strict=True):
        assert torch.equal(ya, yb)
        for k in range(len(ya)):
            within_tolerance(levels(xb[k], xa[k], STD), "subset")
    for broken, phrase in ((datasets.ImageFolder(str(tree), chain, target_transform=lambda y: y + 1),
                            "target_transform"),
                           (datasets.ImageFolder(str(tree), chain, loader=lambda p: None), "PIL loader"),
                           (datasets.ImageFolder(str(tree), T1.Compose([T1.RandomCrop(32), T1.ToTensor()])),
                            "RandomCrop is not one")):
        with pytest.raises(ValueError, match=phrase):
            RL.from_image_folder(broken)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the device path runs on a GPU only")
def test_cuda_batches_are_the_cpu_batches(tree):
    chain = CHAINS["v1 train"]()
    cpu = list(RL.from_image_folder(tree, chain, batch_size=4, shuffle=True, seed=1))
    dev = RL.from_image_folder(tree, chain, batch_size=4, shuffle=True, seed=1, device="cuda")
    assert dev._source.transform.layout == "uint8_chw"
    got = list(dev)
    assert len(got) == len(cpu)
    for (xd, yd), (xc, yc) in zip(got, cpu, strict=True):
        assert xd.device.type == "cuda" and xd.dtype == torch.float32
        assert torch.equal(yd.cpu(), yc)
        assert torch.equal(xd.cpu(), xc), "normalised on the GPU, bit for bit the CPU's values"
