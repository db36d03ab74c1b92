#!/usr/bin/python3
"""RoPE's inverse frequencies as Hugging Face's transformers computes them
(modeling_rope_utils.py: _compute_default_rope_parameters,
_compute_linear_scaling_rope_parameters, _compute_llama3_parameters), in
float32 torch, written from those formulas and not from scalewatch's
(lib/base/arch.c): the references torch_reference.py and
convert_reference.py take it from here."""
import math

import torch


def hf_inv_freq(theta, hd, kind="default", factor=1.0, low=1.0, high=4.0, n=8192):
    """RoPE's inverse frequencies as Hugging Face's modeling_rope_utils.py
    computes them, in float32: the default 1/theta^(2i/hd); linear (each
    over factor); llama3 (Llama 3.1's bands over the original context n:
    wavelengths below n/high kept, above n/low over factor, between them
    interpolated by s = (n/wavelength - low) / (high - low))"""
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    if kind == "linear":
        return inv / factor
    if kind == "llama3":
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > n / low, inv / factor, inv)
        s = (n / wavelen - low) / (high - low)
        smooth = (1 - s) * scaled / factor + s * scaled
        medium = ~(wavelen < n / high) * ~(wavelen > n / low)
        return torch.where(medium, smooth, scaled)
    assert kind in ("default", ""), f"rope type {kind}"
    return inv
