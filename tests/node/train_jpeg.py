"""The reference loader's JPEG path on a bare node (tests/node/run.sh): stallscope.ReferenceLoader
over an ImageFolder tree of JPEGs (libjpeg-turbo decode, crop, resize, flip and normalisation in
the loader's threads), feeding a tiny CNN. Prints the number of samples seen and the last loss.
    python train_jpeg.py ROOT
"""

import sys

import torch

import stallscope


def main():
    root = sys.argv[1]
    torch.manual_seed(0)
    t = stallscope.ImageTransform(crop="random_resized_crop", size=64, flip=0.5,
                                  mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    loader = stallscope.ReferenceLoader.from_image_folder(root, t, batch_size=8, shuffle=True, threads=2)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(8, len(loader.classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen, loss = 0, None
    for _ in range(2):
        for images, labels in loader:
            assert images.shape[1:] == (3, 64, 64) and images.dtype == torch.float32, images.shape
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
            seen += len(labels)
    print(f"samples {seen} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
