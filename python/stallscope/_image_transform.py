"""The image chain the reference loader runs natively (loader/image_ops.h), as stallscope describes
it (ImageTransform), and the mapping from torchvision's transforms to it (native_transform).

torchvision's classic chains map: RandomResizedCrop, or Resize and/or CenterCrop; an optional
RandomHorizontalFlip; ToTensor (or PILToTensor / v2.ToImage, then ConvertImageDtype / v2.ToDtype
to float32) and an optional Normalize; or PILToTensor / v2.ToImage alone, for uint8 batches. Both
the classic classes (torchvision.transforms) and v2's (torchvision.transforms.v2) are read from
their documented attributes (size, scale, ratio, interpolation, antialias, max_size, p, dtype,
scale, mean, std), so this module never imports torchvision. Anything else is refused with a
one-line reason: another transform, another interpolation than bilinear, a Lambda, a parameter
the native chain cannot honour, an order whose result would differ.

What "the same" means here: for a given image and crop box, the native output is torchvision's on
a PIL image within the tolerance tests/python/test_jpeg_ops.py states (the decode is libjpeg-turbo
as in Pillow; the resize is another bilinear). The random draws (crop boxes, flips) follow
torchvision's algorithm and distribution, from the loader's own seeded generator: the same
augmentation statistics, not torch's random stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ImageTransform", "native_transform"]

CROPS = ("random_resized_crop", "resize_center_crop")
OUTPUTS = ("float32", "uint8", "uint8_hwc")
NATIVE = ("RandomResizedCrop, Resize, CenterCrop, RandomHorizontalFlip, ToTensor, PILToTensor, ConvertImageDtype, "
          "Normalize (v2 also: ToImage, ToDtype, ToPureTensor)")


def _pair(v, what: str, kind=float) -> tuple:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (kind(v), kind(v))
    try:
        a, b = v
        return (kind(a), kind(b))
    except (TypeError, ValueError):
        raise ValueError(f"ImageTransform: {what} must be a number or a pair, not {v!r}") from None


def _triple(v, what: str) -> tuple:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (float(v),) * 3
    vals = tuple(float(x) for x in v)
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise ValueError(f"ImageTransform: {what} needs 1 or 3 values (one per RGB channel), got {len(vals)}")
    return vals


def _fmt(v: float) -> str:
    return f"{v:.6g}"


@dataclass(frozen=True)
class ImageTransform:
    """An image chain the reference loader runs natively, in torchvision's terms:

      crop="random_resized_crop": RandomResizedCrop(size, scale, ratio) (bilinear);
      crop="resize_center_crop":  Resize(resize) then CenterCrop(size). resize is an int (the
          shorter side, the other keeping the aspect ratio, as Resize(int)), (h, w), or None (no
          Resize); for Resize((h, w)) alone, give size=(h, w) and resize=(h, w);
      flip: RandomHorizontalFlip(p=flip), 0 for none;
      output: "float32" -> ToTensor then Normalize(mean, std): float32 [3, H, W] (mean 0, std 1:
          ToTensor alone); "uint8" -> PILToTensor: uint8 [3, H, W]; "uint8_hwc": uint8 [H, W, 3].

    size and resize take an int for a square, or (h, w). With a CUDA device and output="float32",
    the loader sends uint8 and normalises on the device (4x fewer bytes over PCIe).
    """

    crop: str = "random_resized_crop"
    size: tuple = (224, 224)
    scale: tuple = (0.08, 1.0)
    ratio: tuple = (3.0 / 4.0, 4.0 / 3.0)
    resize: int | tuple | None = None
    flip: float = 0.0
    output: str = "float32"
    mean: tuple = (0.0, 0.0, 0.0)
    std: tuple = (1.0, 1.0, 1.0)

    def __post_init__(self):
        put = object.__setattr__
        if self.crop not in CROPS:
            raise ValueError(f"ImageTransform: crop must be one of {', '.join(CROPS)}, not {self.crop!r}")
        if self.output not in OUTPUTS:
            raise ValueError(f"ImageTransform: output must be one of {', '.join(OUTPUTS)}, not {self.output!r}")
        size = _pair(self.size, "size", int)
        if min(size) <= 0:
            raise ValueError(f"ImageTransform: size must be positive, not {self.size!r}")
        put(self, "size", size)
        put(self, "scale", _pair(self.scale, "scale"))
        put(self, "ratio", _pair(self.ratio, "ratio"))
        if self.crop == "random_resized_crop":
            if self.resize is not None:
                raise ValueError("ImageTransform: resize is for crop='resize_center_crop'")
            lo, hi = self.scale
            if not (0 < lo <= hi <= 1):
                raise ValueError(f"ImageTransform: scale must satisfy 0 < min <= max <= 1, not {self.scale!r}")
            lo, hi = self.ratio
            if not (0 < lo <= hi):
                raise ValueError(f"ImageTransform: ratio must satisfy 0 < min <= max, not {self.ratio!r}")
        elif self.resize is not None:
            if isinstance(self.resize, int) and not isinstance(self.resize, bool):
                resize = int(self.resize)
                ok = resize > 0
            else:
                resize = _pair(self.resize, "resize", int)
                ok = min(resize) > 0
            if not ok:
                raise ValueError(f"ImageTransform: resize must be positive, not {self.resize!r}")
            put(self, "resize", resize)
        flip = float(self.flip)
        if not (0 <= flip <= 1):
            raise ValueError(f"ImageTransform: flip is a probability in [0, 1], not {self.flip!r}")
        put(self, "flip", flip)
        mean, std = _triple(self.mean, "mean"), _triple(self.std, "std")
        if not all(math.isfinite(v) for v in mean + std) or any(v == 0 for v in std):
            raise ValueError(f"ImageTransform: Normalize needs finite means and non-zero stds, not {mean}, {std}")
        if self.output != "float32" and (mean != (0.0,) * 3 or std != (1.0,) * 3):
            raise ValueError("ImageTransform: mean and std apply to output='float32' only")
        put(self, "mean", mean)
        put(self, "std", std)

    @property
    def normalized(self) -> bool:
        return self.mean != (0.0,) * 3 or self.std != (1.0,) * 3

    def describe(self) -> str:
        """The chain in torchvision's words, e.g. 'RandomResizedCrop(size=(224, 224), scale=(0.08, 1),
        ratio=(0.75, 1.33333)) -> RandomHorizontalFlip(p=0.5) -> ToTensor() -> Normalize(...)'."""
        h, w = self.size
        if self.crop == "random_resized_crop":
            scale = f"({_fmt(self.scale[0])}, {_fmt(self.scale[1])})"
            ratio = f"({_fmt(self.ratio[0])}, {_fmt(self.ratio[1])})"
            parts = [f"RandomResizedCrop(size=({h}, {w}), scale={scale}, ratio={ratio})"]
        else:
            parts = []
            if self.resize is not None:
                parts.append(f"Resize(size={self.resize if isinstance(self.resize, int) else tuple(self.resize)})")
            if self.resize is None or (self.size != self.resize):
                parts.append(f"CenterCrop(size=({h}, {w}))")
        if self.flip > 0:
            parts.append(f"RandomHorizontalFlip(p={_fmt(self.flip)})")
        if self.output == "float32":
            parts.append("ToTensor()")
            if self.normalized:
                parts.append(f"Normalize(mean={tuple(round(v, 6) for v in self.mean)}, "
                             f"std={tuple(round(v, 6) for v in self.std)})")
        elif self.output == "uint8":
            parts.append("PILToTensor()")
        else:
            parts.append("uint8 HWC")
        return " -> ".join(parts)

    def _native(self, M, layout: str | None = None):
        """The loader's ImageTransform (module M); `layout` overrides the output's (the device path
        asks uint8_chw for a float32 chain and normalises on the GPU)."""
        t = M.ImageTransform()
        t.crop = self.crop
        t.out_h, t.out_w = self.size
        if self.crop == "random_resized_crop":
            t.scale_min, t.scale_max = self.scale
            t.ratio_min, t.ratio_max = self.ratio
        elif isinstance(self.resize, int):
            t.resize_short = self.resize
        elif self.resize is not None:
            t.resize_h, t.resize_w = self.resize
        t.flip_p = self.flip
        t.layout = layout or {"float32": "float32_chw", "uint8": "uint8_chw", "uint8_hwc": "uint8_hwc"}[self.output]
        if t.layout == "float32_chw":
            t.norm_mean = list(self.mean)
            t.norm_std = list(self.std)
        t.validate()
        return t


# ---------------------------------------------------------------------------------------------
# torchvision -> ImageTransform


class _Refused(Exception):
    """One line: why a chain cannot run natively."""


def native_transform(transform):
    """(ImageTransform, None) when `transform` (a torchvision transform, a Compose of them, v1 or
    v2, a list of them, or an ImageTransform) runs natively with the same result; else (None,
    reason), the reason one line naming the transform and what cannot be honoured."""
    try:
        return _map(transform), None
    except _Refused as e:
        return None, str(e)


def _flatten(t, out: list) -> list:
    if isinstance(t, (list, tuple)):
        for x in t:
            _flatten(x, out)
    elif _tv_class(t) == "Compose":
        _flatten(list(t.transforms), out)
    else:
        out.append(t)
    return out


def _tv_class(t) -> str | None:
    """The class name of a torchvision transform (v1 or v2), None for anything else."""
    module = getattr(type(t), "__module__", "") or ""
    if module == "torchvision.transforms" or module.startswith("torchvision.transforms."):
        return type(t).__name__
    return None


def _bilinear(t, name: str) -> None:
    interp = getattr(t, "interpolation", "bilinear")
    value = getattr(interp, "value", interp)
    # PIL.Image.BILINEAR (2): torchvision still accepts Pillow's integer constants.
    if value != "bilinear" and not (isinstance(value, int) and value == 2):
        shown = getattr(interp, "name", None) or str(value)
        raise _Refused(f"{name}(interpolation={shown.lower()}): the native resize is bilinear only")


def _antialias(t, name: str, state: str) -> None:
    # On a PIL image torchvision always antialiases (the argument is ignored); on a tensor
    # antialias=False is a plain bilinear that aliases, which the native resize does not do.
    if state != "pil" and getattr(t, "antialias", True) is not True:
        raise _Refused(f"{name}(antialias={t.antialias!r}) on a tensor: the native resize is antialiased "
                       "(as torchvision on a PIL image, or on a tensor with antialias=True)")


def _size2(v, name: str, what: str = "size") -> tuple:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    try:
        vals = [int(x) for x in v]
    except TypeError:
        raise _Refused(f"{name}({what}={v!r}): not a size") from None
    if len(vals) == 1:
        return (vals[0], vals[0])
    if len(vals) != 2:
        raise _Refused(f"{name}({what}={v!r}): not a size")
    return tuple(vals)


def _dtype_name(d) -> str:
    return str(d).replace("torch.", "")


def _map(transform) -> ImageTransform:
    if isinstance(transform, ImageTransform):
        return transform
    if transform is None:
        raise _Refused("no transform: an ImageFolder then yields PIL images, which torch's default collate "
                       "cannot batch")
    steps = _flatten(transform, [])
    state = "pil"  # what the chain holds so far: pil, uint8 (tensor), float (tensor), normalized
    rrc = resize = center = None
    flip = None  # a flip before RandomResizedCrop or Resize gives the same distribution as after
    mean = std = None
    for t in steps:
        name = _tv_class(t)
        if name is None:
            what = getattr(t, "__qualname__", None) or type(t).__name__
            raise _Refused(f"{what} is not a torchvision transform: arbitrary Python code cannot run natively")
        v2 = ".v2" in type(t).__module__
        if name in ("RandomResizedCrop", "Resize", "CenterCrop") and state == "normalized":
            raise _Refused(f"{name} after Normalize: the native chain crops and resizes before normalising")
        if name == "RandomResizedCrop":
            if rrc or resize or center:
                raise _Refused("RandomResizedCrop after another crop or resize: the native chain has one")
            _bilinear(t, name)
            _antialias(t, name, state)
            size = _size2(t.size, name)
            scale = tuple(float(x) for x in t.scale)
            ratio = tuple(float(x) for x in t.ratio)
            if not (0 < scale[0] <= scale[1] <= 1):
                raise _Refused(f"RandomResizedCrop(scale={scale}): the native crop needs 0 < min <= max <= 1")
            if not (0 < ratio[0] <= ratio[1]):
                raise _Refused(f"RandomResizedCrop(ratio={ratio}): the native crop needs 0 < min <= max")
            rrc = (size, scale, ratio)
        elif name == "Resize":
            if rrc:
                raise _Refused("Resize after RandomResizedCrop: the native chain resizes once")
            if resize or center:
                raise _Refused("Resize after another Resize or a CenterCrop: the native chain is Resize then "
                               "CenterCrop")
            _bilinear(t, name)
            _antialias(t, name, state)
            if getattr(t, "max_size", None) is not None:
                raise _Refused(f"Resize(max_size={t.max_size}): not supported natively")
            s = t.size
            if s is None:
                raise _Refused("Resize(size=None): not supported natively")
            if isinstance(s, int) and not isinstance(s, bool):
                resize = int(s)
            else:
                vals = [int(x) for x in s]
                if len(vals) not in (1, 2):
                    raise _Refused(f"Resize(size={s!r}): not a size")
                resize = vals[0] if len(vals) == 1 else tuple(vals)
        elif name == "CenterCrop":
            if rrc:
                raise _Refused("CenterCrop after RandomResizedCrop: the native chain crops once")
            if center:
                raise _Refused("a second CenterCrop: the native chain crops once")
            if flip is not None:
                # The centre of an odd margin rounds one way: flipping first moves the crop by a pixel.
                raise _Refused("RandomHorizontalFlip before CenterCrop: the native chain flips after cropping")
            center = _size2(t.size, name)
        elif name == "RandomHorizontalFlip":
            if flip is not None:
                raise _Refused("a second RandomHorizontalFlip: the native chain flips once")
            flip = float(t.p)
            if not (0 <= flip <= 1):
                raise _Refused(f"RandomHorizontalFlip(p={t.p}): not a probability")
        elif name == "ToTensor":
            if state != "pil":
                raise _Refused("ToTensor on a tensor: the native chain converts a PIL image once")
            _check_default_dtype()
            state = "float"
        elif name in ("PILToTensor", "ToImage"):
            if state != "pil":
                raise _Refused(f"{name} on a tensor: the native chain converts a PIL image once")
            state = "uint8"
        elif name in ("ConvertImageDtype", "ToDtype"):
            dtype = t.dtype
            if isinstance(dtype, dict):
                raise _Refused(f"{name} with a dtype per type: not supported natively")
            d = _dtype_name(dtype)
            scale = True if name == "ConvertImageDtype" else bool(getattr(t, "scale", False))
            if state == "pil":
                effect = "it does nothing there" if v2 else "torchvision fails"
                raise _Refused(f"{name} on a PIL image (before ToTensor / PILToTensor{' / ToImage' if v2 else ''}): "
                               f"{effect}")
            if d == "uint8" and state == "uint8":
                continue
            if d != "float32":
                raise _Refused(f"{name}(dtype={dtype}): the native chain gives float32 or uint8")
            if state == "uint8":
                if not scale:
                    raise _Refused(f"{name}(float32, scale=False): values 0-255 as floats are not a native output")
                state = "float"
        elif name == "ToPureTensor":
            if state == "pil":
                raise _Refused("ToPureTensor on a PIL image: it does nothing there")
        elif name == "Normalize":
            if state == "pil":
                raise _Refused("Normalize on a PIL image: torchvision fails (it needs a float tensor)")
            if state == "uint8":
                raise _Refused("Normalize on a uint8 tensor: torchvision fails (convert to float32 first)")
            if state == "normalized":
                raise _Refused("a second Normalize: the native chain normalises once")
            try:
                mean = [float(x) for x in t.mean]
                std = [float(x) for x in t.std]
            except TypeError:
                mean = [float(t.mean)]
                std = [float(t.std)]
            if len(mean) == 1:
                mean *= 3
            if len(std) == 1:
                std *= 3
            if len(mean) != 3 or len(std) != 3:
                raise _Refused(f"Normalize(mean={t.mean}, std={t.std}): needs 1 or 3 values per list (RGB)")
            if any(s == 0 for s in std) or not all(math.isfinite(v) for v in mean + std):
                raise _Refused(f"Normalize(std={t.std}): a zero or non-finite value")
            state = "normalized"
        elif name == "Lambda":
            raise _Refused("Lambda runs arbitrary Python code, which the native chain cannot")
        else:
            raise _Refused(f"{name} is not one the native chain runs ({NATIVE})")
    if state == "pil":
        raise _Refused("the chain ends in a PIL image, which torch's default collate cannot batch "
                       "(ToTensor or PILToTensor is missing)")
    output = "uint8" if state == "uint8" else "float32"
    norm = {"mean": tuple(mean), "std": tuple(std)} if mean is not None else {}
    p = flip or 0.0
    if rrc:
        size, scale, ratio = rrc
        return ImageTransform("random_resized_crop", size, scale, ratio, None, p, output, **norm)
    if center:
        return ImageTransform("resize_center_crop", center, resize=resize, flip=p, output=output, **norm)
    if isinstance(resize, tuple):
        return ImageTransform("resize_center_crop", resize, resize=resize, flip=p, output=output, **norm)
    if resize is not None:
        raise _Refused(f"Resize({resize}) without a crop keeps each image's aspect ratio: images of different "
                       "sizes cannot be batched")
    raise _Refused("no crop or resize: images of different sizes cannot be batched")


def _check_default_dtype() -> None:
    # ToTensor converts to torch's default dtype: float32 unless the program changed it.
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.get_default_dtype() != torch.float32:
        raise _Refused(f"ToTensor with torch's default dtype {torch.get_default_dtype()}: the native chain "
                       "gives float32")
