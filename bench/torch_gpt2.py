"""The GPT-2 of sw-train --arch gpt2 in PyTorch CPU (float32), for
bench/train: learned position embeddings, LayerNorm with bias, causal
attention, the tanh-GELU MLP, biases on every linear layer, the head tied
to the token embedding, cross-entropy (nanoGPT's model, eager). Not a test
reference (that is tests/e2e/torch_reference.py, in float64)."""
import math

import torch


class GPT2(torch.nn.Module):
    def __init__(self, V, D, L, H, F, T):
        super().__init__()
        self.V, self.D, self.H, self.hd = V, D, H, D // H
        self.mask = torch.full((T, T), float("-inf")).triu(1)
        self.wte = torch.nn.Embedding(V, D)
        self.wpe = torch.nn.Embedding(T, D)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            b = torch.nn.Module()
            b.ln1, b.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
            b.qkv, b.o = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
            b.fc, b.proj = torch.nn.Linear(D, F), torch.nn.Linear(F, D)
            self.blocks.append(b)
        self.ln_f = torch.nn.LayerNorm(D)

    def logits(self, x):
        B, T = x.shape
        h = self.wte(x) + self.wpe(torch.arange(T))
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(h)).split(self.D, -1)
            q, k, v = (t.view(B, T, self.H, self.hd).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + self.mask[:T, :T]
            h = h + b.o((att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, self.D))
            h = h + b.proj(torch.nn.functional.gelu(b.fc(b.ln2(h)), approximate="tanh"))
        return self.ln_f(h) @ self.wte.weight.T

    def loss(self, x, y):
        return torch.nn.functional.cross_entropy(self.logits(x).view(-1, self.V), y.reshape(-1))
