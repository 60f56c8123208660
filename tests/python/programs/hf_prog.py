"""A tiny HF transformers Trainer run (a BERT built from a small config in code: nothing is
downloaded) with a training and an evaluation dataset, evaluated at every epoch, for
tests/python/test_train_loops.py. Prints `RESULT {json}`: the Trainer's own counts (global_step,
train_samples_per_second, train_runtime), a clock around trainer.train(), and the line of the
trainer.train() call (where the user's code makes the loaders: the Trainer and accelerate make them
inside).

Usage: hf_prog.py OUTPUT_DIR [EPOCHS]
"""
import json
import sys
import time

import torch
import transformers
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

BATCH = 8
STEP_S = 0.004


class Tokens(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        ids = torch.tensor([(i * 7 + k) % 60 + 2 for k in range(12)])
        return {"input_ids": ids, "attention_mask": torch.ones(12, dtype=torch.long), "labels": torch.tensor(i % 2)}


class EvalTokens(Tokens):
    pass


class Slowed(BertForSequenceClassification):
    def forward(self, *args, **kwargs):
        if self.training:
            time.sleep(STEP_S)  # each step's own work, so that the run is not all framework overhead
        return super().forward(*args, **kwargs)


def main():
    torch.set_num_threads(1)  # the test machines have few cores
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    args = TrainingArguments(
        output_dir=sys.argv[1], per_device_train_batch_size=BATCH, per_device_eval_batch_size=BATCH,
        num_train_epochs=int(sys.argv[2]) if len(sys.argv) > 2 else 2,
        eval_strategy="epoch", save_strategy="no", logging_strategy="no", report_to=[],
        use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, seed=0, remove_unused_columns=False)
    trainer = Trainer(model=Slowed(cfg), args=args, train_dataset=Tokens(128), eval_dataset=EvalTokens(32))
    t0 = time.perf_counter()
    line = sys._getframe().f_lineno + 1
    out = trainer.train()
    t1 = time.perf_counter()
    print("RESULT " + json.dumps({
        "global_step": trainer.state.global_step, "batch_size": BATCH,
        "train_samples_per_second": out.metrics["train_samples_per_second"],
        "train_runtime": out.metrics["train_runtime"], "clock_s": t1 - t0, "train_line": line,
        "version": transformers.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
