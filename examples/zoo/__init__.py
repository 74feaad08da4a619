"""A zoo of modern sequence mixers, each an ordinary ``nn.Module`` behind a factory
``factory(d_in, d_out, depth, width, max_len=64)`` mapping (batch, tokens, d_in) ->
(batch, tokens, d_out); each file stands alone, so ``examples/zoo/<file>.py:<factory>`` works
as a ``precision probe`` / ``precision ops`` spec.

======================  ==================================================================
``llama.py:llama``      RoPE, RMSNorm, SwiGLU, causal ``F.scaled_dot_product_attention``
``mamba.py:mamba``      selective state-space scan (softplus step, unrolled recurrence)
``hyena.py:hyena``      FFT long convolution (rfft / irfft) and a depthwise short Conv1d
``retnet.py:retnet``    retention with per-head decay and GroupNorm
``linear_attention.py:linear_attention``  causal linear attention, ELU + 1 feature map
``deltanet.py:deltanet``  delta-rule recurrence with L2-normalised keys
``moe.py:moe``          top-2 mixture of experts (topk routing)
======================  ==================================================================
"""
