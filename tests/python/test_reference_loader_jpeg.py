"""stallscope.ReferenceLoader over JPEGs (from_image_folder, from_tar_shards) against plain Python:
every sample's content and order for a seed, for both sources, against Pillow on the same crop
boxes (loader_plain.py recomputes the order, each sample's draws and torchvision's ImageFolder
listing; the tolerance is test_jpeg_ops.py's); the mapping of torchvision chains
(native_transform) with stand-in classes of torchvision's names and documented attributes (the
same cases run against real torchvision in torchvision_parity.py, in its own environment); the
device path's uint8 + normalise-on-the-device against the CPU's float batches; files with
libjpeg's corrupt-data warnings read as Pillow reads them; errors that name the file and the
sample index without hanging.
"""

from __future__ import annotations

import enum
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import types
from pathlib import Path

import pytest

from conftest import LOADER_CHILD_PRELUDE, base_env, import_stallscope
from loader_plain import FakeCuda, expected_batches, expected_image, image_folder
from test_jpeg_ops import ABS_MAX, MAE_SCALED, P99_MAX, photo
from transform_cases import MEAN, STD, accepted, refused

pytestmark = pytest.mark.torch

ss = import_stallscope()  # skips this module unless the loader is built and torch installed

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

RL = ss.ReferenceLoader
IT = ss.reference_loader.ImageTransform
native_transform = ss.reference_loader.native_transform

# ---------------------------------------------------------------------------------------------
# Data: an ImageFolder tree (nested folders, upper-case extensions, grey, CMYK, progressive, an
# image larger than 4x the crop, one smaller than it) and the same images in two tar shards.

# class/name: (width, height, mode, save options)
TREE = {
    "a_cat/001.jpg": (500, 375, "RGB", {"quality": 90}),
    "a_cat/002.jpg": (375, 500, "RGB", {"quality": 90, "subsampling": 0}),
    "a_cat/grey.jpeg": (400, 300, "L", {"quality": 90}),
    "b_dog/deep/er/x.jpg": (320, 240, "RGB", {"quality": 85}),
    "b_dog/n01.JPEG": (500, 333, "RGB", {"quality": 85, "progressive": True}),
    "b_dog/z.jpg": (150, 100, "RGB", {"quality": 90}),
    "c_owl/big.jpg": (1600, 1200, "RGB", {"quality": 90}),
    "c_owl/cmyk.jpg": (400, 300, "CMYK", {"quality": 95}),
    "c_owl/wide.jpg": (640, 200, "RGB", {"quality": 90}),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imagefolder")
    for i, (name, (w, h, mode, opts)) in enumerate(TREE.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        photo(w, h, 100 + i).convert(mode).save(path, "JPEG", **opts)
    (root / "a_cat" / "notes.txt").write_text("not an image: ImageFolder skips it")
    return root


def write_shard(path: Path, members: list[tuple[str, bytes]]) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def shards(tree, tmp_path_factory) -> tuple[list[Path], list[tuple[bytes, int]]]:
    """Two shards holding the tree's images as WebDataset samples; and [(jpeg bytes, label)] in
    sample order."""
    folder = tmp_path_factory.mktemp("shards")
    _, samples = image_folder(tree)
    plain, paths = [], []
    for s, part in enumerate((samples[:5], samples[5:])):
        members = []
        for k, (path, label) in enumerate(part):
            key = f"train/s{s}_{k:04d}"
            data = Path(path).read_bytes()
            members += [(f"{key}.jpg", data), (f"{key}.cls", f"{label}\n".encode()), (f"{key}.json", b"{}")]
            plain.append((data, label))
        paths.append(folder / f"shard-{s:06d}.tar")
        write_shard(paths[-1], members)
    return paths, plain


# ---------------------------------------------------------------------------------------------
# Content and order against Pillow


def check_image(got: np.ndarray, ref, t, name: str, report: list) -> None:
    """got vs Pillow's reading, in uint8 levels, within test_jpeg_ops.py's tolerance: MAE <= 1.5
    (MAE_SCALED), 99th percentile <= 12, max <= 110; and, for a random crop, closer to Pillow on
    its own box than on that box moved by one pixel any way: the check of the box that
    test_jpeg_ops.py makes with its 1.0 bound at full size, which these crops can exceed (a CMYK
    image's crop shrunk 1.97x measured 1.02, on the right box). ref(shift) renders Pillow's."""
    def levels(want):
        assert got.shape == want.shape, name
        if t.output == "float32":
            return np.abs(got.astype(np.float64) - want.astype(np.float64)) * 255 * np.array(t.std)[:, None, None]
        return np.abs(got.astype(np.int32) - want.astype(np.int32)).astype(np.float64)

    d = levels(ref((0, 0)))
    mae, p99, mx = float(d.mean()), float(np.percentile(d, 99)), float(d.max())
    report.append((name, mae, p99, mx))
    assert mae <= MAE_SCALED and p99 <= P99_MAX and mx <= ABS_MAX + 0.01, f"{name}: MAE {mae:.3f}, p99 {p99}, max {mx}"
    if t.crop == "random_resized_crop":
        for shift in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            moved = float(levels(ref(shift)).mean())
            assert mae < moved, f"{name}: the box moved by {shift} is closer to the loader's ({moved:.3f} < {mae:.3f})"


def pillow(source, t, seed, epoch, index):
    """ref(shift) for check_image: Pillow's reading of one sample (loader_plain.expected_image)."""
    return lambda shift: expected_image(source, t, seed, epoch, index, shift)[0]


TRANSFORMS = {
    "rrc float normalised": IT(size=224, flip=0.5, mean=MEAN, std=STD),
    "rrc uint8 rectangle": IT(size=(160, 192), scale=(0.25, 1.0), ratio=(0.5, 2.0), flip=1.0, output="uint8"),
    "resize + center float": IT("resize_center_crop", 224, resize=256, mean=MEAN, std=STD),
    "resize + padded center hwc": IT("resize_center_crop", (200, 180), resize=160, output="uint8_hwc"),
    "resize (h, w) flipped": IT("resize_center_crop", (180, 200), resize=(180, 200), flip=0.5),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
@pytest.mark.parametrize("shuffle,seed,threads", [(True, 7, 2), (False, 0, 1)])
def test_image_folder_every_sample_and_order_match_a_plain_reading(tree, name, shuffle, seed, threads):
    t = TRANSFORMS[name]
    classes, samples = image_folder(tree)
    loader = RL.from_image_folder(tree, t, batch_size=4, shuffle=shuffle, seed=seed, threads=threads)
    assert loader.classes == classes == ["a_cat", "b_dog", "c_owl"]
    assert loader.class_to_idx == {c: i for i, c in enumerate(classes)}
    assert loader.transform == t
    assert len(loader) == 3 and len(samples) == len(TREE)
    report = []
    for epoch in range(2):
        want = expected_batches(len(samples), 4, shuffle=shuffle, seed=seed, epoch=epoch)
        got = list(loader)
        assert len(got) == len(want)
        for (images, labels), idx in zip(got, want, strict=True):
            assert labels.dtype == torch.int64 and labels.tolist() == [samples[i][1] for i in idx]
            dtype = torch.float32 if t.output == "float32" else torch.uint8
            shape = (len(idx), *t.size, 3) if t.output == "uint8_hwc" else (len(idx), 3, *t.size)
            assert images.dtype == dtype and tuple(images.shape) == shape
            for k, i in enumerate(idx):
                check_image(images[k].numpy(), pillow(samples[i][0], t, seed, epoch, i), t,
                            f"{samples[i][0]} epoch {epoch}", report)
    worst = max(report, key=lambda r: r[1])
    print(f"\n{name}: {len(report)} images, worst MAE {worst[1]:.3f} ({worst[0]}), max {max(r[3] for r in report)}")


@pytest.mark.parametrize("name", ["rrc float normalised", "resize + center float"])
def test_tar_shards_every_sample_and_order_match_a_plain_reading(shards, name):
    t = TRANSFORMS[name]
    paths, plain = shards
    pattern = str(paths[0]).replace("000000", "{000000..000001}")
    for spec in ([str(p) for p in paths], pattern):
        loader = RL.from_tar_shards(spec, t, batch_size=3, shuffle=True, seed=11, threads=2)
        assert loader.classes is None and len(loader) == 3
        report = []
        for epoch in range(2):
            want = expected_batches(len(plain), 3, shuffle=True, seed=11, epoch=epoch)
            got = list(loader)
            assert len(got) == len(want)
            for (images, labels), idx in zip(got, want, strict=True):
                assert labels.dtype == torch.int64 and labels.tolist() == [plain[i][1] for i in idx]
                assert images.dtype == torch.float32 and tuple(images.shape) == (len(idx), 3, *t.size)
                for k, i in enumerate(idx):
                    check_image(images[k].numpy(), pillow(io.BytesIO(plain[i][0]), t, 11, epoch, i), t,
                                f"shard sample {i} epoch {epoch}", report)


def test_an_image_folder_dataset_object_is_read_with_its_own_samples(tree):
    """A torchvision ImageFolder passed whole: its samples as they are (here filtered and
    reordered, as a subset would be), its classes and transform. A stand-in of its documented
    attributes; torchvision_parity.py passes the real one."""
    classes, samples = image_folder(tree)

    def default_loader(path):
        raise AssertionError("the loader reads the files natively")

    def getitem(self, index):
        raise AssertionError("not called")

    default_loader.__module__ = getitem.__module__ = "torchvision.datasets.folder"
    getitem.__qualname__ = "DatasetFolder.__getitem__"
    ImageFolder = type("ImageFolder", (), {"__getitem__": getitem, "__len__": lambda self: len(self.samples)})
    t = TRANSFORMS["resize + center float"]
    ds = ImageFolder()
    ds.root, ds.classes, ds.loader, ds.transform, ds.target_transform = str(tree), classes, default_loader, t, None
    ds.samples = samples[::-2]
    sys.modules.setdefault("torchvision", types.SimpleNamespace(get_image_backend=lambda: "PIL"))
    try:
        loader = RL.from_image_folder(ds, batch_size=2)
        got = [(img, lab) for images, labels in loader for img, lab in zip(images, labels, strict=True)]
    finally:
        if isinstance(sys.modules.get("torchvision"), types.SimpleNamespace):
            del sys.modules["torchvision"]
    assert [int(lab) for _, lab in got] == [lab for _, lab in ds.samples]
    for k, (img, _) in enumerate(got):
        check_image(img.numpy(), pillow(ds.samples[k][0], t, 0, 0, k), t, ds.samples[k][0], [])
    ds.target_transform = int
    with pytest.raises(ValueError, match="target_transform"):
        RL.from_image_folder(ds)
    ds.target_transform = None
    ds.loader = lambda path: None
    with pytest.raises(ValueError, match="PIL loader"):
        RL.from_image_folder(ds)


# ---------------------------------------------------------------------------------------------
# The device path: uint8 over the bus, normalised there, equal to the CPU's float batches


def test_a_cuda_device_sends_uint8_and_normalises_there_with_the_cpu_values(tree, monkeypatch):
    R = ss.reference_loader
    t = TRANSFORMS["rrc float normalised"]
    cpu = list(RL.from_image_folder(tree, t, batch_size=4, shuffle=True, seed=5))
    # A 'CUDA' device that is the CPU: the stand-in runs the device path's logic (tests/gpu/ and
    # torchvision_parity.py's GPU case run the real one).
    real_device_of = R._device_of
    monkeypatch.setattr(R, "_device_of", lambda torch_, d: torch.device("cpu") if d == "fake-cuda" else
                        real_device_of(torch_, d))
    loader = RL.from_image_folder(tree, t, batch_size=4, shuffle=True, seed=5, device="fake-cuda", pin_memory=False)
    assert loader._source.transform.layout == "uint8_chw", "uint8 crosses the bus"
    assert loader._source.fields[0][1] == "uint8"
    loader._cuda = FakeCuda()
    dev = list(loader)
    assert len(dev) == len(cpu)
    for (xd, yd), (xc, yc) in zip(dev, cpu, strict=True):
        assert xd.dtype == torch.float32 and torch.equal(yd, yc)
        assert torch.equal(xd, xc), "the device's ToTensor + Normalize gives the CPU's values bit for bit"
    # PILToTensor chains stay uint8 on the device.
    u = RL.from_image_folder(tree, TRANSFORMS["rrc uint8 rectangle"], batch_size=4, device="fake-cuda",
                             pin_memory=False)
    assert u._source.transform.layout == "uint8_chw" and u._transforms is None


# ---------------------------------------------------------------------------------------------
# torchvision's transforms mapped, with stand-ins of the same names and documented attributes


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


def standins(v2: bool):
    """A namespace like torchvision.transforms (v1) or .v2: classes of those names, in modules of
    those names, holding what the documentation says each keeps (v2 keeps Resize's size as a
    list and the interpolation as its value)."""
    mod = {"geometry": "torchvision.transforms.v2._geometry" if v2 else "torchvision.transforms.transforms",
           "misc": "torchvision.transforms.v2._misc" if v2 else "torchvision.transforms.transforms",
           "conv": "torchvision.transforms.v2._type_conversion" if v2 else "torchvision.transforms.transforms",
           "color": "torchvision.transforms.v2._color" if v2 else "torchvision.transforms.transforms"}

    def size2(s):
        return (s, s) if isinstance(s, int) else tuple(s)

    def interp(i):
        return i.value if v2 else i

    def make(name, where, init):
        return type(name, (), {"__init__": init, "__module__": mod[where], "__qualname__": name})

    B = InterpolationMode.BILINEAR

    def rrc(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation=B, antialias=True):
        self.size, self.scale, self.ratio = size2(size), scale, ratio
        self.interpolation, self.antialias = interp(interpolation), antialias

    def resize(self, size, interpolation=B, max_size=None, antialias=True):
        self.size = ([size] if isinstance(size, int) else list(size) if size is not None else None) if v2 else size
        self.interpolation, self.max_size, self.antialias = interp(interpolation), max_size, antialias

    def keep(*names, **defaults):
        def init(self, *args, **kw):
            for n, v in zip(names, args, strict=False):
                setattr(self, n, v)
            for n in names[len(args):]:
                setattr(self, n, kw.get(n, defaults.get(n)))
        return init

    ns = types.SimpleNamespace(InterpolationMode=InterpolationMode)
    ns.RandomResizedCrop = make("RandomResizedCrop", "geometry", rrc)
    ns.Resize = make("Resize", "geometry", resize)
    ns.CenterCrop = make("CenterCrop", "geometry", lambda self, size: setattr(self, "size", size2(size)))
    ns.RandomCrop = make("RandomCrop", "geometry", lambda self, size: setattr(self, "size", size2(size)))
    ns.RandomHorizontalFlip = make("RandomHorizontalFlip", "geometry", keep("p", p=0.5))
    ns.ToTensor = make("ToTensor", "conv", keep())
    ns.PILToTensor = make("PILToTensor", "conv", keep())
    ns.ConvertImageDtype = make("ConvertImageDtype", "misc", keep("dtype"))
    ns.Normalize = make("Normalize", "misc", keep("mean", "std", "inplace", inplace=False))
    ns.ColorJitter = make("ColorJitter", "color", keep("brightness", "contrast", "saturation", "hue"))
    ns.Lambda = make("Lambda", "misc", keep("lambd"))
    ns.Compose = type("Compose", (), {"__init__": keep("transforms"),
                                      "__module__": "torchvision.transforms.v2._container" if v2 else mod["misc"]})
    if v2:
        ns.ToImage = make("ToImage", "conv", keep())
        ns.ToDtype = make("ToDtype", "misc", keep("dtype", "scale", scale=False))
        ns.ToPureTensor = make("ToPureTensor", "conv", keep())
    return ns


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_native_transform_maps_the_classic_chains(v2):
    T = standins(v2)
    for label, chain, want in accepted(T, torch, IT, v2):
        got, why = native_transform(chain)
        assert why is None and got == want, f"{label}: {why or got}"
        assert native_transform(want) == (want, None)


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_native_transform_refuses_the_others_with_a_reason(v2):
    T = standins(v2)
    for label, chain, phrase in refused(T, torch, v2):
        got, why = native_transform(chain)
        assert got is None and why is not None, f"{label} was accepted as {got}"
        assert phrase in why and "\n" not in why, f"{label}: {why!r}"
    # A user's class named like torchvision's is not torchvision's.
    Mine = type("RandomResizedCrop", (), {})
    assert "is not a torchvision transform" in native_transform([Mine()])[1]


def test_refused_chains_and_bad_descriptions_raise_value_error_in_one_line(tree):
    T = standins(False)
    with pytest.raises(ValueError, match=r"ColorJitter is not one") as e:
        RL.from_image_folder(tree, T.Compose([T.RandomResizedCrop(224), T.ColorJitter(0.4), T.ToTensor()]))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="scale"):
        IT(scale=(0.5, 2.0))
    with pytest.raises(ValueError, match="crop must be"):
        IT("random_crop")
    with pytest.raises(ValueError, match="output='float32' only"):
        IT(output="uint8", mean=MEAN, std=STD)


def test_describe_reads_like_the_torchvision_chain():
    assert IT(size=224, flip=0.5, mean=MEAN, std=STD).describe() == (
        "RandomResizedCrop(size=(224, 224), scale=(0.08, 1), ratio=(0.75, 1.33333)) -> RandomHorizontalFlip(p=0.5) "
        "-> ToTensor() -> Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))")
    assert IT("resize_center_crop", 224, resize=256, output="uint8").describe() == (
        "Resize(size=256) -> CenterCrop(size=(224, 224)) -> PILToTensor()")


# ---------------------------------------------------------------------------------------------
# libjpeg's corrupt-data warnings: read as Pillow reads them


def test_a_file_with_extraneous_bytes_reads_as_pillow_reads_it(tmp_path):
    root = tmp_path / "tree"
    (root / "x").mkdir(parents=True)
    buf = io.BytesIO()
    photo(320, 240, 3).save(buf, "JPEG", quality=90)
    good = buf.getvalue()
    assert good.endswith(b"\xff\xd9")
    # What ImageNet holds: bytes between the last scan and the EOI marker.
    path = root / "x" / "extra.jpg"
    path.write_bytes(good[:-2] + bytes(range(1, 241)) + b"\xff\xd9")
    with Image.open(path) as im:
        want = np.asarray(im.convert("RGB"))  # Pillow reads it (and says nothing)
    whole = IT("resize_center_crop", (240, 320), output="uint8_hwc")  # the whole image, no resize
    part = IT("resize_center_crop", (100, 100), output="uint8_hwc")  # rows 70-170: the decode stops above the end
    for t in (whole, part):
        (img, _), = list(RL.from_image_folder(root, t, batch_size=1))
        h, w = t.size
        top, left = round((240 - h) / 2), round((320 - w) / 2)
        d = np.abs(img[0].numpy().astype(int) - want[top:top + h, left:left + w].astype(int))
        assert d.max() <= 1 and d.mean() < 0.01, f"{t.size}: decoded as Pillow decodes it"


# ---------------------------------------------------------------------------------------------
# Errors: an exception naming the file and the sample index, no hang, threads joined (in a child)

PRELUDE = LOADER_CHILD_PRELUDE + """
from stallscope.reference_loader import ImageTransform as IT
def run(make):
    before = threads()
    t0 = time.monotonic()
    try:
        loader = make()
        n = sum(len(labels) for _, labels in loader)
        out = dict(ok=n)
    except LoaderError as e:
        out = dict(err=str(e), runtime=isinstance(e, RuntimeError))
    out["elapsed"] = time.monotonic() - t0
    out["joined"] = settle(before) <= before
    return out
"""


def child(body: str, timeout=120) -> dict:
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                       timeout=timeout, env=base_env())
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError(f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")


def test_errors_name_the_file_and_the_sample_without_hanging(tree, shards, tmp_path):
    root = tmp_path / "tree"
    shutil.copytree(tree, root)
    _, samples = image_folder(root)
    good = Path(samples[0][0]).read_bytes()
    names = {}

    def damage(i, data, what):
        Path(samples[i][0]).write_bytes(data)
        names[what] = (samples[i][0], i)

    damage(1, good[: len(good) // 2], "truncated")
    sof = good.index(b"\xff\xc0")
    damage(3, good[: sof + 12] + b"\x03" + good[sof + 13:], "bad table")  # a quantisation table never defined
    at = len(good) // 3
    damage(5, good[:at] + b"\xff\x24" + good[at + 2:], "unknown marker")  # Pillow refuses it too
    damage(7, b"<html>not found</html>", "not a JPEG")
    clean = tmp_path / "clean"
    shutil.copytree(tree, clean)
    missing = image_folder(clean)[1][8][0]
    tar_paths, _ = shards
    cut = tmp_path / "cut.tar"
    cut.write_bytes(tar_paths[1].read_bytes()[:3000])
    later = tmp_path / "later.tar"
    later.write_bytes(tar_paths[1].read_bytes())
    badcls = tmp_path / "badcls.tar"
    write_shard(badcls, [("k1.jpg", good), ("k1.cls", b"cat")])
    r = child(f"""
        t = IT(size=64)
        out = {{}}
        for what, (path, i) in {names!r}.items():
            # one bad file in a tree of good ones: the loader reads it alone (a one-sample tree)
            root = os.path.join({str(tmp_path)!r}, "one-" + str(i))
            os.makedirs(os.path.join(root, "c"))
            os.symlink(path, os.path.join(root, "c", os.path.basename(path)))
            out[what] = run(lambda: RL.from_image_folder(root, t, batch_size=1))
        # a file removed after the listing: the 9th sample of the whole tree, 3 threads at work
        loader = RL.from_image_folder({str(clean)!r}, t, batch_size=2, threads=3, prefetch=4)
        os.remove({missing!r})
        out["missing"] = run(lambda: loader)
        out["cut tar"] = run(lambda: RL.from_tar_shards([{str(tar_paths[0])!r}, {str(cut)!r}], t))
        out["bad label"] = run(lambda: RL.from_tar_shards({str(badcls)!r}, t))
        loader = RL.from_tar_shards([{str(tar_paths[0])!r}, {str(later)!r}], t, batch_size=2, threads=2)
        os.truncate({str(later)!r}, 3000)
        out["tar cut later"] = run(lambda: loader)
        print("RESULT " + json.dumps(out))
    """)
    for what, (path, _) in names.items():
        res = r[what]
        assert "err" in res, f"{what}: read as {res}"
        assert os.path.basename(path) in res["err"] and "(sample 0)" in res["err"], res["err"]
        assert res["runtime"] and res["joined"] and res["elapsed"] < 30 and "\n" not in res["err"]
    assert "truncated" in r["truncated"]["err"].lower()
    assert "Quantization table" in r["bad table"]["err"]
    assert "Unsupported marker type 0x24" in r["unknown marker"]["err"]
    assert "not a JPEG" in r["not a JPEG"]["err"]
    assert missing in r["missing"]["err"] and "(sample 8)" in r["missing"]["err"], r["missing"]
    assert r["missing"]["joined"], "every loader thread joined"
    assert str(cut) in r["cut tar"]["err"], r["cut tar"]
    assert str(badcls) in r["bad label"]["err"] and "k1.cls" in r["bad label"]["err"], r["bad label"]
    err = r["tar cut later"]["err"]
    assert str(later) in err and "train/s1_" in err and "(sample " in err, err
    for res in r.values():
        assert res["elapsed"] < 30


def test_a_tree_with_other_images_is_refused_up_front(tmp_path):
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    photo(64, 48, 1).save(root / "a" / "1.jpg")
    photo(64, 48, 2).save(root / "a" / "2.png")
    with pytest.raises(ValueError, match=r"a/2.png \(sample 1\) is not a JPEG"):
        RL.from_image_folder(root, IT(size=32))
    with pytest.raises(ss.LoaderError, match="no class folder"):
        RL.from_image_folder(root / "a", IT(size=32))
