"""A zoo of modern sequence mixers, each an ordinary ``nn.Module`` behind a factory
``factory(d_in, d_out, depth, width, max_len=64)`` mapping (batch, tokens, d_in) ->
(batch, tokens, d_out). One backbone, ``backbone.py:PreNormStack`` (input projection,
pre-norm residual mixer and MLP blocks, output projection), stacks every file's mixer; a file
defines its mixer (and MLP) and its factory, and finds the backbone from its own path, so
``examples/zoo/<file>.py:<factory>`` works as a ``precision probe`` / ``precision ops`` spec
from any directory.

======================  ==================================================================
``llama.py:llama``      RoPE, RMSNorm, SwiGLU, causal ``F.scaled_dot_product_attention``
``mamba.py:mamba``      selective state-space scan (softplus step, unrolled recurrence)
``hyena.py:hyena``      FFT long convolution (rfft / irfft) and a depthwise short Conv1d
``retnet.py:retnet``    retention with per-head decay and GroupNorm
``linear_attention.py:linear_attention``  causal linear attention, ELU + 1 feature map
``deltanet.py:deltanet``  delta-rule recurrence with L2-normalised keys
``moe.py:moe``          causal token mix, then top-2 mixture of experts (topk routing)
======================  ==================================================================
"""
