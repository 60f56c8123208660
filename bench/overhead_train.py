"""A CPU training loop for the overhead benchmark (bench/overhead_bench.py).

--mode data:     the DataLoader is the bottleneck (2 workers, each sample costs ~0.6 ms of
                 sleep plus tensor work; a small model step).
--mode compute:  the step is the bottleneck (in-memory data, no workers, a larger MLP).
--mode tiny:     5,000 tiny batches from memory (batch_size=4, no workers, an empty step; about
                 50 us per batch on an idle machine): what the per-batch hooks cost, in us per batch.
--mode hf:       an HF transformers Trainer (with accelerate) on a small BERT built in code (nothing is
                 downloaded), in-memory token data, no workers; samples/s from a Trainer callback.
--profiler:      wrap the loop in torch.profiler.profile (CPU activities), as a user would.
--seconds S:     train for S seconds instead (epochs repeat), and with --step-log FILE write every
                 step's end time (time.perf_counter, CLOCK_MONOTONIC) there as JSON; used by
                 bench/attach_bench.py, which attaches while it runs.
Prints one JSON line: {"samples_per_s": ..., "batches": ...} (tiny adds "us_per_batch" and
"cpu_us_per_batch", the loop thread's CPU time per batch).
"""
import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n, sleep_s):
        self.n = n
        self.sleep_s = sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), i % 10


class FastDataset(Dataset):
    def __init__(self, n, dim=256):
        self.x = torch.randn(n, dim)
        self.y = torch.randint(0, 10, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Tokens(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(2, 1000, (n, 32), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(32, dtype=torch.long), "labels": self.labels[i]}


def hf_trainer(batches, bs, profiler):
    """samples/s of an HF Trainer run, from the end of step 5 to the end of the last step."""
    import tempfile

    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

    class StepClock(TrainerCallback):
        def __init__(self):
            self.ends = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64, num_labels=2)
    clock = StepClock()
    with tempfile.TemporaryDirectory(prefix="stallscope-hf-") as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=bs, max_steps=batches,
                                 dataloader_num_workers=0, save_strategy="no", logging_strategy="no",
                                 report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
        trainer = Trainer(model=BertForSequenceClassification(cfg), args=args,
                          train_dataset=Tokens(bs * batches), callbacks=[clock])
        if profiler:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU]):
                trainer.train()
        else:
            trainer.train()
    ends = clock.ends[4:]  # skip warm-up (first allocations, the loader's start)
    return bs * (len(ends) - 1) / (ends[-1] - ends[0])


def tiny(batches, profiler):
    """(samples/s, us per batch, us of the loop thread's CPU time per batch) of a loop over tiny
    in-memory batches with an empty step."""
    bs = 4
    loader = DataLoader(FastDataset(bs * batches, dim=8), batch_size=bs, num_workers=0)

    def loop():
        n = 0
        t0 = None
        c0 = None
        for i, (x, _y) in enumerate(loader):
            if i == 50:  # skip warm-up (the first allocations)
                t0 = time.perf_counter()
                c0 = time.thread_time()
            n += len(x)  # the step: nothing, so that what next() costs is all there is
        return time.perf_counter() - t0, time.thread_time() - c0

    if profiler:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            dt, cpu = loop()
    else:
        dt, cpu = loop()
    n = batches - 50
    return bs * n / dt, dt / n * 1e6, cpu / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["data", "compute", "hf", "tiny"], required=True)
    ap.add_argument("--batches", type=int, default=None, help="default: about 2 s of training per mode")
    ap.add_argument("--profiler", action="store_true")
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--step-log", default="")
    args = ap.parse_args()
    if args.batches is None:
        args.batches = {"data": 150, "compute": 400, "hf": 200, "tiny": 5000}[args.mode]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.mode == "hf":
        rate = hf_trainer(args.batches, 16, args.profiler)
        print(json.dumps({"samples_per_s": rate, "batches": args.batches}))
        return
    if args.mode == "tiny":
        rate, us, cpu_us = tiny(args.batches, args.profiler)
        print(json.dumps({"samples_per_s": rate, "batches": args.batches, "us_per_batch": us,
                          "cpu_us_per_batch": cpu_us}))
        return
    bs = 32
    if args.mode == "data":
        n = bs * (args.batches if not args.seconds else 1000000)  # one epoch for a timed run
        loader = DataLoader(SlowDataset(n, 0.0006), batch_size=bs, num_workers=2)
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    else:
        loader = DataLoader(FastDataset(bs * args.batches), batch_size=bs, num_workers=0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                    torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def loop():
        n = 0
        t0 = None
        for i, (x, y) in enumerate(loader):
            if i == 5:  # skip warm-up (worker start, first allocations)
                t0 = time.perf_counter()
                n = 0
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            n += len(x)
        return n / (time.perf_counter() - t0)

    if args.seconds:
        ends = []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
                ends.append(time.perf_counter())
                if len(ends) == 1:
                    print("TRAINING", flush=True)  # attach_bench times its phases from here
                if ends[-1] - t0 >= args.seconds:
                    break
        if args.step_log:
            with open(args.step_log, "w") as f:
                json.dump({"batch_size": bs, "ends": ends}, f)
        print(json.dumps({"samples_per_s": bs * len(ends) / (ends[-1] - t0), "batches": len(ends)}))
        return
    if args.profiler:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            rate = loop()
    else:
        rate = loop()
    print(json.dumps({"samples_per_s": rate, "batches": args.batches}))


if __name__ == "__main__":
    main()
