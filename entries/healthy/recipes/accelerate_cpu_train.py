"""Small Accelerate training loop on random data, CPU only.

Launched with `accelerate launch --cpu --num_processes N` (see README); every
process logs through accelerate's logger so the output shows per-process lines.
"""
import logging

import torch
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

logger = get_logger(__name__, log_level="INFO")


def main() -> None:
    # accelerate's logger has no handler of its own; use the usual HF example format.
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", level=logging.INFO)
    accelerator = Accelerator(cpu=True)
    logger.info(accelerator.state, main_process_only=False)
    set_seed(0)
    x = torch.randn(1024, 16)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True) * 0.1), batch_size=32, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    for epoch in range(6):
        for step, (xb, yb) in enumerate(data):
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step % 2 == 0:
                logger.info(f"epoch {epoch} step {step} loss {loss.item():.4f}", main_process_only=False)
        mean_loss = accelerator.gather(loss.detach().reshape(1)).mean()
        logger.info(f"epoch {epoch} done, mean last loss over processes {mean_loss.item():.4f}")
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
