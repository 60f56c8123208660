"""torchvision chains and what stallscope.reference_loader.native_transform must make of them: the
classic chains it maps (with the ImageTransform expected) and those it refuses (with a word of the
reason expected). `T` is torchvision.transforms, torchvision.transforms.v2, or the stand-ins of
test_reference_loader_jpeg.py (classes of the same names and documented attributes); the same
cases run against each.
"""

from __future__ import annotations

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def accepted(T, torch, IT, v2: bool):
    """[(label, chain, expected ImageTransform)]"""
    n = T.Normalize(MEAN, STD)
    cases = [
        ("imagenet train", T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), n]),
         IT(size=224, flip=0.5, mean=MEAN, std=STD)),
        ("imagenet eval", T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), n]),
         IT("resize_center_crop", 224, resize=256, mean=MEAN, std=STD)),
        ("uint8 rectangle", T.Compose([T.RandomResizedCrop((160, 192), scale=(0.25, 1.0), ratio=(0.5, 2.0)),
                                       T.RandomHorizontalFlip(p=1.0), T.PILToTensor()]),
         IT(size=(160, 192), scale=(0.25, 1.0), ratio=(0.5, 2.0), flip=1.0, output="uint8")),
        ("resize (h, w)", T.Compose([T.Resize((120, 150)), T.ToTensor()]),
         IT("resize_center_crop", (120, 150), resize=(120, 150))),
        ("center crop, uint8 to float", T.Compose([T.CenterCrop(200), T.PILToTensor(),
                                                   T.ConvertImageDtype(torch.float), n]),
         IT("resize_center_crop", 200, mean=MEAN, std=STD)),
        ("resize [256]", T.Compose([T.Resize([256]), T.CenterCrop((224, 200)), T.ToTensor()]),
         IT("resize_center_crop", (224, 200), resize=256)),
        ("flip first", T.Compose([T.RandomHorizontalFlip(0.3), T.RandomResizedCrop(96), T.ToTensor()]),
         IT(size=96, flip=0.3)),
        ("nested Compose", T.Compose([T.Compose([T.RandomResizedCrop(64)]), T.Compose([T.ToTensor()])]),
         IT(size=64)),
        ("flip on the tensor", T.Compose([T.Resize(72), T.CenterCrop(64), T.ToTensor(), n, T.RandomHorizontalFlip()]),
         IT("resize_center_crop", 64, resize=72, flip=0.5, mean=MEAN, std=STD)),
        ("one-value Normalize", T.Compose([T.CenterCrop(32), T.ToTensor(), T.Normalize([0.5], [0.25])]),
         IT("resize_center_crop", 32, mean=(0.5,) * 3, std=(0.25,) * 3)),
    ]
    if v2:
        cases += [
            ("v2 recipe, ToImage first", T.Compose([T.ToImage(), T.RandomResizedCrop(224, antialias=True),
                                                    T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True), n]),
             IT(size=224, flip=0.5, mean=MEAN, std=STD)),
            ("v2 uint8", T.Compose([T.Resize(256), T.CenterCrop(224), T.ToImage(), T.ToDtype(torch.uint8, scale=True),
                                    T.ToPureTensor()]),
             IT("resize_center_crop", 224, resize=256, output="uint8")),
        ]
    return cases


def refused(T, torch, v2: bool):
    """[(label, chain, a phrase the reason must hold)]"""
    n = T.Normalize(MEAN, STD)
    bicubic = T.InterpolationMode.BICUBIC
    nearest = T.InterpolationMode.NEAREST
    cases = [
        ("ColorJitter", T.Compose([T.RandomResizedCrop(224), T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor()]),
         "ColorJitter is not one"),
        ("RandomCrop", T.Compose([T.RandomCrop(224), T.ToTensor()]), "RandomCrop is not one"),
        ("Lambda", T.Compose([T.RandomResizedCrop(224), T.ToTensor(), T.Lambda(lambda x: x * 2)]), "Lambda runs"),
        ("a function", T.Compose([T.RandomResizedCrop(224), T.ToTensor(), lambda x: x]),
         "is not a torchvision transform"),
        ("bicubic", T.Compose([T.RandomResizedCrop(224, interpolation=bicubic), T.ToTensor()]),
         "interpolation=bicubic"),
        ("nearest", T.Compose([T.Resize(256, interpolation=nearest), T.CenterCrop(224), T.ToTensor()]),
         "interpolation=nearest"),
        ("max_size", T.Compose([T.Resize(200, max_size=300), T.CenterCrop(224), T.ToTensor()]), "max_size"),
        ("antialias off on a tensor", T.Compose([T.PILToTensor(), T.RandomResizedCrop(224, antialias=False),
                                                 T.ConvertImageDtype(torch.float)]), "antialias=False"),
        ("scale above 1", T.Compose([T.RandomResizedCrop(224, scale=(0.5, 1.5)), T.ToTensor()]), "scale="),
        ("Normalize on PIL", T.Compose([T.RandomResizedCrop(224), n, T.ToTensor()]), "Normalize on a PIL image"),
        ("Normalize on uint8", T.Compose([T.RandomResizedCrop(224), T.PILToTensor(), n]), "uint8 tensor"),
        ("Resize(int) alone", T.Compose([T.Resize(256), T.ToTensor()]), "aspect ratio"),
        ("no crop", T.Compose([T.ToTensor(), n]), "no crop or resize"),
        ("ends in PIL", T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]), "ends in a PIL image"),
        ("no transform", None, "no transform"),
        ("flip before CenterCrop", T.Compose([T.RandomHorizontalFlip(), T.CenterCrop(224), T.ToTensor()]),
         "before CenterCrop"),
        ("two resizes", T.Compose([T.RandomResizedCrop(256), T.Resize(224), T.ToTensor()]), "resizes once"),
        ("two flips", T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.RandomHorizontalFlip(),
                                 T.ToTensor()]), "second RandomHorizontalFlip"),
        ("float64", T.Compose([T.CenterCrop(224), T.PILToTensor(), T.ConvertImageDtype(torch.float64)]), "float64"),
        ("crop after Normalize", T.Compose([T.ToTensor(), n, T.CenterCrop(224)]), "after Normalize"),
    ]
    if v2:
        cases += [
            ("v2 ToDtype without scale", T.Compose([T.ToImage(), T.CenterCrop(224), T.ToDtype(torch.float32)]),
             "scale=False"),
            ("v2 ToDtype on PIL", T.Compose([T.CenterCrop(224), T.ToDtype(torch.float32, scale=True), T.ToImage()]),
             "on a PIL image"),
            ("v2 Resize(None, max_size)", T.Compose([T.Resize(None, max_size=256), T.CenterCrop(224), T.ToTensor()]),
             "max_size"),
        ]
    return cases
