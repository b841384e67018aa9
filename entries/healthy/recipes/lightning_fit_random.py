"""Lightning fit of a small regression model on random tensors, CPU only.

Usage: python lightning_fit_random.py DEVICES ROOT_DIR
DEVICES=1 runs in one process; DEVICES>1 uses strategy="ddp" (gloo on 127.0.0.1).
"""
import sys

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), prog_bar=True, sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def loader(n: int, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True) * 0.1), batch_size=32)


def main() -> None:
    devices, root = int(sys.argv[1]), sys.argv[2]
    L.seed_everything(0)
    trainer = L.Trainer(accelerator="cpu", devices=devices, max_epochs=8,
                        strategy="ddp" if devices > 1 else "auto", default_root_dir=root,
                        log_every_n_steps=5,
                        callbacks=[TQDMProgressBar()])  # the classic tqdm bar, not rich
    trainer.fit(Regressor(), loader(640, 1), loader(128, 2))


if __name__ == "__main__":
    main()
