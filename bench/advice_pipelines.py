"""Real input pipelines for bench/advice_bench.py's judged set: the loops the what-if model is judged
on and never tuned on. Each is what a user writes, with nothing of stallscope in it; like
bench/advice_workload.py it takes the DataLoader's settings as flags, times its own loop (from the
first batch of the first epoch to the end of the last step) and prints one line:
RESULT <samples> <seconds> <samples/s>.

  jpeg       an ImageFolder of JPEGs decoded with Pillow, a random resized crop, a flip and a
             normalisation written by hand (torchvision does not load beside the CPU torch here), a
             small CNN; a plain training loop
  lightning  the same data and CNN as a LightningModule, trained by pytorch_lightning's Trainer
  text       a corpus of sentences cleaned in Python and tokenised by a BPE tokenizer (HF
             tokenizers, trained in code), padded to 128 tokens; an embedding and a transformer layer
  hf         the same tokenised dataset and a small BERT (built from a config in code: nothing is
             downloaded), trained by transformers' Trainer with the DataLoader settings as its
             dataloader_* arguments

The JPEGs and the corpus are made once in --data (default $TMPDIR/stallscope-advice-data).

    python bench/advice_pipelines.py --pipeline jpeg --workers 2 --prefetch 2 --persistent 1 --epochs 2
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

IMAGES = 768
SIDE = 224  # the JPEGs' size on disk
CROP = 128  # the crop the model sees
SENTENCES = 4096
TOKENS = 128


def make_jpegs(root: str) -> str:
    """An ImageFolder of IMAGES JPEGs in 4 classes: smooth gradients with noise and shapes, as
    photos compress (not white noise, which no camera makes)."""
    from PIL import Image, ImageDraw

    folder = os.path.join(root, f"jpegs-{IMAGES}-{SIDE}")
    if os.path.exists(os.path.join(folder, "done")):
        return folder
    rng = np.random.default_rng(0)
    for i in range(IMAGES):
        cls = os.path.join(folder, f"class{i % 4}")
        os.makedirs(cls, exist_ok=True)
        y, x = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32) / SIDE
        base = np.stack([x * rng.uniform(50, 250), y * rng.uniform(50, 250), (x + y) * rng.uniform(20, 120)], -1)
        img = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        im = Image.fromarray(img)
        d = ImageDraw.Draw(im)
        for _ in range(6):
            x0, y0 = rng.integers(0, SIDE - 40, 2)
            d.ellipse([x0, y0, x0 + rng.integers(10, 60), y0 + rng.integers(10, 60)],
                      fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
        im.save(os.path.join(cls, f"{i:05d}.jpg"), quality=90)
    open(os.path.join(folder, "done"), "w").close()
    return folder


class JpegFolder(Dataset):
    """ImageFolder's layout, Pillow's decode, the usual training transforms written by hand."""

    MEAN = np.array([0.485, 0.456, 0.406], np.float32)
    STD = np.array([0.229, 0.224, 0.225], np.float32)

    def __init__(self, folder: str):
        self.items = []
        for c, name in enumerate(sorted(os.listdir(folder))):
            d = os.path.join(folder, name)
            if os.path.isdir(d):
                self.items += [(os.path.join(d, f), c) for f in sorted(os.listdir(d))]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        from PIL import Image

        path, label = self.items[i]
        rng = random.Random(i)
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            s = rng.uniform(0.35, 1.0) ** 0.5
            cw, ch = int(w * s), int(h * s)
            x0, y0 = rng.randint(0, w - cw), rng.randint(0, h - ch)
            im = im.resize((CROP, CROP), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
            if rng.random() < 0.5:
                im = im.transpose(Image.FLIP_LEFT_RIGHT)
            a = np.asarray(im, dtype=np.float32) / 255.0
        a = (a - self.MEAN) / self.STD
        return torch.from_numpy(a.transpose(2, 0, 1).copy()), label


def cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 4))


WORDS = None


def make_corpus(root: str) -> tuple[str, str]:
    """SENTENCES sentences of 40-120 words with punctuation and case, and a BPE tokenizer trained
    on them (HF tokenizers), both made once."""
    folder = os.path.join(root, f"text-{SENTENCES}")
    corpus, tok = os.path.join(folder, "corpus.txt"), os.path.join(folder, "tokenizer.json")
    if os.path.exists(tok):
        return corpus, tok
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(0)
    syll = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "pa", "dor", "len", "tis", "gam", "bur"]
    vocab = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    with open(corpus, "w") as f:
        for _ in range(SENTENCES):
            words = [rng.choice(vocab) for _ in range(rng.randint(40, 120))]
            words[0] = words[0].capitalize()
            text = " ".join(w + ("," if rng.random() < 0.08 else "") for w in words) + "."
            f.write(f"{text}  <b>{rng.randint(0, 9999)}</b>\n")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    t = Tokenizer(models.BPE(unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.train([corpus], trainers.BpeTrainer(vocab_size=4000, special_tokens=["[PAD]", "[UNK]"]))
    t.save(tok)
    return corpus, tok


class Sentences(Dataset):
    """Each sample: the raw line cleaned in Python (markup stripped, lower case, numbers masked,
    spaces squeezed), tokenised, truncated and padded to TOKENS."""

    def __init__(self, corpus: str, tok: str):
        with open(corpus) as f:
            self.lines = f.read().splitlines()
        self.tok_path = tok
        self.tok = None

    def __len__(self):
        return len(self.lines)

    def clean(self, s: str) -> str:
        s = re.sub(r"<[^>]+>", " ", s)
        s = re.sub(r"\d+", "0", s.lower())
        s = re.sub(r"([,.])", r" \1 ", s)
        return re.sub(r"\s+", " ", s).strip()

    def __getitem__(self, i):
        if self.tok is None:  # per process: a worker loads its own
            from tokenizers import Tokenizer
            self.tok = Tokenizer.from_file(self.tok_path)
        ids = self.tok.encode(self.clean(self.lines[i])).ids[:TOKENS]
        mask = [1] * len(ids) + [0] * (TOKENS - len(ids))
        ids = ids + [0] * (TOKENS - len(ids))
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "labels": torch.tensor(i % 2)}


class TextModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(4000, 64)
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.out = torch.nn.Linear(64, 2)

    def forward(self, input_ids, attention_mask):
        h = self.layer(self.emb(input_ids), src_key_padding_mask=attention_mask == 0)
        return self.out(h.mean(1))


def loader_kwargs(a) -> dict:
    k = {"batch_size": a.batch_size, "num_workers": a.workers, "shuffle": True, "drop_last": True}
    if a.workers > 0:
        k["prefetch_factor"] = a.prefetch
        k["persistent_workers"] = bool(a.persistent)
    return k


class Clock:
    """The loop's own clock: from the first batch in hand to the end of the last step."""

    def __init__(self):
        self.t0 = None
        self.t1 = None
        self.samples = 0

    def batch(self):
        if self.t0 is None:
            self.t0 = time.perf_counter()

    def step(self, n):
        self.samples += n
        self.t1 = time.perf_counter()

    def result(self):
        s = self.t1 - self.t0
        print(f"RESULT {self.samples} {s:.4f} {self.samples / s:.3f}", flush=True)


def plain_loop(a, data, model, step):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(data, **loader_kwargs(a))
    clock = Clock()
    for _ in range(a.epochs):
        for b, batch in enumerate(loader):
            clock.batch()
            if b >= a.batches:
                break
            loss = step(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            clock.step(a.batch_size)
    clock.result()


def run_lightning(a, data):
    import pytorch_lightning as pl

    clock = Clock()

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = cnn()

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def train_dataloader(self):
            return DataLoader(data, **loader_kwargs(a))

    class Timer(pl.Callback):
        def on_train_batch_start(self, *args):
            clock.batch()

        def on_train_batch_end(self, *args):
            clock.step(a.batch_size)

    trainer = pl.Trainer(max_epochs=a.epochs, limit_train_batches=a.batches, accelerator="cpu", devices=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[Timer()], num_sanity_val_steps=0)
    trainer.fit(Module())
    clock.result()


def run_hf(a, data, out):
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    transformers.logging.set_verbosity_error()
    clock = Clock()

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, *args, **kwargs):
            clock.batch()

        def on_step_end(self, *args, **kwargs):
            clock.step(a.batch_size)

    cfg = BertConfig(vocab_size=4000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=TOKENS)
    torch.manual_seed(0)
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=a.batch_size, num_train_epochs=a.epochs,
                             max_steps=a.batches * a.epochs, report_to=[], save_strategy="no", logging_strategy="no",
                             dataloader_num_workers=a.workers, use_cpu=True, disable_tqdm=True,
                             dataloader_prefetch_factor=a.prefetch if a.workers else None,
                             dataloader_persistent_workers=bool(a.persistent) if a.workers else False)
    Trainer(model=BertForSequenceClassification(cfg), args=args, train_dataset=data,
            callbacks=[Timer()]).train()
    clock.result()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", choices=["jpeg", "lightning", "text", "hf"], required=True)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--persistent", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=20, help="batches per epoch")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "stallscope-advice-data"))
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    os.makedirs(a.data, exist_ok=True)
    if a.pipeline in ("jpeg", "lightning"):
        data = JpegFolder(make_jpegs(a.data))
        if a.pipeline == "jpeg":
            plain_loop(a, data, cnn(), lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]))
        else:
            run_lightning(a, data)
    else:
        data = Sentences(*make_corpus(a.data))
        if a.pipeline == "text":
            plain_loop(a, data, TextModel(), lambda m, b: torch.nn.functional.cross_entropy(
                m(b["input_ids"], b["attention_mask"]), b["labels"]))
        else:
            with tempfile.TemporaryDirectory() as out:
                run_hf(a, data, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
