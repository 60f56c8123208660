"""The reference loader's definitions read the plain Python way, independently of its C++ code,
for the tests to compare with: the order of an epoch (splitmix64, Fisher-Yates from the end, rank r
takes positions r, r+W, ...), each sample's random draws (a splitmix64 stream seeded from (seed,
epoch, index): torchvision's RandomResizedCrop.get_params, then the flip), the choice of DCT scale,
torchvision's ImageFolder listing (make_dataset), and each image's expected output from Pillow
(torchvision's PIL loader, crop, bilinear resize, flip, ToTensor, Normalize). Also a stand-in for
the CUDA calls of the device path (FakeCuda).
"""

from __future__ import annotations

import math
import os

M64 = (1 << 64) - 1

# ---------------------------------------------------------------------------------------------
# The order


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def sample_seed(seed, epoch, index):
    h = _mix((seed + 0x9E3779B97F4A7C15) & M64)
    h = _mix(h ^ ((epoch + 0x632BE59BD9B4E019) & M64))
    return _mix(h ^ ((index + 0x8CB92BA72F3D8DD7) & M64))


def epoch_order(n, *, shuffle, seed, epoch, rank=0, world=1):
    order = list(range(n))
    if shuffle:
        state = sample_seed(seed, epoch, -1)
        for i in range(n, 1, -1):
            state = (state + 0x9E3779B97F4A7C15) & M64
            j = (_mix(state) * i) >> 64
            order[i - 1], order[j] = order[j], order[i - 1]
    return order[rank::world]


def expected_batches(n, batch, *, shuffle=False, seed=0, epoch=0, drop_last=False, rank=0, world=1):
    idx = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch, rank=rank, world=world)
    out = [idx[i:i + batch] for i in range(0, len(idx), batch)]
    if drop_last and out and len(out[-1]) < batch:
        out.pop()
    return out


# ---------------------------------------------------------------------------------------------
# A sample's random draws and crop


class Rng:
    """splitmix64, as loader/source.h defines it: uniform() from the top 53 bits, below(n) by a
    128-bit multiply."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        return _mix(self.state)

    def uniform(self, lo=0.0, hi=1.0):
        return lo + (hi - lo) * ((self.next() >> 11) * 2.0**-53)

    def below(self, n):
        return (self.next() * n) >> 64


def random_resized_crop_box(width, height, scale, ratio, rng):
    """torchvision.transforms.RandomResizedCrop.get_params with this generator: (x, y, w, h)."""
    area = width * height
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            y = rng.below(height - h + 1)
            x = rng.below(width - w + 1)
            return x, y, w, h
    in_ratio = width / height
    w, h = width, height
    if in_ratio < ratio[0]:
        h = round(w / ratio[0])
    elif in_ratio > ratio[1]:
        w = round(h * ratio[1])
    return (width - w) // 2, (height - h) // 2, w, h


def dct_scale(box_w, box_h, out_w, out_h):
    """The DCT scale M (decoded at M/8) for a crop box: the smallest of 1, 2, 4, 8 that keeps the box
    at least as large as the output."""
    m = max(math.ceil(8 * out_w / box_w - 1e-9), math.ceil(8 * out_h / box_h - 1e-9))
    m = min(max(m, 1), 8)
    return 1 if m <= 1 else 2 if m <= 2 else 4 if m <= 4 else 8


# ---------------------------------------------------------------------------------------------
# torchvision's ImageFolder and its PIL pipeline

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def image_folder(root):
    """(classes, [(path, label)]) as torchvision.datasets.ImageFolder lists them (find_classes,
    make_dataset)."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for label, c in enumerate(classes):
        for folder, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for name in sorted(names):
                if name.lower().endswith(IMG_EXTENSIONS):
                    samples.append((os.path.join(folder, name), label))
    return classes, samples


def resize_center_crop(img, resize, crop):
    """torchvision's Resize(resize) (int: the shorter side; (h, w); None) then CenterCrop(crop
    (h, w)) on a PIL image, padding included."""
    from PIL import Image

    w, h = img.size
    if isinstance(resize, int):
        if w <= h:
            new_w, new_h = resize, int(resize * h / w)
        else:
            new_w, new_h = int(resize * w / h), resize
        img = img.resize((new_w, new_h), Image.BILINEAR)
    elif resize is not None:
        img = img.resize((resize[1], resize[0]), Image.BILINEAR)
    ch, cw = crop
    w, h = img.size
    if cw > w or ch > h:
        canvas = Image.new("RGB", (max(cw, w), max(ch, h)))
        canvas.paste(img, (max(cw - w, 0) // 2, max(ch - h, 0) // 2))
        img = canvas
        w, h = img.size
    top, left = round((h - ch) / 2.0), round((w - cw) / 2.0)
    return img.crop((left, top, left + cw, top + ch))


def expected_image(path_or_file, transform, seed, epoch, index, shift=(0, 0)):
    """(image as numpy, DCT scale the loader decodes at) for sample `index` of `epoch` under an
    ImageTransform: Pillow decodes the whole file (torchvision's pil_loader: convert("RGB")), the
    crop box and flip come from the sample's own generator, Pillow crops and resizes (bilinear),
    then ToTensor + Normalize, PILToTensor, or HWC. `shift` moves a RandomResizedCrop's box by
    (dx, dy) pixels, for a test that the right box is the closest."""
    import numpy as np
    from PIL import Image

    with Image.open(path_or_file) as im:
        img = im.convert("RGB")
    rng = Rng(sample_seed(seed, epoch, index))
    oh, ow = transform.size
    if transform.crop == "random_resized_crop":
        x, y, w, h = random_resized_crop_box(img.width, img.height, transform.scale, transform.ratio, rng)
        x, y = x + shift[0], y + shift[1]
        out = img.crop((x, y, x + w, y + h)).resize((ow, oh), Image.BILINEAR)
        scale = dct_scale(w, h, ow, oh)
    else:
        out = resize_center_crop(img, transform.resize, transform.size)
        scale = None  # resized whole: the loader's bound for a resize before the crop applies
    if transform.flip > 0 and rng.uniform() < transform.flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(out)
    if transform.output == "uint8_hwc":
        return a, scale
    chw = a.transpose(2, 0, 1)
    if transform.output == "uint8":
        return np.ascontiguousarray(chw), scale
    t = chw.astype(np.float32) / np.float32(255)
    mean = np.array(transform.mean, np.float32)[:, None, None]
    std = np.array(transform.std, np.float32)[:, None, None]
    return (t - mean) / std, scale


# ---------------------------------------------------------------------------------------------
# The device path without a GPU


class FakeCuda:
    """Stands in for reference_loader._Cuda: 'device' tensors are host copies; records what the
    loader asks of CUDA."""

    index = 0

    def __init__(self):
        self.events = 0
        self.waits = []  # (stream, event) in order
        self.recorded = []  # (data_ptr, stream)
        self.current = None  # the stream being used

    def new_stream(self):
        return "loader-stream"

    def using(self, stream):
        fake = self

        class Using:
            def __enter__(self):
                fake.current = stream

            def __exit__(self, *exc):
                fake.current = None

        return Using()

    def empty_like(self, host):
        import torch

        assert self.current == "loader-stream", "device memory is allocated on the loader's stream"
        return torch.empty_like(host)

    def handle(self, stream):
        return 1234

    def event_after(self, stream):
        assert stream == "loader-stream"
        self.events += 1
        return self.events

    def current_stream(self):
        return "consumer"

    def wait(self, stream, event):
        self.waits.append((stream, event))

    def record_stream(self, tensor, stream):
        self.recorded.append((tensor.data_ptr(), stream))
