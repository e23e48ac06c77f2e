"""A forkserver preload that stands for an import making a CUDA context (FlashInfer's GEMM
module does on a GPU machine): torch then marks every forked child as forked after CUDA was
initialised, which this machine without a GPU can only mark by hand."""

import torch

torch.cuda._is_in_bad_fork = lambda: True
