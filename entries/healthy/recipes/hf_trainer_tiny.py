"""Tiny HF Trainer run, fully offline, on CPU.

A small BERT is built from a config and saved to a local folder, then loaded
again with a classification head, so transformers prints its usual
"Some weights ... were not initialized" warning. A word-level tokenizer is
trained on the fly; the DataLoader forks workers after the tokenizer has run,
which makes the tokenizers library print its fork warning.
Usage: python hf_trainer_tiny.py WORK_DIR
"""
import random
import sys
from pathlib import Path

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (BertConfig, BertForSequenceClassification, BertModel,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]


def sentences(n: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(n)]


def main() -> None:
    work = Path(sys.argv[1])
    rng = random.Random(0)
    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(sentences(200, rng), trainers.WordLevelTrainer(
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="[PAD]",
                                        unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]")

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(work / "base")
    model = BertForSequenceClassification.from_pretrained(work / "base", num_labels=2)

    texts = sentences(512, rng)
    labels = [int("alpha" in t) for t in texts]
    data = Dataset.from_dict({"text": texts, "label": labels}).train_test_split(test_size=0.125, seed=0)
    data = data.map(lambda b: tokenizer(b["text"], truncation=True, max_length=32,
                                        padding="max_length"), batched=True)

    args = TrainingArguments(output_dir=str(work / "out"), num_train_epochs=3,
                             per_device_train_batch_size=16, learning_rate=5e-4,
                             logging_steps=5, eval_strategy="epoch", save_strategy="no",
                             report_to="none", dataloader_num_workers=2, use_cpu=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=data["train"], eval_dataset=data["test"])
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
